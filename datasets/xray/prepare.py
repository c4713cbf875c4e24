"""Prepare the xray dataset (MIMIC-CXR-JPG lungs from CheXmask, 5 sites): see datasets/xray/README.md.

python datasets/xray/prepare.py --chexmask <CheXmask folder or MIMIC-CXR-JPG.csv> \\
    --mimic <MIMIC-CXR-JPG folder> [--out DIR] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.append(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "custom")
)  # a checkout without lightyear installed (an installed one comes first)

from lightyear.data.prepare_cli import add_fractions, add_out_and_seed, resolve_out_as_given
from lightyear.data.xray import DATASET, IMAGE_SIZE, MIN_DICE, NUM_IMAGES, NUM_SITES, prepare_xray


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--chexmask",
        required=True,
        help="CheXmask's OriginalResolution/MIMIC-CXR-JPG.csv(.gz), or the folder that holds OriginalResolution/",
    )
    parser.add_argument(
        "--mimic", required=True, help="the MIMIC-CXR-JPG folder holding files/ and mimic-cxr-2.0.0-metadata.csv(.gz)"
    )
    parser.add_argument("--metadata", help="the MIMIC-CXR-JPG metadata CSV, if it is not in --mimic")
    add_out_and_seed(parser, DATASET, seed_of="the image draw and the splits")
    parser.add_argument(
        "--num-images", type=int, default=NUM_IMAGES, help=f"images drawn in all (default {NUM_IMAGES})"
    )
    parser.add_argument(
        "--num-sites", type=int, default=NUM_SITES, help=f"number of sites, equal shares (default {NUM_SITES})"
    )
    parser.add_argument(
        "--min-dice", type=float, default=MIN_DICE, help=f"keep masks with Dice RCA (Mean) >= this (default {MIN_DICE})"
    )
    parser.add_argument(
        "--image-size", type=int, default=IMAGE_SIZE, help=f"side of the resized images (default {IMAGE_SIZE})"
    )
    add_fractions(parser, what="image fractions")
    parser.add_argument(
        "--view-positions",
        nargs="+",
        metavar="VIEW",
        help="keep only these metadata ViewPosition values, e.g. PA AP (default: all)",
    )
    parser.add_argument(
        "--all-images-per-subject",
        action="store_true",
        help="allow several images of one patient (default: at most one)",
    )
    parser.add_argument(
        "--missing-images",
        choices=("error", "skip"),
        default="error",
        help="a listed JPG that is absent stops the run (default) or is passed over",
    )
    parser.add_argument("--chunksize", type=int, default=20000, help="CheXmask rows read at a time (default 20000)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    out = resolve_out_as_given(args.out, DATASET)
    summary = prepare_xray(
        args.chexmask,
        args.mimic,
        out,
        seed=args.seed,
        num_images=args.num_images,
        num_sites=args.num_sites,
        min_dice=args.min_dice,
        image_size=args.image_size,
        fractions=args.fractions,
        metadata=args.metadata,
        view_positions=args.view_positions,
        one_per_subject=not args.all_images_per_subject,
        missing_images=args.missing_images,
        chunksize=args.chunksize,
    )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

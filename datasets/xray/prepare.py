"""Prepare the xray dataset (MIMIC-CXR-JPG lungs from CheXmask, 5 sites): see datasets/xray/README.md.

    python datasets/xray/prepare.py --chexmask <CheXmask folder or MIMIC-CXR-JPG.csv> --mimic <MIMIC-CXR-JPG folder> [--out DIR] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

try:
    import lightyear  # noqa: F401
except ImportError:  # a checkout without the package installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "custom"))

from lightyear.data import DATA_ROOT_ENV
from lightyear.data.xray import DATASET, IMAGE_SIZE, MIN_DICE, NUM_IMAGES, NUM_SITES, prepare_xray


def fractions(text: str) -> tuple[float, float, float]:
    parts = tuple(float(p) for p in text.split(","))
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"expected three comma-separated fractions, got {text!r}")
    return parts


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chexmask", required=True, help="CheXmask's OriginalResolution/MIMIC-CXR-JPG.csv(.gz), or the folder that holds OriginalResolution/")
    parser.add_argument("--mimic", required=True, help="the MIMIC-CXR-JPG folder holding files/ and mimic-cxr-2.0.0-metadata.csv(.gz)")
    parser.add_argument("--metadata", help="the MIMIC-CXR-JPG metadata CSV, if it is not in --mimic")
    parser.add_argument("--out", help=f"output folder (default: ${DATA_ROOT_ENV}/{DATASET})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the image draw and the splits (default 0)")
    parser.add_argument("--num-images", type=int, default=NUM_IMAGES, help=f"images drawn in all (default {NUM_IMAGES})")
    parser.add_argument("--num-sites", type=int, default=NUM_SITES, help=f"number of sites, equal shares (default {NUM_SITES})")
    parser.add_argument("--min-dice", type=float, default=MIN_DICE, help=f"keep masks with Dice RCA (Mean) >= this (default {MIN_DICE})")
    parser.add_argument("--image-size", type=int, default=IMAGE_SIZE, help=f"side of the resized images (default {IMAGE_SIZE})")
    parser.add_argument("--fractions", type=fractions, default=(0.6, 0.2, 0.2), help="train,val,test image fractions per site (default 0.6,0.2,0.2)")
    parser.add_argument("--view-positions", nargs="+", metavar="VIEW", help="keep only these metadata ViewPosition values, e.g. PA AP (default: all)")
    parser.add_argument("--all-images-per-subject", action="store_true", help="allow several images of one patient (default: at most one)")
    parser.add_argument("--missing-images", choices=("error", "skip"), default="error", help="a listed JPG that is absent stops the run (default) or is passed over")
    parser.add_argument("--chunksize", type=int, default=20000, help="CheXmask rows read at a time (default 20000)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    out = args.out
    if not out:
        root = os.environ.get(DATA_ROOT_ENV)
        if not root:
            sys.exit(f"pass --out or set {DATA_ROOT_ENV} (the prepared data goes to ${DATA_ROOT_ENV}/{DATASET})")
        out = os.path.join(os.path.expanduser(root), DATASET)
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

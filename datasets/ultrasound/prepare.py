"""Prepare the ultrasound dataset (fetal liver, 5 sites): see datasets/ultrasound/README.md.

python datasets/ultrasound/prepare.py --raw <unzipped Mendeley folder> [--out DIR] [--seed 0]
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
from lightyear.data.ultrasound import DATASET, IMAGE_SIZE, NUM_SITES, prepare_ultrasound


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--raw",
        required=True,
        help="the unzipped Fetal Abdominal Structures Segmentation folder (holds ARRAY_FORMAT/ at some depth)",
    )
    add_out_and_seed(parser, DATASET, seed_of="the patient-to-site assignment and the splits")
    parser.add_argument(
        "--structure", default="liver", help="which mask to segment: artery, liver, stomach or vein (default liver)"
    )
    parser.add_argument("--num-sites", type=int, default=NUM_SITES, help=f"number of sites (default {NUM_SITES})")
    parser.add_argument(
        "--image-size", type=int, default=IMAGE_SIZE, help=f"side of the resized images (default {IMAGE_SIZE})"
    )
    add_fractions(parser, what="patient fractions")
    parser.add_argument(
        "--patient-id",
        choices=("number", "text"),
        default="number",
        help="read the digits after P as a number (P01 = P1, default) or as text",
    )
    parser.add_argument(
        "--image-source",
        choices=("npy", "png"),
        default="npy",
        help="take the image from the .npy dict (default) or from IMAGES/<name>.png",
    )
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    out = resolve_out_as_given(args.out, DATASET)
    summary = prepare_ultrasound(
        args.raw,
        out,
        seed=args.seed,
        structure=args.structure,
        num_sites=args.num_sites,
        image_size=args.image_size,
        fractions=args.fractions,
        patient_id=args.patient_id,
        image_source=args.image_source,
    )
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

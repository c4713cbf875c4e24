"""Prepare the ultrasound dataset (fetal liver, 5 sites): see datasets/ultrasound/README.md.

    python datasets/ultrasound/prepare.py --raw <unzipped Mendeley folder> [--out DIR] [--seed 0]
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
from lightyear.data.ultrasound import DATASET, IMAGE_SIZE, NUM_SITES, prepare_ultrasound


def fractions(text: str) -> tuple[float, float, float]:
    parts = tuple(float(p) for p in text.split(","))
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"expected three comma-separated fractions, got {text!r}")
    return parts


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raw", required=True, help="the unzipped Fetal Abdominal Structures Segmentation folder (holds ARRAY_FORMAT/ at some depth)")
    parser.add_argument("--out", help=f"output folder (default: ${DATA_ROOT_ENV}/{DATASET})")
    parser.add_argument("--seed", type=int, default=0, help="seed of the patient-to-site assignment and the splits (default 0)")
    parser.add_argument("--structure", default="liver", help="which mask to segment: artery, liver, stomach or vein (default liver)")
    parser.add_argument("--num-sites", type=int, default=NUM_SITES, help=f"number of sites (default {NUM_SITES})")
    parser.add_argument("--image-size", type=int, default=IMAGE_SIZE, help=f"side of the resized images (default {IMAGE_SIZE})")
    parser.add_argument("--fractions", type=fractions, default=(0.6, 0.2, 0.2), help="train,val,test patient fractions per site (default 0.6,0.2,0.2)")
    parser.add_argument("--patient-id", choices=("number", "text"), default="number", help="read the digits after P as a number (P01 = P1, default) or as text")
    parser.add_argument("--image-source", choices=("npy", "png"), default="npy", help="take the image from the .npy dict (default) or from IMAGES/<name>.png")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    out = args.out
    if not out:
        root = os.environ.get(DATA_ROOT_ENV)
        if not root:
            sys.exit(f"pass --out or set {DATA_ROOT_ENV} (the prepared data goes to ${DATA_ROOT_ENV}/{DATASET})")
        out = os.path.join(os.path.expanduser(root), DATASET)
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

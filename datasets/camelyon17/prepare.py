"""Prepare Camelyon17-WILDS for LIGHTYEAR: one site per hospital (5 sites) and split.csv.

    python datasets/camelyon17/prepare.py --raw /data/wilds --out $LIGHTYEAR_DATA_ROOT/camelyon17

See datasets/camelyon17/README.md for the raw data and the options.
"""

from __future__ import annotations

import argparse
import os
import sys

try:
    import lightyear  # noqa: F401
except ImportError:  # a checkout without the package installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "custom"))

from lightyear.data import camelyon17
from lightyear.data.image_folder import output_folder, split_summary


def fractions(text: str) -> tuple[float, float, float]:
    parts = tuple(float(p) for p in text.split(","))
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"expected three comma-separated fractions, got {text!r}")
    return parts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", required=True, help="the folder holding camelyon17_v1.0/ (or that folder itself)")
    parser.add_argument("--out", default=None, help="output folder (default: $LIGHTYEAR_DATA_ROOT/camelyon17)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the subsample and the splits (default 0)")
    parser.add_argument("--max-per-site", type=int, default=None, help="keep at most this many patches per hospital, drawn with the seed (default: all)")
    parser.add_argument("--fractions", type=fractions, default=(0.6, 0.2, 0.2), help="train,val,test fractions per site (default 0.6,0.2,0.2)")
    parser.add_argument("--copy-images", action="store_true", help="copy the listed patches into the output folder (default: list the raw patches by absolute path)")
    parser.add_argument("--no-check-files", dest="check_files", action="store_false", help="do not check that every listed patch exists")
    args = parser.parse_args(argv)
    try:
        out = output_folder(args.out, "camelyon17")
    except ValueError as err:
        parser.error(str(err))
    path = camelyon17.prepare_camelyon17(
        args.raw, out, seed=args.seed, max_per_site=args.max_per_site, fractions=args.fractions,
        copy_images=args.copy_images, check_files=args.check_files,
    )
    print(split_summary(path))
    if args.copy_images:
        print(f"patches copied under {os.path.join(out, 'patches')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Prepare Camelyon17-WILDS for LIGHTYEAR: one site per hospital (5 sites) and split.csv.

    python datasets/camelyon17/prepare.py --raw /data/wilds --out $LIGHTYEAR_DATA_ROOT/camelyon17

See datasets/camelyon17/README.md for the raw data and the options.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.append(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "custom")
)  # a checkout without lightyear installed (an installed one comes first)

from lightyear.data import camelyon17
from lightyear.data.image_folder import split_summary
from lightyear.data.prepare_cli import add_fractions, add_out_and_seed, resolve_out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", required=True, help="the folder holding camelyon17_v1.0/ (or that folder itself)")
    add_out_and_seed(parser, "camelyon17", seed_of="the subsample and the splits")
    parser.add_argument(
        "--max-per-site",
        type=int,
        default=None,
        help="keep at most this many patches per hospital, drawn with the seed (default: all)",
    )
    add_fractions(parser)
    parser.add_argument(
        "--copy-images",
        action="store_true",
        help="copy the listed patches into the output folder (default: list the raw patches by absolute path)",
    )
    parser.add_argument(
        "--no-check-files", dest="check_files", action="store_false", help="do not check that every listed patch exists"
    )
    args = parser.parse_args(argv)
    out = resolve_out(parser, args.out, "camelyon17")
    path = camelyon17.prepare_camelyon17(
        args.raw,
        out,
        seed=args.seed,
        max_per_site=args.max_per_site,
        fractions=args.fractions,
        copy_images=args.copy_images,
        check_files=args.check_files,
    )
    print(split_summary(path))
    if args.copy_images:
        print(f"patches copied under {os.path.join(out, 'patches')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

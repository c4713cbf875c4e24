"""Prepare LEAF FEMNIST for LIGHTYEAR: 8 sites of distinct writers, 28x28 PNGs and split.csv.

    python datasets/femnist/prepare.py --raw leaf/data/femnist/data --out $LIGHTYEAR_DATA_ROOT/femnist

See datasets/femnist/README.md for the raw data and the options.
"""

from __future__ import annotations

import argparse
import os
import sys

try:
    import lightyear  # noqa: F401
except ImportError:  # a checkout without the package installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "custom"))

from lightyear.data import femnist
from lightyear.data.image_folder import output_folder, split_summary


def fractions(text: str) -> tuple[float, float, float]:
    parts = tuple(float(p) for p in text.split(","))
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"expected three comma-separated fractions, got {text!r}")
    return parts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", required=True, help="LEAF's data/femnist/data folder (or any folder holding all_data_*.json, or train/ and test/ JSON folders)")
    parser.add_argument("--out", default=None, help="output folder (default: $LIGHTYEAR_DATA_ROOT/femnist)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the writer choice and the splits (default 0)")
    parser.add_argument("--writers-per-site", type=int, default=femnist.DEFAULT_WRITERS_PER_SITE, help="distinct writers per site (default %(default)s)")
    parser.add_argument("--sites", type=int, default=femnist.NUM_SITES, help="number of sites (default %(default)s)")
    parser.add_argument("--fractions", type=fractions, default=(0.6, 0.2, 0.2), help="train,val,test fractions per site (default 0.6,0.2,0.2)")
    parser.add_argument("--no-invert", dest="invert", action="store_false", help="keep LEAF's dark ink on white (default: invert to bright ink on black)")
    parser.add_argument("--source", choices=femnist.SOURCES, default="auto", help="which LEAF JSON files to read (default: all_data if present, else train/test)")
    args = parser.parse_args(argv)
    try:
        out = output_folder(args.out, "femnist")
    except ValueError as err:
        parser.error(str(err))
    path = femnist.prepare_femnist(
        args.raw, out, seed=args.seed, writers_per_site=args.writers_per_site, num_sites=args.sites,
        fractions=args.fractions, invert=args.invert, source=args.source,
    )
    print(split_summary(path))
    print(f"images under {os.path.join(out, 'images')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

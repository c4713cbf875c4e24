"""Prepare LEAF FEMNIST for LIGHTYEAR: 8 sites of distinct writers, 28x28 PNGs and split.csv.

    python datasets/femnist/prepare.py --raw leaf/data/femnist/data --out $LIGHTYEAR_DATA_ROOT/femnist

See datasets/femnist/README.md for the raw data and the options.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.append(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "custom")
)  # a checkout without lightyear installed (an installed one comes first)

from lightyear.data import femnist
from lightyear.data.image_folder import split_summary
from lightyear.data.prepare_cli import add_fractions, add_out_and_seed, resolve_out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--raw",
        required=True,
        help="LEAF's data/femnist/data folder "
        "(or any folder holding all_data_*.json, or train/ and test/ JSON folders)",
    )
    add_out_and_seed(parser, "femnist", seed_of="the writer choice and the splits")
    parser.add_argument(
        "--writers-per-site",
        type=int,
        default=femnist.DEFAULT_WRITERS_PER_SITE,
        help="distinct writers per site (default %(default)s)",
    )
    parser.add_argument("--sites", type=int, default=femnist.NUM_SITES, help="number of sites (default %(default)s)")
    add_fractions(parser)
    parser.add_argument(
        "--no-invert",
        dest="invert",
        action="store_false",
        help="keep LEAF's dark ink on white (default: invert to bright ink on black)",
    )
    parser.add_argument(
        "--source",
        choices=femnist.SOURCES,
        default="auto",
        help="which LEAF JSON files to read (default: all_data if present, else train/test)",
    )
    args = parser.parse_args(argv)
    out = resolve_out(parser, args.out, "femnist")
    path = femnist.prepare_femnist(
        args.raw,
        out,
        seed=args.seed,
        writers_per_site=args.writers_per_site,
        num_sites=args.sites,
        fractions=args.fractions,
        invert=args.invert,
        source=args.source,
    )
    print(split_summary(path))
    print(f"images under {os.path.join(out, 'images')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

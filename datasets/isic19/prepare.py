"""Prepare Fed-ISIC2019 for LIGHTYEAR: FLamby's 6 centres as sites, resized images and split.csv.

    python datasets/isic19/prepare.py --raw /data/isic2019 \\
        --ham-metadata FLamby/flamby/datasets/fed_isic2019/HAM10000_metadata \\
        --out $LIGHTYEAR_DATA_ROOT/isic19

See datasets/isic19/README.md for the raw data and the options.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.append(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "custom")
)  # a checkout without lightyear installed (an installed one comes first)

from lightyear.cli import command
from lightyear.data.image_folder import split_summary
from lightyear.data.isic19 import constants, prepare
from lightyear.data.prepare_cli import add_fractions, add_out_and_seed, resolve_out

PROG = "datasets/isic19/prepare.py"


@command(PROG)
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--raw",
        required=True,
        help="folder with ISIC_2019_Training_Input/, ISIC_2019_Training_GroundTruth.csv "
        "and ISIC_2019_Training_Metadata.csv",
    )
    parser.add_argument(
        "--ham-metadata",
        default=None,
        help="the HAM10000 metadata file (FLamby's flamby/datasets/fed_isic2019/HAM10000_metadata); "
        "default: HAM10000_metadata[.csv|.tab] in --raw",
    )
    add_out_and_seed(parser, "isic19", seed_of="the splits")
    add_fractions(parser)
    parser.add_argument(
        "--image-size",
        type=int,
        default=constants.PREPROCESSED_SIZE,
        help="shorter side after resizing (default %(default)s, as FLamby)",
    )
    parser.add_argument(
        "--no-color-constancy",
        dest="color_constancy",
        action="store_false",
        help="skip FLamby's Shades-of-Gray colour constancy",
    )
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="processes resizing images (default: all CPUs)"
    )
    args = parser.parse_args(argv)
    out = resolve_out(parser, args.out, "isic19")
    path = prepare.prepare_isic19(
        args.raw,
        out,
        ham_metadata=args.ham_metadata,
        seed=args.seed,
        fractions=args.fractions,
        image_size=args.image_size,
        color_constancy=args.color_constancy,
        workers=args.workers,
    )
    print(split_summary(path))
    print(f"preprocessed images under {os.path.join(out, 'images')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

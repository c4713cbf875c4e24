"""The ``--out``, ``--seed`` and ``--fractions`` arguments of ``datasets/<dataset>/prepare.py``, added by two
functions because the scripts list their own options between ``--seed`` and ``--fractions``."""

from __future__ import annotations

import argparse
import sys

from lightyear.data import DATA_ROOT_ENV, resolve_data_root
from lightyear.data.image_folder import DEFAULT_FRACTIONS, output_folder


def fractions(text: str) -> tuple[float, float, float]:
    """The ``--fractions`` type: ``"0.6,0.2,0.2"`` as ``(0.6, 0.2, 0.2)``."""
    parts = tuple(float(p) for p in text.split(","))
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"expected three comma-separated fractions, got {text!r}")
    return parts


def add_out_and_seed(parser: argparse.ArgumentParser, dataset: str, seed_of: str) -> None:
    """Add ``--out`` (default ``$LIGHTYEAR_DATA_ROOT/<dataset>``) and ``--seed`` (of ``seed_of``, default 0)."""
    parser.add_argument("--out", default=None, help=f"output folder (default: ${DATA_ROOT_ENV}/{dataset})")
    parser.add_argument("--seed", type=int, default=0, help=f"seed of {seed_of} (default 0)")


def add_fractions(parser: argparse.ArgumentParser, what: str = "fractions") -> None:
    """Add ``--fractions``, the train,val,test ``what`` per site (default 0.6,0.2,0.2)."""
    default = ",".join(str(f) for f in DEFAULT_FRACTIONS)
    parser.add_argument(
        "--fractions",
        type=fractions,
        default=DEFAULT_FRACTIONS,
        help=f"train,val,test {what} per site (default {default})",
    )


def resolve_out(parser: argparse.ArgumentParser, out: str | None, dataset: str) -> str:
    """:func:`~lightyear.data.image_folder.output_folder`, whose error is a usage error (classification scripts)."""
    try:
        return output_folder(out, dataset)
    except ValueError as err:
        parser.error(str(err))


def resolve_out_as_given(out: str | None, dataset: str) -> str:
    """``--out`` as given (segmentation scripts print it so), else ``$LIGHTYEAR_DATA_ROOT/<dataset>``, else exit."""
    if out:
        return out
    try:
        return resolve_data_root(None, dataset)
    except ValueError:
        sys.exit(f"pass --out or set {DATA_ROOT_ENV} (the prepared data goes to ${DATA_ROOT_ENV}/{dataset})")

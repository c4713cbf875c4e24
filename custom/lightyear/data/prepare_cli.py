"""Command-line pieces shared by the prepare scripts, ``datasets/<dataset>/prepare.py``.

Every script takes ``--out`` (default ``$LIGHTYEAR_DATA_ROOT/<dataset>``), ``--seed`` and
``--fractions`` (train,val,test per site). This module adds those arguments, parses the
fractions and resolves the output folder, so that a script holds only its own options. The
arguments are added by two functions, not one, because the scripts list their own options
between ``--seed`` and ``--fractions`` and their help keeps that order.
"""

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
    """Add ``--out`` (default ``$LIGHTYEAR_DATA_ROOT/<dataset>``) and ``--seed``, the seed of ``seed_of``
    (default 0)."""
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
    """``--out`` as an absolute path, else ``$LIGHTYEAR_DATA_ROOT/<dataset>``; neither is a usage error.

    The classification scripts' form: see :func:`lightyear.data.image_folder.output_folder`.
    """
    try:
        return output_folder(out, dataset)
    except ValueError as err:
        parser.error(str(err))


def resolve_out_as_given(out: str | None, dataset: str) -> str:
    """``--out`` as given, else ``$LIGHTYEAR_DATA_ROOT/<dataset>``; with neither, exit with a message.

    The segmentation scripts' form (ultrasound, xray): their summaries print the paths as given.
    """
    if out:
        return out
    try:
        return resolve_data_root(None, dataset)
    except ValueError:
        sys.exit(f"pass --out or set {DATA_ROOT_ENV} (the prepared data goes to ${DATA_ROOT_ENV}/{dataset})")

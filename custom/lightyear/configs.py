"""Where the toolkit's configurations live, and where a checkout of the repository is.

``lightyear/app_configs/`` (templates, dataset settings, sweeps, SLURM templates, the provisioning example) is package
data, so an installed package generates jobs anywhere; a checkout's ``app_configs`` is a link to it. Every console
script takes ``--configs DIR`` for another folder of that layout. A *checkout* is needed only for the repository's
committed ``jobs/`` and ``slurm/`` that ``lightyear-jobs`` and ``lightyear-slurm`` rewrite and check.
"""

from __future__ import annotations

import os

from lightyear.cli import UserError

FOLDER = "app_configs"
BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), FOLDER)


def bundled() -> str:
    return BUNDLED


def checkout_root(start: str | None = None) -> str | None:
    """The nearest folder at or above ``start`` (default: here) with ``pyproject.toml`` and ``app_configs``."""
    here = os.path.abspath(start or os.getcwd())
    while True:
        if os.path.isfile(os.path.join(here, "pyproject.toml")) and os.path.isdir(os.path.join(here, FOLDER)):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def require_checkout(what: str, fix: str) -> str:
    """The checkout around the current folder; a :class:`UserError` saying ``what`` needs one and ``fix`` otherwise."""
    root = checkout_root()
    if root is None:
        raise UserError(
            f"{what} needs a checkout of the repository (no pyproject.toml with app_configs/ here or above): {fix}"
        )
    return root


def checked_configs(path: str | None, option: str = "--configs") -> str:
    """``path`` (default: the package's configurations), refused unless it holds ``datasets/``."""
    if path is None:
        return bundled()
    path = os.path.abspath(path)
    if not os.path.isdir(path):
        raise UserError(
            f"{option} {path} is not a folder: give an app_configs folder, or leave {option} out to use the package's"
        )
    if not os.path.isdir(os.path.join(path, "datasets")):
        raise UserError(
            f"{option} {path} is not an app_configs folder (it needs datasets/ with a <dataset>.json per dataset): "
            f"give one, or leave {option} out to use the package's"
        )
    return path

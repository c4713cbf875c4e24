"""Where the toolkit's configurations live, and where a checkout of the repository is.

The topologies' FLARE configuration templates, the datasets' settings, the sweeps, the SLURM
templates and the provisioning example are package data (the methods declare themselves in code,
:mod:`lightyear.jobs.registry`): ``lightyear/app_configs/`` ships inside the package
(``[tool.setuptools.package-data]`` in ``pyproject.toml``), so an installed package generates
jobs anywhere. It is the one copy: a checkout's ``app_configs`` is a link to
``custom/lightyear/app_configs``, so its documented paths (``app_configs/sweeps/...``) and an
editable install read the same files. Every console script takes ``--configs DIR`` to use
another folder of the same layout.

A *checkout* is only needed for what belongs to the repository, not to the package: the
committed job folders (``jobs/``) and SLURM templates (``slurm/``) that ``lightyear-jobs`` and
``lightyear-slurm`` rewrite and check.
"""

from __future__ import annotations

import os

from lightyear.cli import UserError

FOLDER = "app_configs"
BUNDLED = os.path.join(os.path.dirname(os.path.abspath(__file__)), FOLDER)
"""The configurations shipped with the package."""


def bundled() -> str:
    """The package's ``app_configs`` folder."""
    return BUNDLED


def checkout_root(start: str | None = None) -> str | None:
    """The checkout of this repository that holds ``start`` (default: the current folder), or None:
    the nearest folder at or above it with ``pyproject.toml`` and ``app_configs``."""
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
    """``path`` (default: the package's configurations), refused unless it is a configurations
    folder: one with a ``datasets/`` folder of dataset settings (the templates always come from the
    package)."""
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

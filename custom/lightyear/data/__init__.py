"""Per-site datasets, loaded by name from a job's configuration (see :func:`load_site_data`).

Each is a module with ``load_site(site, seed, data_root, **options) -> SiteData``, imported when used: the toolkit's
(:data:`DATASETS`) and plugins' (group ``lightyear.datasets``, with their job ``SETTINGS``; docs/extending.md)."""

from __future__ import annotations

import functools
import importlib
import os

from lightyear.data.site_data import CLASSIFICATION, SEGMENTATION, SiteData
from lightyear.plugins import module_table

DATASETS: dict[str, str] = {
    "digits": "lightyear.data.digits",
    "shapes": "lightyear.data.shapes",
    "femnist": "lightyear.data.femnist",
    "camelyon17": "lightyear.data.camelyon17",
    "isic19": "lightyear.data.isic19",
    "ultrasound": "lightyear.data.ultrasound",
    "xray": "lightyear.data.xray",
}

DATA_ROOT_ENV = "LIGHTYEAR_DATA_ROOT"
GROUP = "lightyear.datasets"


@functools.cache
def datasets() -> dict[str, str]:
    """name -> module of every known dataset: the toolkit's, then installed plugins'."""
    return module_table(DATASETS, GROUP, "dataset")


def plugin_settings(name: str) -> dict | None:
    """A plugin dataset's job settings (its module's ``SETTINGS``); None for the toolkit's own."""
    if name in DATASETS or name not in datasets():
        return None
    settings = getattr(importlib.import_module(datasets()[name]), "SETTINGS", None)
    if not isinstance(settings, dict):
        raise ValueError(
            f"dataset {name!r} ({datasets()[name]}) has no SETTINGS dict of job settings: add one (docs/extending.md)"
        )
    return dict(settings)


def resolve_data_root(data_root: str | None, dataset: str) -> str:
    """The prepared dataset's folder ``<root>/<dataset>``; root: the job's ``data_root``, else $LIGHTYEAR_DATA_ROOT."""
    root = data_root or os.environ.get(DATA_ROOT_ENV)
    if not root:
        raise ValueError(
            f"dataset {dataset!r} needs its prepared data: set data_root in the job's site config "
            f"or the environment variable {DATA_ROOT_ENV} to the folder that holds {dataset}/ "
            f"(see datasets/{dataset}/README.md for the prepare command)"
        )
    return os.path.join(os.path.expanduser(root), dataset)


def load_site_data(name: str, site: str, seed: int = 0, data_root: str | None = None, **options) -> SiteData:
    """Load site ``site``'s train/val/test sets of dataset ``name``."""
    known = datasets()
    if name not in known:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(sorted(known))}")
    module = importlib.import_module(known[name])
    return module.load_site(site, seed=seed, data_root=data_root, **options)


__all__ = [
    "CLASSIFICATION",
    "SEGMENTATION",
    "SiteData",
    "load_site_data",
    "resolve_data_root",
    "DATASETS",
    "DATA_ROOT_ENV",
    "datasets",
    "plugin_settings",
]

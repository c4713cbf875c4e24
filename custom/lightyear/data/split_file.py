"""The split file ``split.csv`` of a prepared dataset, all the loaders read: columns ``site, split, image`` and
``label`` or ``mask``, paths relative to the file's folder unless absolute."""

from __future__ import annotations

import os

import pandas as pd

from lightyear.data.site_data import CLASSIFICATION, SEGMENTATION
from lightyear.data.splits import SPLITS

SPLIT_FILE = "split.csv"
COLUMNS = {CLASSIFICATION: ("site", "split", "image", "label"), SEGMENTATION: ("site", "split", "image", "mask")}


def write_split_file(frame: pd.DataFrame, folder: str, task: str) -> str:
    """Check ``frame`` and write it as ``<folder>/split.csv``; return the path."""
    check_split_frame(frame, task, source="the prepared split")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, SPLIT_FILE)
    frame.loc[:, list(COLUMNS[task])].to_csv(path, index=False)
    return path


def read_split_file(folder: str, task: str, dataset: str) -> pd.DataFrame:
    """Read and check ``<folder>/split.csv``; paths come back absolute."""
    path = os.path.join(folder, SPLIT_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"no split file at {path}: prepare the {dataset} dataset first "
            f"(python datasets/{dataset}/prepare.py --help; see datasets/{dataset}/README.md)"
        )
    frame = pd.read_csv(path, dtype={"site": str, "split": str, "image": str})
    check_split_frame(frame, task, source=path)
    for col in ("image", "mask"):
        if col in frame:
            frame[col] = [p if os.path.isabs(p) else os.path.join(folder, p) for p in frame[col]]
    return frame


def check_split_frame(frame: pd.DataFrame, task: str, source: str) -> None:
    """Raise a ValueError naming the problem if ``frame`` is not a valid split table."""
    if task not in COLUMNS:
        raise ValueError(f"task must be {CLASSIFICATION!r} or {SEGMENTATION!r}, got {task!r}")
    expected = COLUMNS[task]
    missing = [c for c in expected if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{source} lacks columns {missing}; a {task} split file has columns {', '.join(expected)} "
            "(re-run the dataset's prepare step)"
        )
    if frame[list(expected)].isna().any().any():
        bad = frame[frame[list(expected)].isna().any(axis=1)].index[:5].tolist()
        raise ValueError(f"{source} has empty cells in rows {bad} (re-run the dataset's prepare step)")
    unknown = sorted(set(frame["split"]) - set(SPLITS))
    if unknown:
        raise ValueError(f"{source} has split values {unknown}; allowed are {', '.join(SPLITS)}")


def site_rows(frame: pd.DataFrame, site: str, dataset: str) -> dict[str, pd.DataFrame]:
    """The rows of one site, by split; a site or split without rows is an error."""
    sites = sorted(frame["site"].unique())
    mine = frame[frame["site"] == site]
    if mine.empty:
        raise ValueError(f"{dataset} has no site {site!r}; the split file names {', '.join(sites)}")
    parts = {s: mine[mine["split"] == s].reset_index(drop=True) for s in SPLITS}
    empty = [s for s, rows in parts.items() if rows.empty]
    if empty:
        raise ValueError(f"{dataset} site {site!r} has no {'/'.join(empty)} samples in its split file")
    return parts

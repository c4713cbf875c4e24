"""``camelyon17``: Camelyon17-WILDS (p-lambda/wilds) 96x96 tumour patches, one site per hospital: as in the LIGHTYEAR
paper ``center`` c is ``site-<c+1>``, split at random (raw layout: datasets/camelyon17/README.md)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from torchvision.transforms import v2

from lightyear.data.image_folder import (
    DEFAULT_FRACTIONS,
    load_image_file_site,
    site_names,
    site_split_seed,
    write_classification_split,
)
from lightyear.data.site_data import SiteData

NAME = "camelyon17"
NUM_CLASSES = 2
NUM_SITES = 5
IMAGE_SIZE = 96
BUNDLE_FOLDER = "camelyon17_v1.0"
METADATA_COLUMNS = ("patient", "node", "x_coord", "y_coord", "tumor", "center")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
OBTAIN = (
    'download the Camelyon17-WILDS bundle (pip install wilds; python -c "from wilds import get_dataset; '
    "get_dataset('camelyon17', root_dir='RAW', download=True)\", about 10 GB) and pass RAW or "
    "RAW/camelyon17_v1.0; see datasets/camelyon17/README.md"
)


def find_bundle(raw: str) -> str:
    """The ``camelyon17_v1.0`` folder: ``raw`` itself or its child of that name."""
    for folder in (os.path.join(raw, BUNDLE_FOLDER), raw):
        if os.path.isfile(os.path.join(folder, "metadata.csv")):
            return folder
    if not os.path.isdir(raw):
        raise FileNotFoundError(f"Camelyon17 raw folder {raw} does not exist: {OBTAIN}")
    raise FileNotFoundError(f"no metadata.csv in {raw} or {os.path.join(raw, BUNDLE_FOLDER)}: {OBTAIN}")


def read_metadata(bundle: str) -> pd.DataFrame:
    """WILDS ``metadata.csv``, checked for the columns the prepare step uses."""
    path = os.path.join(bundle, "metadata.csv")
    frame = pd.read_csv(path, index_col=0, dtype={"patient": "str"})
    missing = [c for c in METADATA_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{path} lacks columns {missing}; WILDS metadata.csv has columns "
            f"patient,node,x_coord,y_coord,tumor,slide,center,split ({OBTAIN})"
        )
    if frame[list(METADATA_COLUMNS)].isna().any().any():
        raise ValueError(f"{path} has empty cells in {', '.join(METADATA_COLUMNS)}")
    centers = sorted(set(frame["center"].astype(int)))
    if not set(centers) <= set(range(NUM_SITES)):
        raise ValueError(f"{path} has centers {centers}; Camelyon17-WILDS has hospitals 0..{NUM_SITES - 1}")
    tumours = set(frame["tumor"].astype(int))
    if not tumours <= {0, 1}:
        raise ValueError(f"{path} has tumor values {sorted(tumours)}; expected 0/1")
    return frame


def patch_path(patient: str, node: int, x: int, y: int) -> str:
    """A patch's path inside the bundle, as WILDS builds it."""
    patient = str(patient).zfill(3)
    return os.path.join(
        "patches",
        f"patient_{patient}_node_{int(node)}",
        f"patch_patient_{patient}_node_{int(node)}_x_{int(x)}_y_{int(y)}.png",
    )


def prepare_camelyon17(
    raw: str,
    out: str,
    seed: int = 0,
    max_per_site: int | None = None,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    copy_images: bool = False,
    check_files: bool = True,
) -> str:
    """Write the split file of each hospital's patches (a seeded subset of ``max_per_site``), listing the raw ones by
    absolute path or, with ``copy_images``, copies under ``out``; return its path. ``check_files``: stop on missing."""
    bundle = os.path.abspath(find_bundle(raw))
    frame = read_metadata(bundle)
    if max_per_site is not None and max_per_site < 3:
        raise ValueError(f"max_per_site must be at least 3 (a train, val and test sample), got {max_per_site}")
    per_site: dict[str, list[tuple[str, int]]] = {}
    for center, site in enumerate(site_names(NUM_SITES)):
        rows = frame[frame["center"].astype(int) == center]
        if rows.empty:
            raise ValueError(f"{bundle}/metadata.csv has no patches of center {center} ({site})")
        if max_per_site is not None and len(rows) > max_per_site:
            rng = np.random.default_rng(site_split_seed(seed, 1000 + center))
            rows = rows.iloc[np.sort(rng.choice(len(rows), size=max_per_site, replace=False))]
        per_site[site] = [
            (patch_path(r.patient, r.node, r.x_coord, r.y_coord), int(r.tumor)) for r in rows.itertuples(index=False)
        ]

    listed = [path for items in per_site.values() for path, _ in items]
    if check_files:
        missing = [p for p in listed if not os.path.isfile(os.path.join(bundle, p))]
        if missing:
            raise FileNotFoundError(
                f"{len(missing)} of {len(listed)} patches listed in {bundle}/metadata.csv are missing, "
                f"e.g. {os.path.join(bundle, missing[0])}: the bundle is incomplete ({OBTAIN})"
            )
    if copy_images:
        for path in listed:
            os.makedirs(os.path.join(out, os.path.dirname(path)), exist_ok=True)
            shutil.copyfile(os.path.join(bundle, path), os.path.join(out, path))
    else:
        per_site = {site: [(os.path.join(bundle, p), y) for p, y in items] for site, items in per_site.items()}
    return write_classification_split(per_site, out, fractions, seed)


def image_transform(image_size: int = IMAGE_SIZE, normalize: bool = True) -> v2.Compose:
    """PIL RGB patch -> float tensor ``3 x image_size x image_size``, ImageNet-normalised by default."""
    steps = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
    if image_size != IMAGE_SIZE:
        steps.append(v2.Resize((image_size, image_size), antialias=True))
    if normalize:
        steps.append(v2.Normalize(IMAGENET_MEAN, IMAGENET_STD))
    return v2.Compose(steps)


def load_site(
    site: str, seed: int = 0, data_root: str | None = None, image_size: int = IMAGE_SIZE, normalize: bool = True
) -> SiteData:
    """Site ``site``'s sets from the split file (``seed`` is unused); ImageNet-normalised if ``normalize``."""
    transforms = dict.fromkeys(("train", "val", "test"), image_transform(image_size, normalize))
    return load_image_file_site(NAME, site, data_root, transforms, NUM_CLASSES, 3, "RGB")

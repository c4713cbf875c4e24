"""Prepare Fed-ISIC2019 once: map images to FLamby's centres, preprocess them (resize, Shades-of-Gray
colour constancy) and write the split file that :func:`lightyear.data.isic19.load_site` reads."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd
from PIL import Image

from lightyear.cli import UserError
from lightyear.data.image_folder import DEFAULT_FRACTIONS, site_names, write_classification_split
from lightyear.data.isic19.constants import (
    CENTRE_IDS,
    CLASSES,
    CROP_SIZE,
    GROUND_TRUTH,
    GROUND_TRUTH_COLUMNS,
    HAM_METADATA_NAMES,
    INPUT_FOLDER,
    JPEG_QUALITY,
    METADATA,
    NUM_SITES,
    OBTAIN,
    OBTAIN_HAM,
    PREPROCESSED_SIZE,
)


class PrepareError(UserError):
    """Raw ISIC 2019 or HAM10000 files that cannot be prepared; the message names the file and where to get it."""


def read_table(path: str, columns: Sequence[str], what: str, obtain: str) -> pd.DataFrame:
    """A CSV (or tab-separated) table, checked to exist and to have ``columns``."""
    if not os.path.isfile(path):
        raise PrepareError(f"{what} not found at {path}: {obtain}")
    try:
        frame = pd.read_csv(path, sep=None, engine="python")
    except ValueError as exc:  # empty, not text, not a table (pandas' errors are ValueErrors)
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise PrepareError(f"{what} {path} is not a readable table ({reason}): {obtain}") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise PrepareError(f"{path} lacks columns {missing}; {what} has columns {', '.join(columns)} ({obtain})")
    return frame


def find_ham_metadata(raw: str, ham_metadata: str | None) -> str:
    """``ham_metadata`` if given, else a HAM10000 metadata file in ``raw``."""
    if ham_metadata:
        return ham_metadata
    for name in HAM_METADATA_NAMES:
        if os.path.isfile(os.path.join(raw, name)):
            return os.path.join(raw, name)
    raise PrepareError(
        f"no HAM10000 metadata given and none of {', '.join(HAM_METADATA_NAMES)} in {raw}: pass its path ({OBTAIN_HAM})"
    )


def flamby_centres(metadata: pd.DataFrame, ham: pd.DataFrame) -> pd.DataFrame:
    """Columns ``image, dataset, center`` of the images FLamby keeps (with a lesion_id); unknown ``dataset``: error."""
    duplicated = ham["image_id"][ham["image_id"].duplicated()]
    if not duplicated.empty:
        raise PrepareError(f"the HAM10000 metadata lists image {duplicated.iloc[0]} more than once")
    kept = metadata.loc[metadata["lesion_id"].notna(), ["image", "lesion_id"]]
    kept = kept.assign(prefix=kept["lesion_id"].astype(str).str[:4])
    merged = kept.merge(
        ham.loc[:, ["image_id", "dataset"]].rename(columns={"image_id": "image", "dataset": "ham_dataset"}),
        how="left",
        on="image",
    )
    # FLamby concatenates str(HAM dataset): "nan" for images outside HAM10000
    merged["dataset"] = merged["prefix"] + merged["ham_dataset"].astype(object).where(
        merged["ham_dataset"].notna(), "nan"
    ).astype(str)
    unknown = merged.loc[~merged["dataset"].isin(list(CENTRE_IDS)), "dataset"].value_counts()
    if not unknown.empty:
        raise PrepareError(
            f"images of unknown origin {dict(unknown)}; FLamby's centres are {', '.join(CENTRE_IDS)} "
            f"(use the ISIC 2019 training metadata and the HAM10000 metadata: {OBTAIN_HAM})"
        )
    merged["center"] = merged["dataset"].map(CENTRE_IDS).astype(int)
    return merged.loc[:, ["image", "dataset", "center"]].reset_index(drop=True)


def ground_truth_labels(ground_truth: pd.DataFrame) -> pd.Series:
    """The class index (0..7) of each image, the argmax over the nine one-hot columns; not one-hot or UNK: an error."""
    repeated = ground_truth["image"][ground_truth["image"].duplicated()]
    if not repeated.empty:
        raise PrepareError(f"the ground truth lists image {repeated.iloc[0]} more than once")
    onehot = ground_truth.loc[:, list(GROUND_TRUTH_COLUMNS)].to_numpy(dtype=np.float64)
    valid = np.isclose(onehot.sum(axis=1), 1.0) & np.isclose(onehot.max(axis=1), 1.0)
    if not valid.all():
        bad = ground_truth["image"].iloc[int(np.flatnonzero(~valid)[0])]
        raise PrepareError(f"ground truth of {bad} is not one-hot over {', '.join(GROUND_TRUTH_COLUMNS)}")
    labels = onehot.argmax(axis=1)
    unk = labels == GROUND_TRUTH_COLUMNS.index("UNK")
    if unk.any():
        raise PrepareError(
            f"{int(unk.sum())} images "
            f"(e.g. {ground_truth['image'].iloc[int(np.flatnonzero(unk)[0])]}) are labelled UNK; "
            "Fed-ISIC2019 has the 8 classes " + ", ".join(CLASSES)
        )
    return pd.Series(labels, index=ground_truth["image"].to_numpy(), name="label")


def resize_shorter_side(image: Image.Image, size: int = PREPROCESSED_SIZE) -> Image.Image:
    """Resize (bilinear) so the shorter side is ``size``, keeping the aspect ratio (FLamby)."""
    ratio = float(size) / min(image.size)
    return image.resize(tuple(int(side * ratio) for side in image.size), resample=Image.BILINEAR)


def shades_of_gray(pixels: np.ndarray, power: int = 6) -> np.ndarray:
    """Shades-of-Gray colour constancy of an RGB uint8 image in FLamby's float32 arithmetic (``color_constancy.py``):
    each channel divided by its power-``power`` mean, truncated to uint8, but clipped where FLamby's cast wraps."""
    image = pixels.astype(np.float32)
    illuminant = np.power(np.mean(np.power(image, power), axis=(0, 1)), np.float32(1.0 / power))
    norm = np.sqrt(np.sum(np.power(illuminant, np.float32(2.0))))
    if norm == 0:
        return pixels.copy()
    illuminant = illuminant / norm
    with np.errstate(divide="ignore"):
        gain = np.where(illuminant > 0, np.float32(1.0) / (illuminant * np.float32(math.sqrt(3.0))), np.float32(0.0))
    return np.clip(image * gain.astype(np.float32), 0, 255).astype(np.uint8)


def preprocess_image(source: str, target: str, size: int = PREPROCESSED_SIZE, color_constancy: bool = True) -> None:
    with Image.open(source) as image:
        image = resize_shorter_side(image.convert("RGB"), size)
    if color_constancy:
        image = Image.fromarray(shades_of_gray(np.asarray(image)))
    image.save(target, quality=JPEG_QUALITY)


def _preprocess_job(job: tuple[str, str, int, bool]) -> None:
    preprocess_image(*job)


def prepare_isic19(
    raw: str,
    out: str,
    ham_metadata: str | None = None,
    seed: int = 0,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    image_size: int = PREPROCESSED_SIZE,
    color_constancy: bool = True,
    workers: int = 1,
) -> str:
    """Map images to FLamby's centres, preprocess them into ``<out>/images/`` (shorter side ``image_size``, ``workers``
    processes), write the split file; return its path. ``ham_metadata`` is looked up in ``raw`` when not given."""
    if not os.path.isdir(raw):
        raise PrepareError(f"ISIC 2019 raw folder {raw} does not exist: {OBTAIN}")
    input_folder = os.path.join(raw, INPUT_FOLDER)
    if not os.path.isdir(input_folder):
        raise PrepareError(f"no image folder {input_folder}: {OBTAIN}")
    if image_size < CROP_SIZE:
        raise PrepareError(f"image_size {image_size} is smaller than the {CROP_SIZE}x{CROP_SIZE} crop of the loader")
    ground_truth = read_table(
        os.path.join(raw, GROUND_TRUTH), ("image",) + GROUND_TRUTH_COLUMNS, "the ISIC 2019 ground truth", OBTAIN
    )
    metadata = read_table(os.path.join(raw, METADATA), ("image", "lesion_id"), "the ISIC 2019 metadata", OBTAIN)
    ham = read_table(find_ham_metadata(raw, ham_metadata), ("image_id", "dataset"), "the HAM10000 metadata", OBTAIN_HAM)

    centres = flamby_centres(metadata, ham)
    unlabelled = centres.loc[~centres["image"].isin(ground_truth["image"]), "image"]
    if not unlabelled.empty:
        raise PrepareError(
            f"{len(unlabelled)} images (e.g. {unlabelled.iloc[0]}) are in {METADATA} but not in {GROUND_TRUTH}"
        )
    labels = ground_truth_labels(ground_truth[ground_truth["image"].isin(centres["image"])])
    centres = centres.assign(label=labels.loc[centres["image"]].to_numpy()).sort_values("image", kind="stable")
    missing = [name for name in centres["image"] if not os.path.isfile(os.path.join(input_folder, f"{name}.jpg"))]
    if missing:
        raise PrepareError(
            f"{len(missing)} of {len(centres)} images are missing from {input_folder}, e.g. {missing[0]}.jpg: {OBTAIN}"
        )

    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    jobs = [
        (
            os.path.join(input_folder, f"{name}.jpg"),
            os.path.join(out, "images", f"{name}.jpg"),
            image_size,
            color_constancy,
        )
        for name in centres["image"]
    ]
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            list(pool.map(_preprocess_job, jobs, chunksize=64))
    else:
        for job in jobs:
            _preprocess_job(job)

    sites = site_names(NUM_SITES)
    per_site = {site: [] for site in sites}
    for r in centres.itertuples(index=False):
        per_site[sites[r.center]].append((os.path.join("images", f"{r.image}.jpg"), int(r.label)))
    empty = [site for site, items in per_site.items() if not items]
    if empty:
        raise PrepareError(f"no images of {', '.join(empty)}; FLamby's ISIC 2019 has images of all six centres")
    return write_classification_split(per_site, out, fractions, seed)

"""``xray``: lung segmentation of MIMIC-CXR-JPG chest x-rays (Johnson et al., "MIMIC-CXR, a de-identified publicly
available database of chest radiographs with free-text reports", Scientific Data 2019) with CheXmask masks (Gaggion et
al., "CheXmask: a large-scale dataset of anatomical segmentation masks for multi-center chest x-ray images", Scientific
Data 2024); raw layout: datasets/xray/README.md. As in the LIGHTYEAR paper, :func:`prepare_xray` keeps masks of mean
Dice-RCA >= 0.7, draws 200 images (by default one per patient, so sites and splits share none) for 5 sites of 40 and
writes lung masks (left OR right) and images at 64x64."""

from __future__ import annotations

import os
import zlib

import numpy as np
import pandas as pd
from PIL import Image

from lightyear.data.mask_folder import load_prepared_site, write_pair
from lightyear.data.site_data import SEGMENTATION, SiteData
from lightyear.data.split_file import write_split_file
from lightyear.data.splits import split_indices

DATASET = "xray"
NUM_CLASSES = 2
IMAGE_SIZE = 64
NUM_SITES = 5
NUM_IMAGES = 200
MIN_DICE = 0.7

DICE_COLUMN = "Dice RCA (Mean)"
LUNG_COLUMNS = ("Left Lung", "Right Lung")
CHEXMASK_COLUMNS = ("dicom_id", DICE_COLUMN, *LUNG_COLUMNS, "Height", "Width")
CHEXMASK_NAMES = (
    "OriginalResolution/MIMIC-CXR-JPG.csv",
    "OriginalResolution/MIMIC-CXR-JPG.csv.gz",
    "MIMIC-CXR-JPG.csv",
    "MIMIC-CXR-JPG.csv.gz",
)
METADATA_NAMES = ("mimic-cxr-2.0.0-metadata.csv", "mimic-cxr-2.0.0-metadata.csv.gz")
METADATA_COLUMNS = ("dicom_id", "subject_id", "study_id")
CHEXMASK_SOURCE = "CheXmask (https://physionet.org/content/chexmask-cxr-segmentation-data/)"
MIMIC_SOURCE = "MIMIC-CXR-JPG (https://physionet.org/content/mimic-cxr-jpg/, credentialed access)"
MISSING_IMAGE_POLICIES = ("error", "skip")


def decode_rle(rle, height: int, width: int) -> np.ndarray:
    """A CheXmask run-length encoding, space-separated ``start length`` pairs with starts 1-based into the row-major
    flattened mask, as a uint8 {0, 1} mask ``(height, width)``; empty or NaN: an empty mask."""
    height, width = int(height), int(width)
    if height < 1 or width < 1:
        raise ValueError(f"mask size must be positive, got {height}x{width}")
    size = height * width
    if rle is None or (isinstance(rle, float) and np.isnan(rle)) or not str(rle).strip():
        return np.zeros((height, width), dtype=np.uint8)
    try:
        numbers = np.asarray(str(rle).split(), dtype=np.int64)
    except ValueError as error:
        raise ValueError(f"an RLE must hold integers only: {error}") from error
    if len(numbers) % 2:
        raise ValueError(f"an RLE holds start/length pairs, got an odd count of {len(numbers)} numbers")
    starts, lengths = numbers[0::2] - 1, numbers[1::2]
    if (starts < 0).any() or (lengths < 0).any():
        raise ValueError("RLE starts must be >= 1 (1-based) and lengths >= 0")
    ends = starts + lengths
    if (ends > size).any():
        raise ValueError(f"an RLE run ends at pixel {int(ends.max())}, past the {height}x{width} = {size} pixel mask")
    edges = np.zeros(size + 1, dtype=np.int64)
    np.add.at(edges, starts, 1)
    np.add.at(edges, ends, -1)
    return (np.cumsum(edges[:-1]) > 0).astype(np.uint8).reshape(height, width)


def mask_shape(height: int, width: int, image_size: tuple[int, int], dicom_id: str) -> tuple[int, int, bool]:
    """``(height, width)`` of a CheXmask mask for a JPG of PIL size ``image_size``, and whether CheXmask swapped it."""
    image_w, image_h = image_size
    if (int(height), int(width)) == (image_h, image_w):
        return image_h, image_w, False
    if (int(width), int(height)) == (image_h, image_w):
        return image_h, image_w, True
    raise ValueError(
        f"CheXmask gives {dicom_id} a {height}x{width} (Height x Width) mask but its JPG is {image_h}x{image_w}; "
        "use CheXmask's OriginalResolution/MIMIC-CXR-JPG.csv with the MIMIC-CXR-JPG images"
    )


def find_chexmask_csv(path: str) -> str:
    """The CheXmask MIMIC-CXR-JPG CSV: ``path`` itself or one of its known places below ``path``."""
    for candidate in (path, *(os.path.join(path, name) for name in CHEXMASK_NAMES)):
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(
        f"no CheXmask MIMIC-CXR-JPG CSV at {path} (looked for {', '.join(CHEXMASK_NAMES)}); download {CHEXMASK_SOURCE} "
        "and pass the CSV or the folder that holds OriginalResolution/"
    )


def find_metadata_csv(mimic_root: str, metadata: str | None = None) -> str:
    """MIMIC-CXR-JPG's metadata CSV: ``metadata`` if given, else at the top of ``mimic_root``."""
    if metadata:
        if os.path.isfile(metadata):
            return metadata
        raise FileNotFoundError(f"MIMIC-CXR-JPG metadata file {metadata} does not exist; it ships with {MIMIC_SOURCE}")
    for candidate in (os.path.join(mimic_root, name) for name in METADATA_NAMES):
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(
        f"no {' or '.join(METADATA_NAMES)} in {mimic_root}; pass the MIMIC-CXR-JPG folder that holds it and files/ "
        f"(from {MIMIC_SOURCE}) or name the file with --metadata"
    )


def check_columns(path: str, expected, source: str) -> None:
    header = pd.read_csv(path, nrows=0).columns
    missing = [c for c in expected if c not in header]
    if missing:
        raise ValueError(
            f"{path} lacks columns {missing}; expected a CSV with columns {', '.join(expected)} "
            f"(found {', '.join(map(str, header))}); it should come from {source}"
        )


def read_metadata(path: str, view_positions=None) -> pd.DataFrame:
    """dicom_id, subject_id and study_id (as strings) of every MIMIC-CXR-JPG image, optionally by view."""
    columns = list(METADATA_COLUMNS) + (["ViewPosition"] if view_positions else [])
    check_columns(path, columns, MIMIC_SOURCE)
    frame = pd.read_csv(path, usecols=columns, dtype=str)
    if view_positions:
        frame = frame[frame["ViewPosition"].isin(list(view_positions))]
    frame = frame.dropna(subset=list(METADATA_COLUMNS)).drop_duplicates("dicom_id")
    return frame.loc[:, list(METADATA_COLUMNS)].reset_index(drop=True)


def image_path(mimic_root: str, subject_id: str, study_id: str, dicom_id: str) -> str:
    subject, study = str(subject_id).strip(), str(study_id).strip()
    return os.path.join(mimic_root, "files", f"p{subject[:2]}", f"p{subject}", f"s{study}", f"{dicom_id}.jpg")


def read_dice(path: str, chunksize: int) -> pd.DataFrame:
    """dicom_id and mean Dice-RCA of every CheXmask row (read in chunks; the RLE columns are skipped)."""
    parts = []
    for chunk in pd.read_csv(path, usecols=["dicom_id", DICE_COLUMN], dtype={"dicom_id": str}, chunksize=chunksize):
        chunk[DICE_COLUMN] = pd.to_numeric(chunk[DICE_COLUMN], errors="coerce")
        parts.append(chunk)
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["dicom_id", DICE_COLUMN])
    return frame.rename(columns={DICE_COLUMN: "dice"}).drop_duplicates("dicom_id")


def choose_images(
    candidates: pd.DataFrame,
    num_images: int,
    seed: int,
    mimic_root: str,
    one_per_subject: bool = True,
    missing_images: str = "error",
) -> tuple[pd.DataFrame, int]:
    """``num_images`` rows of ``candidates`` (dicom_id, subject_id, study_id, dice) drawn in a seeded order that does
    not depend on the rows' order, with their JPG path; and the number of missing JPGs passed over."""
    if missing_images not in MISSING_IMAGE_POLICIES:
        raise ValueError(f"missing_images must be one of {MISSING_IMAGE_POLICIES}, got {missing_images!r}")
    ordered = candidates.sort_values("dicom_id", kind="stable").reset_index(drop=True)
    order = np.random.default_rng([int(seed) & 0xFFFFFFFF, 200]).permutation(len(ordered))
    chosen, subjects, missing = [], set(), 0
    for i in order:
        row = ordered.iloc[int(i)]
        if one_per_subject and row["subject_id"] in subjects:
            continue
        path = image_path(mimic_root, row["subject_id"], row["study_id"], row["dicom_id"])
        if not os.path.isfile(path):
            if missing_images == "error":
                raise FileNotFoundError(
                    f"image {row['dicom_id']} is listed in the metadata but {path} does not exist; "
                    f"download {MIMIC_SOURCE} into {mimic_root} (or pass --missing-images skip for a partial copy)"
                )
            missing += 1
            continue
        chosen.append({**row.to_dict(), "jpg": path})
        subjects.add(row["subject_id"])
        if len(chosen) == num_images:
            break
    if len(chosen) < num_images:
        raise ValueError(
            f"only {len(chosen)} images qualify "
            f"(Dice-RCA threshold, metadata join, one per subject: {one_per_subject}, "
            f"{missing} missing JPGs), fewer than the {num_images} asked for"
        )
    return pd.DataFrame(chosen), missing


def read_lung_rles(path: str, dicom_ids, chunksize: int) -> pd.DataFrame:
    """The lung RLEs and Height/Width of the given ``dicom_ids``, indexed by dicom_id."""
    wanted = set(dicom_ids)
    columns = ["dicom_id", *LUNG_COLUMNS, "Height", "Width"]
    parts = []
    found = set()
    for chunk in pd.read_csv(
        path, usecols=columns, dtype={"dicom_id": str, "Left Lung": str, "Right Lung": str}, chunksize=chunksize
    ):
        mine = chunk[chunk["dicom_id"].isin(wanted - found)].drop_duplicates("dicom_id")
        if len(mine):
            parts.append(mine)
            found.update(mine["dicom_id"])
        if found == wanted:
            break
    return pd.concat(parts).set_index("dicom_id")


def lung_mask(row, image_size: tuple[int, int], dicom_id: str) -> tuple[np.ndarray, bool]:
    """Left OR right lung of one CheXmask row, decoded at the JPG's size; and whether H/W were swapped."""
    if pd.isna(row["Height"]) or pd.isna(row["Width"]):
        raise ValueError(f"CheXmask row of {dicom_id} has no Height/Width; expected the mask size in pixels")
    height, width, swapped = mask_shape(row["Height"], row["Width"], image_size, dicom_id)
    masks = []
    for column in LUNG_COLUMNS:
        try:
            masks.append(decode_rle(row[column], height, width))
        except ValueError as error:
            raise ValueError(f"CheXmask {column} of {dicom_id}: {error}") from error
    return np.logical_or(*masks).astype(np.uint8), swapped


def prepare_xray(
    chexmask: str,
    mimic: str,
    out: str,
    seed: int = 0,
    num_images: int = NUM_IMAGES,
    num_sites: int = NUM_SITES,
    min_dice: float = MIN_DICE,
    image_size: int = IMAGE_SIZE,
    fractions=(0.6, 0.2, 0.2),
    metadata: str | None = None,
    view_positions=None,
    one_per_subject: bool = True,
    missing_images: str = "error",
    chunksize: int = 20000,
) -> dict:
    """Write the prepared dataset under ``out`` (steps: module docstring); return a summary."""
    if num_sites < 1 or num_images < 3 * num_sites:
        raise ValueError(
            f"need num_sites >= 1 and at least 3 images per site, got {num_images} images over {num_sites} sites"
        )
    if not os.path.isdir(mimic):
        raise FileNotFoundError(f"MIMIC-CXR-JPG folder {mimic} does not exist; download {MIMIC_SOURCE}")
    chexmask_csv = find_chexmask_csv(chexmask)
    check_columns(chexmask_csv, CHEXMASK_COLUMNS, CHEXMASK_SOURCE)
    meta = read_metadata(find_metadata_csv(mimic, metadata), view_positions)

    dice = read_dice(chexmask_csv, chunksize)
    kept = dice[dice["dice"] >= min_dice]
    candidates = kept.merge(meta, on="dicom_id", how="inner")
    chosen, missing = choose_images(candidates, num_images, seed, mimic, one_per_subject, missing_images)
    rles = read_lung_rles(chexmask_csv, chosen["dicom_id"], chunksize)

    rows = []
    for k, block in enumerate(np.array_split(np.arange(len(chosen)), num_sites)):
        site = f"site-{k + 1}"
        parts = split_indices(
            len(block), fractions, seed=(int(seed) * 1000003 + zlib.crc32(site.encode())) & 0xFFFFFFFF
        )
        split_of = {int(block[i]): split for split, idx in parts.items() for i in idx}
        for position in block:
            record = chosen.iloc[int(position)]
            dicom_id = record["dicom_id"]
            with Image.open(record["jpg"]) as img:
                gray = np.asarray(img.convert("L"))
                size = img.size
            mask, swapped = lung_mask(rles.loc[dicom_id], size, dicom_id)
            rel_image, rel_mask = write_pair(gray, mask, out, dicom_id, image_size)
            rows.append(
                {
                    "site": site,
                    "split": split_of[int(position)],
                    "image": rel_image,
                    "mask": rel_mask,
                    "dicom_id": dicom_id,
                    "subject_id": record["subject_id"],
                    "study_id": record["study_id"],
                    "dice": float(record["dice"]),
                    "height_width_swapped": bool(swapped),
                    "source": os.path.relpath(record["jpg"], mimic),
                }
            )
    frame = pd.DataFrame(rows).sort_values(["site", "split", "image"], kind="stable").reset_index(drop=True)
    split_path = write_split_file(frame, out, SEGMENTATION)
    frame.drop(columns=["mask"]).to_csv(os.path.join(out, "sources.csv"), index=False)
    sizes = frame.groupby(["site", "split"]).size().unstack(fill_value=0)
    return {
        "split_file": split_path,
        "images": len(frame),
        "qualifying_rows": len(candidates),
        "missing_jpgs_skipped": missing,
        "height_width_swapped": int(frame["height_width_swapped"].sum()),
        "sizes": {site: {s: int(sizes.loc[site].get(s, 0)) for s in ("train", "val", "test")} for site in sizes.index},
    }


def load_site(site: str, seed: int = 0, data_root: str | None = None, **options) -> SiteData:
    """Registry entry point: one site of ``<data_root>/xray/split.csv`` (fixed when prepared: ``seed`` is unused)."""
    return load_prepared_site(DATASET, site, data_root, NUM_CLASSES, options)

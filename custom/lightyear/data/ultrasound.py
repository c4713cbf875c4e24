"""``ultrasound``: fetal liver segmentation on the Fetal Abdominal Structures Segmentation dataset (Da et al., "Fetal
abdominal structures segmentation dataset using ultrasonic images", Mendeley Data 4gcpm9dsc3 v1; raw layout:
datasets/ultrasound/README.md). As in the LIGHTYEAR paper, :func:`prepare_ultrasound` gives each of 5 sites distinct
patients, dealt shuffled to the site with the fewest images so far, splits each site by patient and writes the liver
masks with the ``.npy`` images they were drawn on at 64x64. Patient ids are integers by default (``P01`` = ``P001``):
merging two true patients never breaks site disjointness, splitting one would. Prepare only a copy from the publisher:
the ``.npy`` files are unpickled."""

from __future__ import annotations

import os
import re
import zlib

import numpy as np
import pandas as pd
from PIL import Image

from lightyear.data.mask_folder import load_prepared_site, write_pair
from lightyear.data.site_data import SEGMENTATION, SiteData
from lightyear.data.split_file import write_split_file
from lightyear.data.splits import split_indices

DATASET = "ultrasound"
NUM_CLASSES = 2
IMAGE_SIZE = 64
NUM_SITES = 5
ARRAY_DIR = "ARRAY_FORMAT"
PNG_DIR = "IMAGES"
NAME_PATTERN = re.compile(r"^P(\d+)_IMG(\d+)$")
SOURCE = (
    "the Fetal Abdominal Structures Segmentation dataset, Mendeley Data 4gcpm9dsc3 v1 "
    "(https://data.mendeley.com/datasets/4gcpm9dsc3/1), unzipped"
)
MAX_SEARCH_DEPTH = 4


def find_array_folder(raw: str) -> str:
    """The ``ARRAY_FORMAT`` folder at or below ``raw`` (the zip may nest its top folder twice)."""
    if not os.path.isdir(raw):
        raise FileNotFoundError(f"raw ultrasound folder {raw} does not exist; download and unzip {SOURCE}")
    found = []
    base_depth = os.path.abspath(raw).rstrip(os.sep).count(os.sep)
    for folder, subdirs, files in os.walk(raw):
        if os.path.abspath(folder).count(os.sep) - base_depth >= MAX_SEARCH_DEPTH:
            subdirs[:] = []
        if os.path.basename(folder) == ARRAY_DIR and any(f.endswith(".npy") for f in files):
            found.append(folder)
            subdirs[:] = []
        subdirs.sort()
    if not found:
        raise FileNotFoundError(
            f"no {ARRAY_DIR}/ folder with .npy files within {MAX_SEARCH_DEPTH} levels of {raw}; expected "
            f"<raw>/.../{ARRAY_DIR}/P<id>_IMG<N>.npy from {SOURCE}"
        )
    if len(found) > 1:
        raise ValueError(f"several {ARRAY_DIR}/ folders under {raw}: {found}; pass the one dataset folder as --raw")
    return found[0]


def list_samples(array_folder: str, patient_id: str = "number") -> tuple[pd.DataFrame, list[str]]:
    """The samples of an ``ARRAY_FORMAT`` folder: columns name, patient, path; and skipped file names."""
    if patient_id not in ("number", "text"):
        raise ValueError(f"patient_id must be 'number' or 'text', got {patient_id!r}")
    rows, skipped = [], []
    for file in sorted(os.listdir(array_folder)):
        if not file.endswith(".npy"):
            continue
        name = file[: -len(".npy")]
        match = NAME_PATTERN.match(name)
        if not match:
            skipped.append(file)
            continue
        patient = str(int(match.group(1))) if patient_id == "number" else match.group(1)
        rows.append({"name": name, "patient": patient, "path": os.path.join(array_folder, file)})
    if not rows:
        raise FileNotFoundError(
            f"no P<id>_IMG<N>.npy files in {array_folder}; expected the {ARRAY_DIR}/ folder of {SOURCE}"
        )
    return pd.DataFrame(rows), skipped


def assign_patients(image_counts: dict[str, int], num_sites: int, seed: int) -> dict[str, int]:
    """Map each patient to a site (0-based): shuffled, each to the site with the fewest images so far."""
    if num_sites < 1:
        raise ValueError(f"num_sites must be at least 1, got {num_sites}")
    patients = sorted(image_counts)
    order = np.random.default_rng([int(seed) & 0xFFFFFFFF, 169]).permutation(len(patients))
    load = [0] * num_sites
    site_of = {}
    for i in order:
        patient = patients[i]
        k = int(np.argmin(load))
        site_of[patient] = k
        load[k] += image_counts[patient]
    return site_of


def site_patient_splits(patients: list[str], fractions, seed: int, site: str) -> dict[str, str]:
    ordered = sorted(patients)
    if len(ordered) < 3:
        raise ValueError(
            f"ultrasound {site} has {len(ordered)} patients; "
            "a train/val/test split by patient needs at least 3 (use fewer sites)"
        )
    parts = split_indices(len(ordered), fractions, seed=(int(seed) * 1000003 + zlib.crc32(site.encode())) & 0xFFFFFFFF)
    return {ordered[i]: split for split, idx in parts.items() for i in idx}


def read_array_sample(path: str, structure: str) -> tuple[np.ndarray, np.ndarray]:
    """The image and the ``structure`` mask stored in one ``.npy`` dict."""
    try:
        content = np.load(path, allow_pickle=True)
    except Exception as error:  # numpy raises several types for a corrupt file
        raise ValueError(f"cannot read {path} as a NumPy file ({error}); re-download {SOURCE}") from error
    record = (
        content.item()
        if isinstance(content, np.ndarray) and content.dtype == object and content.shape == ()
        else content
    )
    if not isinstance(record, dict) or "image" not in record or not isinstance(record.get("structures"), dict):
        raise ValueError(
            f"{path} does not hold a dict with keys 'image' and 'structures' (a dict of masks) as in {SOURCE}"
        )
    structures = record["structures"]
    if structure not in structures:
        raise ValueError(f"{path} has no {structure!r} mask; its structures are {sorted(structures)}")
    return np.asarray(record["image"]), np.asarray(structures[structure])


def read_png_image(array_folder: str, name: str) -> np.ndarray:
    """The ``IMAGES/<name>.png`` next to the ``ARRAY_FORMAT`` folder, as an array."""
    path = os.path.join(os.path.dirname(array_folder), PNG_DIR, f"{name}.png")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no {path}; image_source='png' needs the {PNG_DIR}/ folder of {SOURCE}")
    with Image.open(path) as img:
        return np.asarray(img.convert("L"))


def prepare_ultrasound(
    raw: str,
    out: str,
    seed: int = 0,
    structure: str = "liver",
    num_sites: int = NUM_SITES,
    image_size: int = IMAGE_SIZE,
    fractions=(0.6, 0.2, 0.2),
    patient_id: str = "number",
    image_source: str = "npy",
) -> dict:
    """Write the prepared dataset under ``out`` (steps: module docstring); return a summary."""
    if image_source not in ("npy", "png"):
        raise ValueError(f"image_source must be 'npy' or 'png', got {image_source!r}")
    array_folder = find_array_folder(raw)
    samples, skipped = list_samples(array_folder, patient_id)
    counts = samples.groupby("patient").size().to_dict()
    if len(counts) < 3 * num_sites:
        raise ValueError(
            f"{len(counts)} patients in {array_folder} cannot fill {num_sites} sites with >= 3 patients each"
        )
    site_of = assign_patients(counts, num_sites, seed)
    sites = [f"site-{k + 1}" for k in range(num_sites)]
    split_of = {}
    for k, site in enumerate(sites):
        split_of.update(site_patient_splits([p for p, s in site_of.items() if s == k], fractions, seed, site))

    rows = []
    for sample in samples.itertuples(index=False):
        image, mask = read_array_sample(sample.path, structure)
        if image_source == "png":
            image = read_png_image(array_folder, sample.name)
            if image.shape[:2] != mask.shape[:2]:
                mask = np.asarray(
                    Image.fromarray((mask > 0).astype(np.uint8) * 255).resize(image.shape[1::-1], Image.NEAREST)
                )
        rel_image, rel_mask = write_pair(image, mask, out, sample.name, image_size)
        rows.append(
            {
                "site": sites[site_of[sample.patient]],
                "split": split_of[sample.patient],
                "image": rel_image,
                "mask": rel_mask,
                "patient": sample.patient,
                "source": os.path.relpath(sample.path, raw),
            }
        )
    frame = pd.DataFrame(rows).sort_values(["site", "split", "image"], kind="stable").reset_index(drop=True)
    split_path = write_split_file(frame, out, SEGMENTATION)
    frame.loc[:, ["site", "split", "patient", "image", "source"]].to_csv(os.path.join(out, "sources.csv"), index=False)
    sizes = frame.groupby(["site", "split"]).size().unstack(fill_value=0)
    return {
        "split_file": split_path,
        "images": len(frame),
        "patients": len(counts),
        "skipped_files": skipped,
        "sizes": {site: {s: int(sizes.loc[site].get(s, 0)) for s in ("train", "val", "test")} for site in sizes.index},
    }


def load_site(site: str, seed: int = 0, data_root: str | None = None, **options) -> SiteData:
    """Registry entry point: a site of ``<data_root>/ultrasound/split.csv`` (fixed when prepared: ``seed`` unused)."""
    return load_prepared_site(DATASET, site, data_root, NUM_CLASSES, options)

"""``femnist``: LEAF's Federated EMNIST, 62 classes of handwritten characters, sites of writers.

Source: LEAF (TalwalkarLab/leaf, ``data/femnist``). LEAF's preprocessing writes JSON files
``all_data/all_data_<k>.json`` (and, after sampling and splitting, ``train/*.json`` and
``test/*.json``) with the schema::

    {"users": [...], "num_samples": [...],
     "user_data": {user: {"x": [[784 floats], ...], "y": [int, ...]}}}

Each ``x`` is a 28x28 image flattened row-major with values in [0, 1]; LEAF does not invert
the NIST scans, so the paper background is about 1.0 and the ink about 0. Each ``y`` is the
index into ``0-9A-Za-z`` (0..61).

Sites follow the LIGHTYEAR paper: each of the 8 sites holds a distinct set of writers, and each
site's samples are split at random into train/val/test. :func:`prepare_femnist` picks the
writers with the seed, writes every chosen sample as a 28x28 8-bit PNG (inverted by default, so
the ink is bright on a dark background as in EMNIST/TFF) and the split file. :func:`load_site`
reads the split file only.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import v2

from lightyear.data.image_folder import (
    DEFAULT_FRACTIONS,
    load_image_file_site,
    site_names,
    write_classification_split,
)
from lightyear.data.site_data import SiteData

NAME = "femnist"
NUM_CLASSES = 62
NUM_SITES = 8
IMAGE_SIZE = 28
PIXELS = IMAGE_SIZE * IMAGE_SIZE
DEFAULT_WRITERS_PER_SITE = 5
SOURCES = ("auto", "all_data", "train_test")
OBTAIN = (
    "run LEAF's preprocessing (github.com/TalwalkarLab/leaf, data/femnist: ./preprocess.sh -s niid "
    "--sf 1.0 -k 0 -t sample) and pass its data/femnist/data folder; see datasets/femnist/README.md"
)


def find_leaf_json(raw: str, source: str = "auto") -> list[str]:
    """The LEAF JSON files under ``raw``.

    ``all_data``: every ``all_data_*.json`` below ``raw``. ``train_test``: every ``*.json`` in a
    folder named ``train`` or ``test`` below ``raw`` (a writer's train and test samples are then
    joined). ``auto``: ``all_data`` files when there are any, else the train/test files.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if not os.path.isdir(raw):
        raise FileNotFoundError(f"FEMNIST raw folder {raw} does not exist: {OBTAIN}")
    all_data = sorted(glob.glob(os.path.join(raw, "**", "all_data_*.json"), recursive=True))
    every_json = glob.glob(os.path.join(raw, "**", "*.json"), recursive=True)
    split_files = [
        p for part in ("train", "test") for p in sorted(every_json) if os.path.basename(os.path.dirname(p)) == part
    ]
    if source == "all_data" or (source == "auto" and all_data):
        files = all_data
        wanted = "all_data_*.json files"
    else:
        files = split_files
        wanted = "*.json files in train/ and test/ folders"
    if not files:
        raise FileNotFoundError(f"no LEAF FEMNIST {wanted} under {raw}: {OBTAIN}")
    return files


def read_leaf_json(path: str) -> dict:
    """One LEAF JSON file, checked for the ``users`` and ``user_data`` keys."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    missing = [k for k in ("users", "user_data") if k not in data]
    if missing:
        raise ValueError(
            f"{path} lacks keys {missing}; a LEAF JSON file has users, num_samples and user_data ({OBTAIN})"
        )
    return data


def read_leaf_users(path: str, prefix_chars: int = 1 << 20) -> list[str]:
    """The ``users`` list of a LEAF JSON file.

    LEAF writes ``users`` as the first key, so the list is decoded from the start of the file
    without parsing the pixel data; any other layout falls back to reading the whole file.
    """
    with open(path, encoding="utf-8") as handle:
        head = handle.read(prefix_chars)
    body = head.lstrip()
    key = '"users"'
    if body.startswith("{") and body[1:].lstrip().startswith(key):
        rest = body[1:].lstrip()[len(key) :].lstrip()
        if rest.startswith(":"):
            value = rest[1:].lstrip()
            try:
                users, _ = json.JSONDecoder().raw_decode(value)
            except json.JSONDecodeError:
                users = None
            if isinstance(users, list):
                return [str(u) for u in users]
    return [str(u) for u in read_leaf_json(path)["users"]]


def list_writers(files: Sequence[str]) -> dict[str, list[str]]:
    """Every writer id and the files that hold its samples."""
    writers: dict[str, list[str]] = {}
    for path in files:
        for user in read_leaf_users(path):
            writers.setdefault(user, []).append(path)
    return writers


def choose_writers(writers: Sequence[str], num_sites: int, writers_per_site: int, seed: int) -> list[list[str]]:
    """Distinct writers for each site, drawn with ``seed`` from the sorted writer ids."""
    if num_sites < 1 or writers_per_site < 1:
        raise ValueError(f"need at least one site and one writer per site, got {num_sites} and {writers_per_site}")
    pool = sorted(set(writers))
    needed = num_sites * writers_per_site
    if needed > len(pool):
        raise ValueError(
            f"{num_sites} sites x {writers_per_site} writers need {needed} writers; the data has {len(pool)}"
        )
    picked = np.random.default_rng(seed).choice(len(pool), size=needed, replace=False)
    return [[pool[i] for i in picked[k * writers_per_site : (k + 1) * writers_per_site]] for k in range(num_sites)]


def leaf_pixels_to_image(pixels: Sequence[float], invert: bool = True) -> Image.Image:
    """A LEAF sample (784 values in [0, 1]) as a 28x28 8-bit grayscale image."""
    x = np.asarray(pixels, dtype=np.float64)
    if x.shape != (PIXELS,):
        raise ValueError(f"a FEMNIST sample has {PIXELS} pixel values, got shape {x.shape}")
    x = np.clip(x, 0.0, 1.0).reshape(IMAGE_SIZE, IMAGE_SIZE)
    if invert:
        x = 1.0 - x
    return Image.fromarray(np.round(x * 255.0).astype(np.uint8), mode="L")


def safe_name(text: str) -> str:
    """``text`` with anything but letters, digits, ``-`` and ``_`` replaced by ``_`` (a file name)."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in text)


def prepare_femnist(
    raw: str,
    out: str,
    seed: int = 0,
    writers_per_site: int = DEFAULT_WRITERS_PER_SITE,
    num_sites: int = NUM_SITES,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    invert: bool = True,
    source: str = "auto",
) -> str:
    """Pick each site's writers, write their images as PNGs and the split file; return its path.

    Images go to ``<out>/images/<writer>/<n>.png`` (``n``: the sample's position among the
    writer's samples, train file before test file for the ``train_test`` source); the split
    file lists them relative to ``out``. The same inputs and seed give the same files.
    """
    files = find_leaf_json(raw, source)
    writers = list_writers(files)
    chosen = choose_writers(list(writers), num_sites, writers_per_site, seed)
    site_of = {w: site for site, group in zip(site_names(num_sites), chosen) for w in group}

    samples_of: dict[str, list[tuple[list[float], int]]] = {w: [] for w in site_of}
    for path in sorted({p for w in site_of for p in writers[w]}, key=files.index):
        user_data = read_leaf_json(path)["user_data"]
        for writer in site_of:
            if writer not in user_data:
                continue
            record = user_data[writer]
            if "x" not in record or "y" not in record or len(record["x"]) != len(record["y"]):
                raise ValueError(f"{path}: writer {writer} needs lists x and y of equal length")
            samples_of[writer].extend(zip(record["x"], record["y"]))

    per_site: dict[str, list[tuple[str, int]]] = {site: [] for site in site_names(num_sites)}
    for site, group in zip(site_names(num_sites), chosen):
        for writer in group:
            folder = os.path.join("images", safe_name(writer))
            os.makedirs(os.path.join(out, folder), exist_ok=True)
            for n, (pixels, label) in enumerate(samples_of[writer]):
                if int(label) != label or not 0 <= int(label) < NUM_CLASSES:
                    raise ValueError(f"writer {writer} has label {label!r}; FEMNIST labels are 0..{NUM_CLASSES - 1}")
                relative = os.path.join(folder, f"{n}.png")
                leaf_pixels_to_image(pixels, invert).save(os.path.join(out, relative))
                per_site[site].append((relative, int(label)))
    return write_classification_split(per_site, out, fractions, seed)


def image_transform(image_size: int = IMAGE_SIZE) -> v2.Compose:
    """PIL grayscale image -> float tensor ``1 x image_size x image_size`` in [0, 1]."""
    steps = [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]
    if image_size != IMAGE_SIZE:
        steps.append(v2.Resize((image_size, image_size), antialias=True))
    return v2.Compose(steps)


def load_site(site: str, seed: int = 0, data_root: str | None = None, image_size: int = IMAGE_SIZE) -> SiteData:
    """Site ``site``'s train/val/test sets from the prepared split file.

    Images are ``1 x 28 x 28`` floats in [0, 1] (``image_size`` resizes them); labels 0..61.
    The split is fixed by the prepare step, so ``seed`` is not used here.
    """
    transform = image_transform(image_size)
    return load_image_file_site(
        NAME, site, data_root, {"train": transform, "val": transform, "test": transform}, NUM_CLASSES, 1, "L"
    )

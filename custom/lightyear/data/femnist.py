"""``femnist``: LEAF's Federated EMNIST (TalwalkarLab/leaf, ``data/femnist``), 62 classes of handwritten characters;
as in the LIGHTYEAR paper each of 8 sites holds distinct writers (raw layout: datasets/femnist/README.md)."""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import v2

from lightyear.data.image_folder import DEFAULT_FRACTIONS, load_image_file_site, site_names, write_classification_split
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
    """The LEAF JSON files below ``raw``: ``all_data_*.json`` and/or ``*.json`` in ``train``/``test`` (``source``)."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if not os.path.isdir(raw):
        raise FileNotFoundError(f"FEMNIST raw folder {raw} does not exist: {OBTAIN}")
    all_data = sorted(glob.glob(os.path.join(raw, "**", "all_data_*.json"), recursive=True))
    every_json = glob.glob(os.path.join(raw, "**", "*.json"), recursive=True)
    split_files = [
        p for part in ("train", "test") for p in sorted(every_json) if os.path.basename(os.path.dirname(p)) == part
    ]
    use_all = source == "all_data" or (source == "auto" and all_data)
    files = all_data if use_all else split_files
    wanted = "all_data_*.json files" if use_all else "*.json files in train/ and test/ folders"
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
    """The ``users`` of a LEAF JSON file, read without parsing pixels when it is the first key, as LEAF writes."""
    with open(path, encoding="utf-8") as handle:
        head = handle.read(prefix_chars)
    start = re.match(r'\s*\{\s*"users"\s*:\s*', head)
    if start:
        try:
            users = json.JSONDecoder().raw_decode(head, start.end())[0]
        except json.JSONDecodeError:
            users = None
        if isinstance(users, list):
            return [str(u) for u in users]
    return [str(u) for u in read_leaf_json(path)["users"]]


def list_writers(files: Sequence[str]) -> dict[str, list[str]]:
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
    """A LEAF sample (784 values in [0, 1], dark ink) as a 28x28 8-bit image, inverted by default (bright ink, as
    EMNIST)."""
    x = np.asarray(pixels, dtype=np.float64)
    if x.shape != (PIXELS,):
        raise ValueError(f"a FEMNIST sample has {PIXELS} pixel values, got shape {x.shape}")
    x = np.clip(x, 0.0, 1.0).reshape(IMAGE_SIZE, IMAGE_SIZE)
    if invert:
        x = 1.0 - x
    return Image.fromarray(np.round(x * 255.0).astype(np.uint8), mode="L")


def safe_name(text: str) -> str:
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
    """Pick each site's writers, write their images to ``<out>/images/<writer>/<n>.png`` (``n``: the sample's position,
    train file before test file) and the split file; return its path. The same inputs and seed give the same files."""
    files = find_leaf_json(raw, source)
    writers = list_writers(files)
    chosen = choose_writers(list(writers), num_sites, writers_per_site, seed)
    site_of = {w: site for site, group in zip(site_names(num_sites), chosen) for w in group}

    samples_of: dict[str, list[tuple[list[float], int]]] = {w: [] for w in site_of}
    for path in sorted({p for w in site_of for p in writers[w]}, key=files.index):
        user_data = read_leaf_json(path)["user_data"]
        for writer in [w for w in site_of if w in user_data]:
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
    """Site ``site``'s sets from the split file (``seed`` is unused): images in [0, 1], labels 0..61."""
    transforms = dict.fromkeys(("train", "val", "test"), image_transform(image_size))
    return load_image_file_site(NAME, site, data_root, transforms, NUM_CLASSES, 1, "L")

"""``digits``: the embedded default dataset, scikit-learn's 1,797 handwritten digits (8x8, 10 classes) over sites.

Resized to 28x28, an image of class c goes to a site drawn with weight 6 where c is dominant ({3k, 3k+1, 3k+2} mod 10
at site k, 0-based), 1 elsewhere; site k applies acquisition shift k mod 8 (:func:`apply_site_shift`,
docs/datasets.md). Assignment, noise and the 60/20/20 splits are pure functions of the job seed."""

from __future__ import annotations

import gzip
import importlib.util
import math
import os
import zlib

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from lightyear.checks import int_in
from lightyear.data.site_data import CLASSIFICATION, SiteData
from lightyear.data.splits import split_indices

NUM_SITES = 8
NUM_CLASSES = 10
IMAGE_SIZE = 28
SITES = tuple(f"site-{k + 1}" for k in range(NUM_SITES))
DOMINANT_WEIGHT = 6.0
MAX_SITES = 256
PIXEL_MEAN = 0.5
PIXEL_STD = 0.5


def dominant_classes(site_index: int) -> tuple[int, ...]:
    return tuple((3 * site_index + d) % NUM_CLASSES for d in range(3))


def check_num_sites(num_sites) -> int:
    return int_in("num_sites", num_sites, 2, MAX_SITES, note="digits has 1,797 images to share")


def assign_sites(labels: np.ndarray, seed: int, num_sites: int = NUM_SITES) -> np.ndarray:
    """Draw a site (0..num_sites-1) for every image from its class's site weights."""
    weights = np.ones((num_sites, NUM_CLASSES))
    for k in range(num_sites):
        weights[k, list(dominant_classes(k))] = DOMINANT_WEIGHT
    probs = weights / weights.sum(axis=0, keepdims=True)  # per class, over sites
    rng = np.random.default_rng([seed & 0xFFFFFFFF, 1797])
    return np.array([rng.choice(num_sites, p=probs[:, c]) for c in labels])


def read_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 images (N, 8, 8), values 0..16, and labels, read from sklearn's ``digits.csv.gz`` without importing
    the costly ``sklearn.datasets`` in every site process (docs/datasets.md); else from ``load_digits``."""
    spec = importlib.util.find_spec("sklearn")
    folder = list(spec.submodule_search_locations or [])[0] if spec else None
    path = os.path.join(folder, "datasets", "data", "digits.csv.gz") if folder else None
    if path and os.path.isfile(path):
        with gzip.open(path, "rt") as f:
            table = np.loadtxt(f, delimiter=",")
        return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.images, bunch.target.astype(np.int64)


def rotate(images: torch.Tensor, degrees: float) -> torch.Tensor:
    """Rotate images (N, C, H, W) about their centre, bilinear, zeros outside."""
    theta = math.radians(degrees)
    cos, sin = math.cos(theta), math.sin(theta)
    matrix = torch.tensor([[cos, -sin, 0.0], [sin, cos, 0.0]], dtype=images.dtype).expand(len(images), 2, 3)
    grid = F.affine_grid(matrix, list(images.shape), align_corners=False)
    return F.grid_sample(images, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def gaussian_blur(images: torch.Tensor, kernel_size: int, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of images (N, 1, H, W) with reflected borders."""
    x = torch.arange(kernel_size, dtype=images.dtype) - (kernel_size - 1) / 2
    k = torch.exp(-(x**2) / (2 * sigma**2))
    k = k / k.sum()
    pad = kernel_size // 2
    out = F.pad(images, (pad, pad, pad, pad), mode="reflect")
    out = F.conv2d(out, k.view(1, 1, 1, -1))
    return F.conv2d(out, k.view(1, 1, -1, 1))


def _noise(images: torch.Tensor, sigma: float, seed: int, site_index: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(
        int(np.random.SeedSequence([seed & 0xFFFFFFFF, site_index]).generate_state(1)[0])
    )
    return (images + sigma * torch.randn(images.shape, generator=gen)).clamp(0.0, 1.0)


def apply_site_shift(
    images: torch.Tensor, site_index: int, seed: int = 0, noise_key: int | None = None
) -> torch.Tensor:
    """Apply acquisition shift ``site_index`` (0..7) to images ``(N, 1, 28, 28)`` in [0, 1]; ``noise_key`` (default
    ``site_index``) seeds the noisy shifts, so sites beyond the eighth pass their own index."""
    key = site_index if noise_key is None else noise_key
    if site_index == 0:
        return images
    if site_index == 1:
        return 0.35 + 0.4 * images
    if site_index == 2:
        return gaussian_blur(images, kernel_size=5, sigma=1.2)
    if site_index == 3:
        return rotate(images, 20.0)
    if site_index == 4:
        return _noise(images, 0.15, seed, key)
    if site_index == 5:
        return images.clamp(0.0, 1.0) ** 0.4
    if site_index == 6:
        return gaussian_blur(rotate(images, -20.0), kernel_size=5, sigma=0.8)
    if site_index == 7:
        return _noise((1.8 * images - 0.2).clamp(0.0, 1.0), 0.08, seed, key)
    raise ValueError(f"digits has sites 0..{NUM_SITES - 1}, got {site_index}")


def site_index(site: str, num_sites: int = NUM_SITES) -> int:
    names = [f"site-{k + 1}" for k in range(num_sites)]
    if site not in names:
        raise ValueError(
            f"digits with num_sites={num_sites} has sites site-1 .. site-{num_sites}; got {site!r}. "
            "Name the sites so in the job, or set dataset_args num_sites to the number of sites"
        )
    return names.index(site)


def load_digits_site(
    site: str, seed: int = 0, fractions=(0.6, 0.2, 0.2), normalize: bool = True, num_sites: int = NUM_SITES
) -> SiteData:
    """Site ``site``'s train/val/test split; ``normalize`` maps the images from [0, 1] to [-1, 1]."""
    num_sites = check_num_sites(num_sites)
    k = site_index(site, num_sites)
    all_images, labels = read_digits()
    owner = assign_sites(labels, seed, num_sites)
    mine = np.flatnonzero(owner == k)
    images = torch.from_numpy(all_images[mine].astype(np.float32) / 16.0).unsqueeze(1)
    images = F.interpolate(images, size=(IMAGE_SIZE, IMAGE_SIZE), mode="bilinear", align_corners=False, antialias=True)
    images = apply_site_shift(images.clamp(0.0, 1.0), k % NUM_SITES, seed, noise_key=k).float()
    if normalize:
        images = (images - PIXEL_MEAN) / PIXEL_STD
    images = images.contiguous()
    y = torch.from_numpy(labels[mine])
    parts = split_indices(len(mine), fractions, seed=(seed * 1000003 + zlib.crc32(site.encode())) & 0xFFFFFFFF)
    sets = {name: TensorDataset(images[idx], y[idx]) for name, idx in parts.items()}
    return SiteData(sets["train"], sets["val"], sets["test"], NUM_CLASSES, 1, CLASSIFICATION)


def load_site(site: str, seed: int = 0, data_root: str | None = None, **options) -> SiteData:
    """Registry entry point; ``digits`` is embedded, so ``data_root`` is ignored."""
    return load_digits_site(site, seed=seed, **options)

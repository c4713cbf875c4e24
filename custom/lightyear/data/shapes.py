"""``shapes``: the embedded segmentation dataset, synthetic discs over 5 sites (``datasets/shapes/README.md``): 64x64
images with binary masks by MONAI's :func:`monai.data.synthetic.create_test_image_2d`, each site's with its own
settings (:data:`SITE_STYLES`) and a generator seeded by (seed, site)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import TensorDataset

from lightyear.checks import positive_int
from lightyear.data.site_data import SEGMENTATION, SiteData
from lightyear.data.splits import split_indices

NUM_CLASSES = 2
IMAGE_SIZE = 64
DEFAULT_IMAGES_PER_SITE = 60


@dataclass(frozen=True)
class SiteStyle:
    """How one site's images are drawn: the generator's settings, then ``clip(brightness + contrast * x, 0, 1)``."""

    num_objs: int
    rad_min: int
    rad_max: int
    noise_max: float
    contrast: float
    brightness: float


SITE_STYLES: dict[str, SiteStyle] = {
    "site-1": SiteStyle(num_objs=4, rad_min=5, rad_max=14, noise_max=0.0, contrast=1.0, brightness=0.0),
    "site-2": SiteStyle(num_objs=4, rad_min=5, rad_max=14, noise_max=0.3, contrast=1.0, brightness=0.0),
    "site-3": SiteStyle(num_objs=6, rad_min=4, rad_max=10, noise_max=0.5, contrast=0.6, brightness=0.2),
    "site-4": SiteStyle(num_objs=3, rad_min=8, rad_max=18, noise_max=0.2, contrast=0.5, brightness=0.4),
    "site-5": SiteStyle(num_objs=5, rad_min=5, rad_max=14, noise_max=0.7, contrast=1.0, brightness=0.0),
}
SITES = tuple(SITE_STYLES)


def site_index(site: str) -> int:
    if site not in SITE_STYLES:
        raise ValueError(
            f"shapes has sites {', '.join(SITES)}; got {site!r}. Name the sites site-1 .. site-5 in the job."
        )
    return SITES.index(site)


def site_seed(seed: int, site: str) -> int:
    return int(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, site_index(site)]).generate_state(1)[0])


def generate_site_images(
    site: str, count: int, seed: int = 0, image_size: int = IMAGE_SIZE
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``count`` images ``(count, size, size)`` float32 in [0, 1] and masks int64 {0, 1} of one site."""
    from monai.data.synthetic import create_test_image_2d

    style = SITE_STYLES[SITES[site_index(site)]]
    positive_int("images_per_site", count)
    if image_size <= 2 * style.rad_max:
        raise ValueError(f"shapes needs image_size > {2 * style.rad_max} for {site}, got {image_size}")
    state = np.random.RandomState(site_seed(seed, site))
    images = np.empty((count, image_size, image_size), dtype=np.float32)
    masks = np.empty((count, image_size, image_size), dtype=np.int64)
    for i in range(count):
        image, mask = create_test_image_2d(
            image_size,
            image_size,
            num_objs=style.num_objs,
            rad_max=style.rad_max,
            rad_min=style.rad_min,
            noise_max=style.noise_max,
            num_seg_classes=1,
            random_state=state,
        )
        images[i] = np.clip(style.brightness + style.contrast * image, 0.0, 1.0)
        masks[i] = mask
    return images, masks


def load_shapes_site(
    site: str,
    seed: int = 0,
    images_per_site: int = DEFAULT_IMAGES_PER_SITE,
    fractions=(0.6, 0.2, 0.2),
    image_size: int = IMAGE_SIZE,
) -> SiteData:
    images, masks = generate_site_images(site, images_per_site, seed=seed, image_size=image_size)
    x = torch.from_numpy(images).unsqueeze(1)
    y = torch.from_numpy(masks)
    parts = split_indices(len(x), fractions, seed=(int(seed) * 1000003 + zlib.crc32(site.encode())) & 0xFFFFFFFF)
    sets = {name: TensorDataset(x[idx], y[idx]) for name, idx in parts.items()}
    return SiteData(sets["train"], sets["val"], sets["test"], NUM_CLASSES, 1, SEGMENTATION)


def load_site(site: str, seed: int = 0, data_root: str | None = None, **options) -> SiteData:
    """Registry entry point; ``shapes`` is generated, so ``data_root`` is ignored."""
    return load_shapes_site(site, seed=seed, **options)

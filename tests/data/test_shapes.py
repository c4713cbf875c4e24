"""The embedded synthetic segmentation dataset ``shapes``."""

import numpy as np
import pytest
import torch

from lightyear.data import SEGMENTATION, load_site_data
from lightyear.data.shapes import SITES, generate_site_images, load_site


def _stack(dataset):
    images, masks = zip(*(dataset[i] for i in range(len(dataset))))
    return torch.stack(images), torch.stack(masks)


def test_five_sites_with_default_sizes_and_binary_masks():
    assert SITES == ("site-1", "site-2", "site-3", "site-4", "site-5")
    for site in SITES:
        data = load_site_data("shapes", site, seed=0)
        assert data.task == SEGMENTATION and data.num_classes == 2 and data.in_channels == 1
        assert data.sizes() == {"train": 36, "val": 12, "test": 12}
        for part in (data.train, data.val, data.test):
            images, masks = _stack(part)
            assert images.shape[1:] == (1, 64, 64) and images.dtype == torch.float32
            assert masks.shape[1:] == (64, 64) and masks.dtype == torch.int64
            assert set(masks.unique().tolist()) == {0, 1}
            assert images.min() >= 0 and images.max() <= 1


def test_images_per_site_option():
    data = load_site("site-3", seed=1, images_per_site=10)
    assert data.sizes() == {"train": 6, "val": 2, "test": 2}


def test_sites_differ_in_noise_and_contrast():
    stats = {}
    for site in SITES:
        images, masks = generate_site_images(site, 20, seed=0)
        background = images[masks == 0]
        foreground = images[masks == 1]
        stats[site] = (background.std(), foreground.mean() - background.mean())
    assert stats["site-1"][0] < 1e-6  # noise-free reference
    assert stats["site-5"][0] > stats["site-2"][0] > 0.05  # noise grows with noise_max
    assert stats["site-4"][1] < stats["site-1"][1] - 0.3  # washed-out contrast
    assert len({round(float(s[0]), 3) for s in stats.values()}) == len(SITES)


def test_deterministic_in_the_seed():
    a_images, a_masks = _stack(load_site("site-2", seed=7).train)
    b_images, b_masks = _stack(load_site("site-2", seed=7).train)
    c_images, _ = _stack(load_site("site-2", seed=8).train)
    assert torch.equal(a_images, b_images) and torch.equal(a_masks, b_masks)
    assert not torch.equal(a_images, c_images)
    # the global NumPy generator plays no part
    np.random.seed(123)
    d_images, _ = _stack(load_site("site-2", seed=7).train)
    assert torch.equal(a_images, d_images)


def test_unknown_site_is_a_clear_error():
    with pytest.raises(ValueError, match="site-1 .. site-5"):
        load_site("site-6")

"""The embedded digits data: more sites on demand, the default 8 sites unchanged."""

import hashlib

import pytest
import torch

from lightyear.data import digits


def fingerprint(data):
    h = hashlib.sha256()
    for part in (data.train, data.val, data.test):
        x, y = part.tensors
        h.update(x.numpy().tobytes())
        h.update(y.numpy().tobytes())
    return h.hexdigest()[:16]


def label_fingerprint(data):
    h = hashlib.sha256()
    for part in (data.train, data.val, data.test):
        h.update(part.tensors[1].numpy().tobytes())
    return h.hexdigest()[:16]


def test_eight_sites_are_the_default_and_num_sites_8_changes_nothing():
    a = digits.load_digits_site("site-3", seed=0)
    b = digits.load_digits_site("site-3", seed=0, num_sites=8)
    assert fingerprint(a) == fingerprint(b)
    # the images each site held before the num_sites option existed (labels in split order)
    assert a.sizes() == {"train": 152, "val": 50, "test": 50}
    assert label_fingerprint(a) == "66f5b628c6526358"


def test_32_sites_cycle_the_shifts_and_the_dominant_classes():
    sites = [digits.load_digits_site(f"site-{k}", seed=0, num_sites=32) for k in (1, 9, 13)]
    assert all(25 <= s.sizes()["train"] <= 45 for s in sites)
    # site-13 (index 12) is dominated by {36, 37, 38} mod 10 = {6, 7, 8}
    labels = torch.cat([sites[2].train.tensors[1], sites[2].val.tensors[1], sites[2].test.tensors[1]]).tolist()
    assert sum(c in (6, 7, 8) for c in labels) > len(labels) / 2
    # site-9 has site-1's shift (none) but other images: no two sites hold the same data
    assert fingerprint(sites[0]) != fingerprint(sites[1])
    owners = digits.assign_sites(digits.read_digits()[1], seed=0, num_sites=32)
    assert set(owners.tolist()) == set(range(32))


def test_noisy_shift_draws_its_own_noise_per_site():
    x = torch.full((2, 1, 28, 28), 0.5)
    a = digits.apply_site_shift(x, 4, seed=0)  # site-5's noise
    assert torch.equal(a, digits.apply_site_shift(x, 4, seed=0, noise_key=4))
    assert not torch.equal(a, digits.apply_site_shift(x, 4, seed=0, noise_key=12))  # site-13 reuses shift 4


@pytest.mark.parametrize(
    "site, num_sites, message",
    [("site-9", 8, "site-1 .. site-8"), ("site-33", 32, "num_sites=32"), ("site-1", 1, "num_sites must be")],
)
def test_site_names_and_counts_are_checked(site, num_sites, message):
    with pytest.raises(ValueError, match=message):
        digits.load_digits_site(site, num_sites=num_sites)

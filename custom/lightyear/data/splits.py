"""Seeded train/val/test splits (NumPy only)."""

from __future__ import annotations

import numpy as np

SPLITS = ("train", "val", "test")


def split_indices(n: int, fractions=(0.6, 0.2, 0.2), seed: int = 0) -> dict[str, np.ndarray]:
    """``range(n)`` shuffled with ``seed`` and cut into sorted train/val/test indices by ``fractions``, none empty."""
    fractions = tuple(float(f) for f in fractions)
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-6:
        raise ValueError(f"split fractions must be three positive numbers summing to 1, got {fractions}")
    if n < 3:
        raise ValueError(f"need at least 3 samples to make train/val/test splits, got {n}")
    order = np.random.default_rng(seed).permutation(n)
    n_val = max(1, int(round(fractions[1] * n)))
    n_test = max(1, int(round(fractions[2] * n)))
    n_train = n - n_val - n_test
    if n_train < 1:
        raise ValueError(f"{n} samples leave no training sample with fractions {fractions}")
    return {
        "train": np.sort(order[:n_train]),
        "val": np.sort(order[n_train : n_train + n_val]),
        "test": np.sort(order[n_train + n_val :]),
    }

"""Aggregation rules over model weights (pure NumPy, no FLARE).

A model is a ``dict[str, np.ndarray]`` (a state dict as NumPy arrays). Floating-point entries
are combined; integer entries (e.g. BatchNorm's ``num_batches_tracked``) are counters, not
parameters, and keep the receiving site's own value.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

Weights = Mapping[str, np.ndarray]


def _is_float(a: np.ndarray) -> bool:
    return np.issubdtype(np.asarray(a).dtype, np.floating)


def check_gamma(gamma: float) -> float:
    """Raise a ValueError naming the fix if gamma is not a number in (0, 1]."""
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not np.isfinite(gamma) or not 0.0 < gamma <= 1.0:
        raise ValueError(
            f"gamma must be a number in (0, 1] (1 = plain FedAvg over the selected peers), got {gamma!r}; "
            "the paper uses 0.95"
        )
    return float(gamma)


def decayed_mean_update(own: Weights, selected: Sequence[Weights], gamma: float, t: int) -> dict[str, np.ndarray]:
    """theta_i <- theta_i + gamma^t * 1/|S_i| * sum_{j in S_i} (theta_j - theta_i) (Eq. 18).

    ``t`` counts aggregations from 0, so the first aggregation moves fully to the peers' mean
    when gamma = 1 and by gamma^0 = 1 in any case. With ``gamma = 1`` the result equals the plain
    mean of the selected models (FedAvg over S_i). The site's own model is not part of the mean.
    An empty selection returns the own model unchanged.
    """
    check_gamma(gamma)
    if t < 0:
        raise ValueError(f"round index t must be >= 0, got {t}")
    out = {k: np.array(v, copy=True) for k, v in own.items()}
    if not selected:
        return out
    step = gamma**t
    for key, mine in own.items():
        if not _is_float(mine):
            continue
        acc = np.zeros(np.shape(mine), dtype=np.float64)
        for peer in selected:
            acc += np.asarray(peer[key], dtype=np.float64) - mine
        out[key] = (mine + step * acc / len(selected)).astype(np.asarray(mine).dtype)
    return out


def weighted_average(models: Sequence[Weights], weights: Sequence[float] | None = None) -> dict[str, np.ndarray]:
    """sum_k w_k theta_k / sum_k w_k (FedAvg; McMahan et al. 2017, weights = sample counts).

    Integer entries are taken from the first model.
    """
    if not models:
        raise ValueError("weighted_average needs at least one model")
    if weights is None:
        weights = [1.0] * len(models)
    if len(weights) != len(models):
        raise ValueError(f"{len(models)} models but {len(weights)} weights")
    w = np.asarray(weights, dtype=np.float64)
    if np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"weights must be non-negative with a positive sum, got {list(weights)}")
    w = w / w.sum()
    out = {}
    for key, first in models[0].items():
        if not _is_float(first):
            out[key] = np.array(first, copy=True)
            continue
        acc = np.zeros(np.shape(first), dtype=np.float64)
        for wk, model in zip(w, models):
            acc += wk * np.asarray(model[key], dtype=np.float64)
        out[key] = acc.astype(np.asarray(first).dtype)
    return out

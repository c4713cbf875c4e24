"""The weighted mean of models that both topologies use (pure NumPy, no FLARE).

Floating entries of a model (``dict[str, np.ndarray]``) are averaged; integer entries (counters such as BatchNorm's
``num_batches_tracked``) keep the receiving site's own value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lightyear.algorithms.vectors import is_float_entry

Weights = Mapping[str, np.ndarray]


def normalised(weights) -> np.ndarray:
    """``weights / sum(weights)`` as float64 for finite non-negative weights with a positive sum (else ValueError);
    a sum that overflows is avoided by dividing by the largest weight first."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or not np.isfinite(w).all() or np.any(w < 0) or not w.any():
        raise ValueError(f"weights must be finite and non-negative with a positive sum, got {list(np.ravel(w))[:8]}")
    with np.errstate(over="ignore"):
        total = w.sum()
    if not np.isfinite(total):
        w = w / w.max()
        total = w.sum()
    return w / total


def weighted_average(models: Sequence[Weights], weights: Sequence[float] | None = None) -> dict[str, np.ndarray]:
    """sum_k w_k theta_k / sum_k w_k (FedAvg; McMahan et al. 2017, weights = sample counts); integer entries from the
    first model."""
    if not models:
        raise ValueError("weighted_average needs at least one model")
    if weights is None:
        weights = [1.0] * len(models)
    if len(weights) != len(models):
        raise ValueError(f"{len(models)} models but {len(weights)} weights")
    w = normalised(weights)
    out = {}
    for key, first in models[0].items():
        if not is_float_entry(first):
            out[key] = np.array(first, copy=True)
            continue
        acc = np.zeros(np.shape(first), dtype=np.float64)
        for wk, model in zip(w, models):
            acc += wk * np.asarray(model[key], dtype=np.float64)
        if not np.isfinite(acc).all():
            raise ValueError(
                f"the weighted average of {key!r} is not finite: a model holds NaN or Inf there "
                "(reject such models before aggregating: lightyear.algorithms.model_check.model_problems)"
            )
        out[key] = acc.astype(np.asarray(first).dtype)
    return out

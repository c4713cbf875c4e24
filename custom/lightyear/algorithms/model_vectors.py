"""A model's floating entries as one vector, for rules that measure whole-model distances.

Pure NumPy, no FLARE. A model is a ``dict[str, np.ndarray]``. Distances, norms and clipping in the
peer-to-peer rules (BALANCE, self-centred clipping) are taken over all floating entries together,
in the own model's key order, in float64. Integer entries (BatchNorm counters) are not parameters:
they take no part in a distance and the result keeps the own model's value.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from lightyear.algorithms.model_check import model_problems

Weights = Mapping[str, np.ndarray]


def float_keys(model: Weights) -> list[str]:
    """The keys of ``model`` whose arrays are floating point, in the model's own order."""
    return [k for k, v in model.items() if np.issubdtype(np.asarray(v).dtype, np.floating)]


def to_vector(model: Weights, keys: list[str]) -> np.ndarray:
    """The entries ``keys`` of ``model`` flattened and concatenated as one float64 vector."""
    if not keys:
        return np.zeros(0, dtype=np.float64)
    return np.concatenate([np.asarray(model[k], dtype=np.float64).ravel() for k in keys])


def from_vector(vector: np.ndarray, like: Weights, keys: list[str]) -> dict[str, np.ndarray]:
    """A model shaped like ``like``: entries ``keys`` read from ``vector`` (cast to ``like``'s
    dtypes), every other entry a copy of ``like``'s."""
    out = {k: np.array(v, copy=True) for k, v in like.items()}
    start = 0
    for key in keys:
        ref = np.asarray(like[key])
        stop = start + ref.size
        out[key] = vector[start:stop].reshape(ref.shape).astype(ref.dtype)
        start = stop
    if start != vector.size:
        raise ValueError(f"vector has {vector.size} values but the model's floating entries hold {start}")
    return out


def check_models(own: Weights, received: Mapping[str, Weights]) -> None:
    """Raise a ValueError if the own model or any received one is malformed or not finite.

    Received models must have the own model's keys and shapes; every floating value must be
    finite (NaN or Inf models are rejected, never zeroed). The message names each bad peer.
    """
    problems = [f"own model: {p}" for p in model_problems(own, own)]
    for peer, model in received.items():
        problems += [f"model of {peer!r}: {p}" for p in model_problems(model, own)]
    if problems:
        raise ValueError(
            "cannot aggregate: " + "; ".join(problems) + ". Reject such models before aggregating "
            "(lightyear.algorithms.model_check.model_problems)"
        )

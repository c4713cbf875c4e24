"""Models as flat vectors, and the vector geometry the robust rules share (pure NumPy).

A model is a ``dict[str, np.ndarray]``. Its *floating* entries are the parameters a rule
compares and combines; its integer entries (BatchNorm's ``num_batches_tracked``) are counters
that a rule never looks at and copies from a reference model.

Conventions used by every rule built on this module:

* :func:`flatten` concatenates the floating entries in **sorted key order** as ``float64``, so
  two models with the same keys always give vectors whose coordinates line up.
* Non-finite values (NaN, +-inf) are refused with a ValueError: callers reject such models
  before they reach a rule (see ``lightyear.algorithms.model_check``).
* **Zero vectors have no direction.** The cosine similarity of a zero-norm vector with any
  vector, itself included, is defined as 0 (neither aligned nor opposed), never NaN. Norms
  below :data:`ZERO_NORM` count as zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

Weights = Mapping[str, np.ndarray]

ZERO_NORM = 1e-12
"""Norms at or below this are treated as zero (no direction) by the cosine helpers."""


def is_float_entry(array) -> bool:
    """True for floating-point arrays (parameters), False for integer/bool ones (counters)."""
    return np.issubdtype(np.asarray(array).dtype, np.floating)


def float_keys(model: Weights, keys: Sequence[str] | None = None) -> list[str]:
    """The sorted keys of ``model``'s floating entries, or the sorted ``keys`` after checking them.

    Raises ValueError if a requested key is missing or names an integer entry.
    """
    if keys is None:
        return sorted(k for k, v in model.items() if is_float_entry(v))
    out = sorted(set(keys))
    for key in out:
        if key not in model:
            raise ValueError(f"key {key!r} is not in the model (it has {sorted(model)})")
        if not is_float_entry(model[key]):
            raise ValueError(f"key {key!r} is an integer entry (a counter); only floating entries can be flattened")
    return out


def check_finite(name: str, array) -> np.ndarray:
    """Return ``array`` as float64, raising ValueError naming ``name`` if any value is NaN or inf."""
    out = np.asarray(array, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{name} contains NaN or inf values; reject such models before aggregation")
    return out


def flatten(model: Weights, keys: Sequence[str] | None = None) -> np.ndarray:
    """Concatenate the floating entries of ``model`` (sorted key order) into one float64 vector.

    ``keys`` restricts the vector to those (floating) entries, still in sorted order.
    Integer entries are skipped. Raises ValueError on non-finite values or an empty selection.
    """
    names = float_keys(model, keys)
    if not names:
        raise ValueError("the model has no floating entries to flatten")
    parts = [check_finite(f"model entry {k!r}", model[k]).ravel() for k in names]
    return np.concatenate(parts)


def unflatten(vector, template: Weights, keys: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """The inverse of :func:`flatten`: a model shaped like ``template`` with values from ``vector``.

    The floating entries named by ``keys`` (default: all of them, sorted) are read from
    ``vector`` in sorted key order and cast back to each template entry's dtype. Every other
    entry (integer counters, and floating entries outside ``keys``) is copied from ``template``.
    Raises ValueError if the vector's length does not match.
    """
    vec = check_finite("vector", vector).ravel()
    names = float_keys(template, keys)
    sizes = [int(np.asarray(template[k]).size) for k in names]
    if vec.size != sum(sizes):
        raise ValueError(f"vector has {vec.size} values but the template's floating entries {names} hold {sum(sizes)}")
    out = {k: np.array(v, copy=True) for k, v in template.items()}
    start = 0
    for key, size in zip(names, sizes):
        ref = np.asarray(template[key])
        out[key] = vec[start : start + size].reshape(ref.shape).astype(ref.dtype)
        start += size
    return out


def stack(vectors: Mapping[str, np.ndarray] | Sequence[np.ndarray], name: str = "vectors") -> np.ndarray:
    """Stack vectors into an ``(n, d)`` float64 array, checking they are non-empty, 1-D-able,
    of equal length and finite. A mapping is stacked in sorted key order."""
    items = [vectors[k] for k in sorted(vectors)] if isinstance(vectors, Mapping) else list(vectors)
    if not items:
        raise ValueError(f"{name} is empty; at least one vector is needed")
    rows = [np.asarray(v, dtype=np.float64).ravel() for v in items]
    lengths = {r.size for r in rows}
    if len(lengths) != 1:
        raise ValueError(f"{name} have different lengths {sorted(lengths)}; flatten models with the same keys")
    if rows[0].size == 0:
        raise ValueError(f"{name} are empty vectors")
    return check_finite(name, np.stack(rows))


def as_matrix(vectors) -> np.ndarray:
    """An ``(n, d)`` array as is (after the checks of :func:`stack`), anything else through :func:`stack`."""
    if isinstance(vectors, np.ndarray) and vectors.ndim == 2:
        return stack(list(vectors))
    return stack(vectors)


def cosine_similarity(a, b) -> float:
    """<a, b> / (||a|| ||b||), in [-1, 1]; 0 if either vector has zero norm (see the module docstring)."""
    u = check_finite("a", a).ravel()
    v = check_finite("b", b).ravel()
    if u.size != v.size:
        raise ValueError(f"vectors of different lengths {u.size} and {v.size}")
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    if nu <= ZERO_NORM or nv <= ZERO_NORM:
        return 0.0
    return float(np.clip(np.dot(u, v) / (nu * nv), -1.0, 1.0))


def cosine_similarity_matrix(vectors) -> np.ndarray:
    """The ``(n, n)`` matrix of pairwise cosine similarities, clipped to [-1, 1].

    ``vectors`` is an ``(n, d)`` array, a sequence of vectors, or a mapping (sorted key order).
    Rows and columns of zero-norm vectors are 0, their diagonal entry included; every other
    diagonal entry is exactly 1.
    """
    x = as_matrix(vectors)
    norms = np.linalg.norm(x, axis=1)
    live = norms > ZERO_NORM
    unit = np.zeros_like(x)
    unit[live] = x[live] / norms[live, None]
    sim = np.clip(unit @ unit.T, -1.0, 1.0)
    idx = np.flatnonzero(live)
    sim[idx, idx] = 1.0
    return sim


def squared_distance_matrix(vectors) -> np.ndarray:
    """The ``(n, n)`` matrix of squared Euclidean distances ||x_i - x_j||^2 (diagonal 0).

    Computed pair by pair from differences (not from the Gram matrix), so it is never negative,
    exact for small cases, and needs memory for one extra vector only.
    """
    x = as_matrix(vectors)
    n = x.shape[0]
    out = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(i + 1, n):
            diff = x[i] - x[j]
            out[i, j] = out[j, i] = float(np.dot(diff, diff))
    return out

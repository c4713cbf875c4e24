"""Models as flat vectors, and the vector geometry the robust rules share (pure NumPy).

A model is a ``dict[str, np.ndarray]``: its floating entries are parameters, its integer entries (BatchNorm's
counters) are copied from a reference model. :func:`flatten` concatenates the floating entries in sorted key order
as float64; non-finite values raise ValueError (callers reject such models first:
``lightyear.algorithms.model_check``). A zero vector has no direction: its cosine with anything is 0, never NaN.
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
    """The sorted keys of ``model``'s floating entries, or the sorted ``keys`` (ValueError if one is missing or an
    integer entry)."""
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
    """The floating entries of ``model`` (or those of ``keys``) in sorted key order as one float64 vector; ValueError
    on non-finite values or an empty selection."""
    names = float_keys(model, keys)
    if not names:
        raise ValueError("the model has no floating entries to flatten")
    parts = [check_finite(f"model entry {k!r}", model[k]).ravel() for k in names]
    return np.concatenate(parts)


def unflatten(vector, template: Weights, keys: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """The inverse of :func:`flatten`: ``template`` with the entries of ``keys`` read from ``vector`` in their
    dtypes, every other entry copied; ValueError if the vector's length does not match."""
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
    """Vectors (a mapping: in sorted key order) as an ``(n, d)`` float64 array, checked non-empty, of equal length
    and finite."""
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
    """An ``(n, d)`` array, a sequence of vectors or a mapping as a checked ``(n, d)`` array (:func:`stack`)."""
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
    """The ``(n, n)`` pairwise cosine similarities in [-1, 1]: 0 in a zero vector's row and column, else 1 on the
    diagonal."""
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
    """The ``(n, n)`` squared distances ||x_i - x_j||^2, pair by pair from differences (never negative, unlike a
    Gram-matrix form)."""
    x = as_matrix(vectors)
    n = x.shape[0]
    out = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(i + 1, n):
            diff = x[i] - x[j]
            out[i, j] = out[j, i] = float(np.dot(diff, diff))
    return out

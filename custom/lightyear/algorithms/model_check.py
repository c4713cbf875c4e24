"""Checks that a received model can be aggregated with the own one (pure NumPy, no FLARE)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np


def model_problems(received: Any, reference: Mapping[str, np.ndarray]) -> list[str]:
    """Return every reason why ``received`` must not be aggregated with ``reference``; [] if none.

    A received model must be a mapping with exactly the reference's keys, each a numeric array of
    the reference's shape, with only finite values.
    """
    if not isinstance(received, Mapping):
        return [f"expected a mapping of parameter name to array, got {type(received).__name__}"]
    problems = []
    missing = sorted(set(reference) - set(received))
    extra = sorted(set(received) - set(reference))
    if missing:
        problems.append(f"missing keys {_preview(missing)}")
    if extra:
        problems.append(f"unexpected keys {_preview(extra)}")
    for key in reference:
        if key not in received:
            continue
        value = received[key]
        try:
            arr = np.asarray(value)
        except Exception as exc:  # noqa: BLE001 - anything unconvertible is malformed
            problems.append(f"{key}: not an array ({exc})")
            continue
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            problems.append(f"{key}: non-numeric dtype {arr.dtype}")
            continue
        if arr.shape != np.shape(reference[key]):
            problems.append(f"{key}: shape {arr.shape} != expected {np.shape(reference[key])}")
            continue
        if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
            bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
            problems.append(f"{key}: {bad} non-finite values (NaN or Inf)")
    return problems


def _preview(keys: list[str], n: int = 5) -> str:
    shown = ", ".join(keys[:n])
    return f"[{shown}{', ...' if len(keys) > n else ''}] ({len(keys)})"

"""Checks that a received model can be aggregated with the own one (pure NumPy, no FLARE).

A received model is treated as written by a broken or hostile site; :func:`model_problems` names every problem and
never raises, so a bad message only gets its sender rejected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from lightyear.checks import positive_number

DEFAULT_MAX_ABS = 1e6
"""Bound on |value| of a received floating entry: far above trained weights; beyond it a value dominates a mean."""


def check_max_abs(max_abs) -> float | None:
    """``max_abs`` must be a positive finite number, or None for no bound."""
    if max_abs is None:
        return None
    return positive_number("max_abs_weight", max_abs, note="or null: no bound")


def model_problems(
    received: Any, reference: Mapping[str, np.ndarray], max_abs: float | None = DEFAULT_MAX_ABS
) -> list[str]:
    """Every reason why ``received`` must not be aggregated with ``reference``; [] if none. It must be a mapping with
    exactly the reference's string keys, each a numeric array of the reference's shape whose values, cast to the
    reference's dtype, are finite and at most ``max_abs`` in magnitude."""
    try:
        return _problems(received, reference, max_abs)
    except Exception as exc:  # noqa: BLE001 - whatever a hostile payload triggers is its sender's problem
        return [f"malformed model ({type(exc).__name__}: {exc})"]


def _problems(received: Any, reference: Mapping[str, np.ndarray], max_abs: float | None) -> list[str]:
    if not isinstance(received, Mapping):
        return [f"expected a mapping of parameter name to array, got {type(received).__name__}"]
    bad_keys = [k for k in received if not isinstance(k, str)]
    if bad_keys:
        return [
            f"parameter names must be strings, got {len(bad_keys)} "
            f"of type {sorted({type(k).__name__ for k in bad_keys})}"
        ]
    problems = []
    missing = sorted(set(reference) - set(received))
    extra = sorted(set(received) - set(reference))
    if missing:
        problems.append(f"missing keys {_preview(missing)}")
    if extra:
        problems.append(f"unexpected keys {_preview(extra)}")
    for key in reference:
        if key in received:
            problem = _entry_problem(key, received[key], np.asarray(reference[key]), max_abs)
            if problem:
                problems.append(problem)
    return problems


def _entry_problem(key: str, value: Any, ref: np.ndarray, max_abs: float | None) -> str | None:
    if not isinstance(value, (np.ndarray, np.generic, int, float)) or isinstance(value, bool):
        return f"{key}: expected an array, got {type(value).__name__}"
    arr = np.asarray(value)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        return f"{key}: non-numeric dtype {arr.dtype}"
    if np.issubdtype(arr.dtype, np.complexfloating):
        return f"{key}: complex dtype {arr.dtype}"
    if arr.shape != ref.shape:
        return f"{key}: shape {arr.shape} != expected {ref.shape}"
    if not np.issubdtype(ref.dtype, np.floating):
        return None  # integer counters keep the receiver's own value
    with np.errstate(over="ignore", invalid="ignore"):
        cast = arr.astype(ref.dtype, copy=False)
    if not cast.size:
        return None
    # the extremes, two reductions without a temporary array: a NaN anywhere makes them NaN, an Inf is one of them
    low, high = float(cast.min()), float(cast.max())
    if not (math.isfinite(low) and math.isfinite(high)):
        bad = int(cast.size - np.count_nonzero(np.isfinite(cast)))
        return f"{key}: {bad} values not finite in {ref.dtype} (NaN, Inf or beyond the dtype's range)"
    largest = max(-low, high)
    if max_abs is not None and largest > max_abs:
        return f"{key}: values up to {largest:.3g} exceed max_abs_weight={max_abs:g}"
    return None


def _preview(keys: list[str], n: int = 5) -> str:
    shown = ", ".join(keys[:n])
    return f"[{shown}{', ...' if len(keys) > n else ''}] ({len(keys)})"


def check_models(
    own: Mapping[str, np.ndarray], received: Mapping[str, Mapping[str, np.ndarray]], max_abs: float | None = None
) -> None:
    """Raise a ValueError naming each bad model if the own model or a received one fails :func:`model_problems`.
    ``max_abs`` None (default) leaves the size bound to the receiver's arrival check with the site's own
    ``max_abs_weight``, so a rule never fails a round on a model the site accepted."""
    problems = [f"own model: {p}" for p in model_problems(own, own, max_abs)]
    for peer, model in received.items():
        problems += [f"model of {peer!r}: {p}" for p in model_problems(model, own, max_abs)]
    if problems:
        raise ValueError(
            "cannot aggregate: " + "; ".join(problems) + ". Reject such models before aggregating "
            "(lightyear.algorithms.model_check.model_problems)"
        )

"""Checks of job settings that raise a ValueError naming the setting (no FLARE import)."""

from __future__ import annotations

import math


def positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def integer(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return value


def finite_number(name: str, value) -> float:
    """A real number that is not infinite or NaN (JSON true/false are not numbers)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


MIN_SECONDS = 1.0


def positive_seconds(name: str, value, minimum: float = MIN_SECONDS) -> float:
    """A timeout of at least ``minimum`` seconds (1 s by default: shorter ones only make healthy
    sites look dead)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
        raise ValueError(f"{name} must be a number of seconds >= {minimum:g}, got {value!r}")
    return float(value)

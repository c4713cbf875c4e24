"""Checks of settings that raise a ValueError naming the setting, the value and what is allowed (no FLARE import).

Each returns the value it accepted (a number as ``float``, an integer as it came): ``self.lr = positive_number("lr",
lr)``. No check takes a JSON ``true``/``false`` (a Python ``bool``) for a number. ``note`` adds a short explanation in
parentheses after what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


def _noted(allowed: str, note: str) -> str:
    return f"{allowed} ({note})" if note else allowed


def is_int(value) -> bool:
    """A whole number (a JSON true/false is none)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_finite_number(value) -> bool:
    """A finite int or float (a JSON true/false is none)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def integer(name: str, value) -> int:
    """A whole number of any sign (not a float, not a bool)."""
    if not is_int(value):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return value


def int_in(name: str, value, low: int, high: int | None = None, note: str = "") -> int:
    """A whole number in ``[low, high]`` (``high`` None: no upper end)."""
    if not is_int(value) or value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be an integer {_noted(allowed, note)}, got {value!r}")
    return value


def positive_int(name: str, value, note: str = "") -> int:
    if not is_int(value) or value < 1:
        raise ValueError(f"{name} must be a positive integer{f' ({note})' if note else ''}, got {value!r}")
    return value


def finite_number(name: str, value) -> float:
    if not is_finite_number(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _interval(low: float, high: float, low_open: bool, high_open: bool) -> str:
    if math.isfinite(low) and math.isfinite(high):
        return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if math.isfinite(low):
        return f"{'>' if low_open else '>='} {low:g}"
    if math.isfinite(high):
        return f"{'<' if high_open else '<='} {high:g}"
    return "(finite)"


def number_in(
    name: str,
    value,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
    note: str = "",
) -> float:
    """A finite number between ``low`` and ``high`` (excluded where ``*_open``; an infinite end is no bound)."""
    finite = is_finite_number(value)
    above = finite and (value > low if low_open else value >= low)
    below = finite and (value < high if high_open else value <= high)
    if not (above and below):
        raise ValueError(
            f"{name} must be a number {_noted(_interval(low, high, low_open, high_open), note)}, got {value!r}"
        )
    return float(value)


def non_negative(name: str, value, note: str = "") -> float:
    """A finite number >= 0."""
    return number_in(name, value, 0.0, note=note)


def positive_number(name: str, value, note: str = "") -> float:
    """A finite number > 0."""
    return number_in(name, value, 0.0, low_open=True, note=note)


def boolean(name: str, value, note: str = "") -> bool:
    """``True`` or ``False`` only (not 0, 1 or a string)."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be {_noted('true or false', note)}, got {value!r}")
    return value


def non_empty_string(name: str, value, note: str = "") -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be {_noted('a non-empty string', note)}, got {value!r}")
    return value


def one_of(name: str, value, choices: Iterable[str]) -> str:
    """A string among ``choices``; the message lists them."""
    allowed = list(choices)
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def string_list(name: str, value, note: str = "") -> list[str]:
    """A list whose items are all strings (it may be empty)."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{name} must be {_noted('a JSON list of strings', note)}, got {value!r:.80}")
    return value


def mapping(name: str, value, note: str = "") -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be {_noted('a JSON object', note)}, got {value!r:.80}")
    return value


@contextmanager
def raising(error: type[ValueError]) -> Iterator[None]:
    """Inside the block, a ValueError comes out as ``error`` (a ValueError subclass), with the same message."""
    try:
        yield
    except ValueError as exc:
        if isinstance(exc, error):
            raise
        raise error(str(exc)) from None


MIN_SECONDS = 1.0


def positive_seconds(name: str, value, minimum: float = MIN_SECONDS) -> float:
    """A timeout of at least ``minimum`` seconds (1 s by default: shorter ones only make healthy sites look dead)."""
    if not is_finite_number(value) or value < minimum:
        raise ValueError(f"{name} must be a number of seconds >= {minimum:g}, got {value!r}")
    return float(value)

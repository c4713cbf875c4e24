"""Keep a long-running site process's memory flat (glibc only; a no-op elsewhere): cap the malloc arenas that keep
the peer models freed each round, and trim after each round. The mmap threshold is left to adapt: fixed low, the
kernel's zeroing of fresh pages costs more CPU than it saves memory (docs/results.md, "The fixed mmap threshold")."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_ARENA_MAX = -8  # glibc's mallopt parameter


def _glibc(call) -> bool:
    """``call(libc)`` as a bool; False off Linux, without glibc or without the function."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return bool(call(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")))
    except (OSError, AttributeError):
        return False


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap the malloc arenas of threads created from now on (FLARE starts one per message); True if glibc took it."""
    return _glibc(lambda libc: libc.mallopt(M_ARENA_MAX, int(arenas)))


def release_free_memory() -> bool:
    """Return freed heap memory to the operating system (glibc's malloc_trim)."""
    return _glibc(lambda libc: libc.malloc_trim(0))

"""Keep a long-running site process's memory flat (glibc only; a no-op elsewhere): cap the malloc arenas that keep
the peer models freed each round, trim after each round, and trim as models arrive (:class:`HeapTrimmer`). The mmap
threshold is left to adapt: fixed low, the kernel's zeroing of fresh pages costs more CPU than it saves memory
(docs/results.md, "The fixed mmap threshold")."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
from collections.abc import Callable

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


TRIM_AFTER_BYTES = 4 << 20
"""Bytes of received payload after which :class:`HeapTrimmer` trims: a trim costs a few milliseconds of CPU, receiving
4 MiB more than that, so small messages sent at any rate cannot make a site spend more on trimming than on receiving."""


class HeapTrimmer:
    """Returns the freed heap to the system once at least ``after_bytes`` of payload arrived since the last trim.

    Decoding a received model passes it through FLARE's chunks, the message's bytes and each entry's bytes before the
    arrays a site keeps; freed, those copies stay resident in the allocator's free lists, and the next model's do not
    fit the holes they leave, so without a trim a site's memory grows by several models a model received.
    Thread-safe: FLARE handles messages on several threads."""

    def __init__(self, after_bytes: int = TRIM_AFTER_BYTES, trim: Callable[[], bool] = release_free_memory):
        self.after_bytes = int(after_bytes)
        self._trim = trim
        self._received = 0
        self._lock = threading.Lock()

    def received(self, nbytes: int) -> bool:
        """Count ``nbytes`` more received; trim if they reach ``after_bytes``. Whether it trimmed."""
        with self._lock:
            self._received += max(0, int(nbytes))
            if self._received < self.after_bytes:
                return False
            self._received = 0
        return bool(self._trim())

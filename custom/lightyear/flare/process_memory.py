"""Keep a long-running site process's memory flat (glibc only; a no-op elsewhere): cap the malloc arenas that keep
the peer models freed each round, and trim the heap as models arrive once it grew (:class:`HeapTrimmer`). The mmap
threshold is left to adapt: fixed low, the kernel's zeroing of fresh pages costs more CPU than it saves memory
(docs/results.md, "The fixed mmap threshold")."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from collections.abc import Callable

M_ARENA_MAX = -8  # glibc's mallopt parameter
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


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


TRIM_GROWTH_BYTES = 64 << 20
"""Growth of a site's private resident memory after which :class:`HeapTrimmer` trims."""


def resident_private_bytes() -> int:
    """This process's resident memory not shared with others (``/proc/self/statm``); 0 where there is none."""
    try:
        with open("/proc/self/statm") as f:
            fields = f.read().split()
        return (int(fields[1]) - int(fields[2])) * PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return 0


class HeapTrimmer:
    """Returns the freed heap to the system when the process's private resident memory has grown by ``growth_bytes``
    since the last trim (or since it was lowest after it).

    Decoding a received model passes it through FLARE's chunks, the message's bytes and each entry's bytes before the
    arrays a site keeps; freed, those copies stay resident in the allocator's free lists, and the next model's do not
    all fit the holes they leave, so without a trim a site's memory grows by more than the models it keeps. Trimming
    after every model would cost the kernel's refilling of the pages the next model reuses; trimming on growth costs a
    read of ``/proc/self/statm`` a message, so messages that add nothing (small ones at any rate) trim nothing.
    Nothing trims at a round's end: what a round freed, the next round's models reuse, and the growth check already
    bounds what arriving models add (the floor, plus ``growth_bytes`` and one message). Thread-safe: FLARE handles
    messages on several threads."""

    def __init__(
        self,
        growth_bytes: int = TRIM_GROWTH_BYTES,
        trim: Callable[[], bool] = release_free_memory,
        resident: Callable[[], int] = resident_private_bytes,
    ):
        self.growth_bytes = int(growth_bytes)
        self._trim = trim
        self._resident = resident
        self._floor: int | None = None
        self._lock = threading.Lock()

    def check(self) -> bool:
        """Trim if resident memory grew by ``growth_bytes`` since its floor; whether it trimmed."""
        with self._lock:
            now = self._resident()
            floor = now if self._floor is None else min(self._floor, now)
            if now - floor < self.growth_bytes:
                self._floor = floor
                return False
            trimmed = bool(self._trim())
            self._floor = self._resident()
            return trimmed

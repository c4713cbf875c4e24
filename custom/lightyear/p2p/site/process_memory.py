"""Keep a long-running site process's memory flat (glibc only; a no-op elsewhere).

Each round a site receives several peer models; glibc keeps freed blocks in per-thread arenas
and rarely returns them, so the process grows round after round. Limiting the number of arenas
and trimming after each round gives the memory back to the operating system.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_ARENA_MAX = -8  # glibc's mallopt parameters
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 * 1024


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Serve large blocks (model arrays) by mmap, so freeing them returns them to the system, and
    cap the malloc arenas of threads created from now on. True if glibc took both settings.

    A fixed mmap threshold also stops glibc from raising it after the first large free (its
    default), which would move every later model array onto the fragmenting heap.
    """
    libc = _libc()
    try:
        return bool(libc and libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and libc.mallopt(M_ARENA_MAX, int(arenas)))
    except AttributeError:
        return False


def release_free_memory() -> bool:
    """Return freed heap memory to the operating system (glibc's malloc_trim)."""
    libc = _libc()
    try:
        return bool(libc and libc.malloc_trim(0))
    except AttributeError:
        return False

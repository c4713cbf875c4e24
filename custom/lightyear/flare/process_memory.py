"""Keep a long-running site process's memory flat (glibc only; a no-op elsewhere).

Each round a site receives several peer models; glibc keeps freed blocks in per-thread arenas
and rarely returns them, so the process grows round after round. Limiting the number of arenas
and trimming after each round gives the memory back to the operating system.

glibc's mmap threshold is left to adapt. Fixing it low serves every training activation and
gradient by its own mmap/munmap, and the kernel's zeroing of fresh pages then costs far more CPU
than the memory it saves (docs/results.md, "The fixed mmap threshold").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_ARENA_MAX = -8  # glibc's mallopt parameter


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap the malloc arenas of threads created from now on (FLARE starts a thread per message);
    True if glibc took the setting."""
    libc = _libc()
    try:
        return bool(libc and libc.mallopt(M_ARENA_MAX, int(arenas)))
    except AttributeError:
        return False


def release_free_memory() -> bool:
    """Return freed heap memory to the operating system (glibc's malloc_trim)."""
    libc = _libc()
    try:
        return bool(libc and libc.malloc_trim(0))
    except AttributeError:
        return False

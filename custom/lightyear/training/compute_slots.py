"""Limit how many site processes on one machine compute at the same time (no FLARE import).

FLARE's simulator runs every site as its own process. With more sites than CPU cores, all of
them training at once thrash the caches and the scheduler: 8 digits sites on 2 cores took twice
as long as the same work done two at a time. Sites that share a machine take one of ``slots``
file locks around their compute-heavy steps (training, scoring, evaluation), never while they
wait for peers, so the run cannot deadlock; a lock is freed when its process dies. On a machine
of its own a site always finds a free slot.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time

AUTO = "auto"


def resolve_slots(slots) -> int:
    """``auto`` = the machine's CPU count; 0 = no limit; else a positive integer."""
    if slots == AUTO:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 0:
        raise ValueError(f"compute_slots must be 'auto', 0 (no limit) or a positive integer, got {slots!r}")
    return slots


class ComputeSlots:
    def __init__(self, slots=AUTO, group: str = "default", folder: str | None = None):
        self.slots = resolve_slots(slots)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in group)
        self.folder = folder or os.path.join(tempfile.gettempdir(), f"lightyear-compute-slots-{safe}")
        self.waited_s = 0.0
        if self.slots:
            os.makedirs(self.folder, exist_ok=True)

    @contextlib.contextmanager
    def hold(self):
        """Hold one slot for the duration of the block; adds the time spent queueing to ``waited_s``."""
        if not self.slots:
            yield
            return
        start = time.perf_counter()
        handle = self._acquire()
        self.waited_s += time.perf_counter() - start
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()

    def _acquire(self):
        while True:
            for k in range(self.slots):
                handle = open(os.path.join(self.folder, f"slot-{k}.lock"), "w")
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return handle
                except BlockingIOError:
                    handle.close()
            time.sleep(0.005)

"""Limit how many site processes on one machine compute at the same time (no FLARE import), as more simulated sites
than cores thrash caches and scheduler (docs/results.md, "The compute-slot queue"). Sites take one of ``slots`` file
locks around compute-heavy steps, never while waiting for peers, so a run cannot deadlock; a dead process frees its
lock. Only the holder of a queue lock tries the slots, which costs the other waiters less CPU."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
import time

from lightyear.checks import int_in

AUTO = "auto"
DEFAULT_WAIT_TIMEOUT = 600.0
HEAD_POLL = 0.005  # seconds between the queue head's tries for a slot
QUEUE_POLL = 0.02  # seconds between the other waiters' tries for the queue lock (below the shortest slot hold)
QUEUE_LOCK = "queue.lock"


class SlotWaitAborted(RuntimeError):
    """Raised by :meth:`ComputeSlots.hold` when its ``abort`` callable turns True while queueing."""


def resolve_slots(slots) -> int:
    """``auto`` = the machine's CPU count; 0 = no limit; else a positive integer."""
    if slots == AUTO:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    return int_in("compute_slots", slots, 0, note="0: no limit; or 'auto': one per core")


def private_folder(path: str) -> str:
    """Create ``path`` (mode 0700) or check it is a real folder, ours, closed to others (no planted lock files)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise RuntimeError(f"{path} is not a folder (a symbolic link or a file): remove it, or give compute_slots 0")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise RuntimeError(f"{path} belongs to another user: remove it, or give compute_slots 0")
    if info.st_mode & 0o077:
        raise RuntimeError(f"{path} is open to other users (mode {oct(info.st_mode & 0o777)}): chmod 700 it")
    return path


def default_folder(group: str) -> str:
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    base = private_folder(os.path.join(tempfile.gettempdir(), f"lightyear-{uid}"))
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in group)
    return os.path.join(base, f"compute-slots-{safe}")


class ComputeSlots:
    def __init__(
        self, slots=AUTO, group: str = "default", folder: str | None = None, wait_timeout: float = DEFAULT_WAIT_TIMEOUT
    ):
        """``wait_timeout``: seconds :meth:`hold` queues before computing without a slot (a hung holder only slows)."""
        self.slots = resolve_slots(slots)
        self.waited_s = 0.0
        self.wait_timeout = float(wait_timeout)
        self.folder = private_folder(folder or default_folder(group)) if self.slots else folder

    @contextlib.contextmanager
    def hold(self, abort=None):
        """Hold a slot for the block (none after ``wait_timeout`` s), adding the wait to ``waited_s``; raise
        :class:`SlotWaitAborted` if ``abort()`` turns True while queueing."""
        if not self.slots:
            yield
            return
        start = time.perf_counter()
        fd = self._acquire(abort)
        self.waited_s += time.perf_counter() - start
        try:
            yield
        finally:
            if fd is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)

    def _acquire(self, abort):
        """A locked slot file's descriptor, or None after ``wait_timeout``; queues behind the queue lock."""
        deadline = time.monotonic() + self.wait_timeout
        queue = None
        try:
            while True:
                if queue is None:
                    queue = self._try_lock(QUEUE_LOCK)
                if queue is not None:
                    for k in range(self.slots):
                        fd = self._try_lock(f"slot-{k}.lock")
                        if fd is not None:
                            return fd
                if abort is not None and abort():
                    raise SlotWaitAborted("stopped while waiting for a compute slot")
                if time.monotonic() > deadline:
                    return None
                time.sleep(HEAD_POLL if queue is not None else QUEUE_POLL)
        finally:
            if queue is not None:
                fcntl.flock(queue, fcntl.LOCK_UN)
                os.close(queue)

    def _try_lock(self, name: str):
        """The descriptor of ``name`` in the folder, locked exclusively, or None when another holds it."""
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(os.path.join(self.folder, name), flags, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            os.close(fd)
            return None

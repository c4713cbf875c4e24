"""Limit how many site processes on one machine compute at the same time (no FLARE import).

FLARE's simulator runs every site as its own process. With more sites than CPU cores, all of
them training at once thrash the caches and the scheduler (measured in docs/results.md, "The
compute-slot queue"). Sites that share a machine take one of ``slots`` file locks around their
compute-heavy steps (training, scoring, evaluation), never while they wait for peers, so the run
cannot deadlock; a lock is freed when its process dies. On a machine of its own a site always
finds a free slot.

Waiting sites queue: one of them at a time, the holder of a queue lock, tries the slots every
:data:`HEAD_POLL` seconds; the others only try for the queue lock, every :data:`QUEUE_POLL`
seconds, which costs a waiting site less CPU than every site trying every slot (an open, a lock
and a close per slot; docs/results.md, "The compute-slot queue").
"""

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
HEAD_POLL = 0.005
"""Seconds between the queue head's tries for a slot."""
QUEUE_POLL = 0.02
"""Seconds between the other waiters' tries for the queue lock (a slot taken just before is rarely
freed again within it: a peer-to-peer round's shortest hold, aggregation with evaluation, takes longer)."""
QUEUE_LOCK = "queue.lock"


class SlotWaitAborted(RuntimeError):
    """Raised by :meth:`ComputeSlots.hold` when its ``abort`` callable turns True while queueing."""


def resolve_slots(slots) -> int:
    """``auto`` = the machine's CPU count; 0 = no limit; else a positive integer."""
    if slots == AUTO:
        return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))
    return int_in("compute_slots", slots, 0, note="0: no limit; or 'auto': one per core")


def private_folder(path: str) -> str:
    """Create ``path`` (mode 0700) or check an existing one: a real folder, ours, closed to others.

    Lock files in a shared temporary folder could be pre-created or replaced by symbolic links by
    another user; a folder only this user can enter rules that out.
    """
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
        """``wait_timeout``: seconds :meth:`hold` queues for a slot before computing without one
        (a site whose slot holder hangs is slowed, never stopped)."""
        self.slots = resolve_slots(slots)
        self.waited_s = 0.0
        self.wait_timeout = float(wait_timeout)
        self.folder = folder
        if self.slots:
            self.folder = private_folder(folder) if folder else private_folder(default_folder(group))

    @contextlib.contextmanager
    def hold(self, abort=None):
        """Hold one slot for the duration of the block; adds the time spent queueing to ``waited_s``.

        ``abort`` is an optional callable: when it turns True while queueing,
        :class:`SlotWaitAborted` is raised. After ``wait_timeout`` s without a free slot the block
        runs without one.
        """
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

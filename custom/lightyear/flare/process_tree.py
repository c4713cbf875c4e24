"""The processes one command started, and those they started: found by kinship only, never by command line, and stopped.

A :class:`Family` holds this user's processes descending from the command (``own_descendants``) or from a process it
started in a session of its own (:meth:`Family.add_leader`), in a group or session one of those or a member leads (FLARE
2.9 uses ``os.setsid``; not the command's own group), or members when last seen (same pid and start time)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import time
from collections import defaultdict

import psutil

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def _prctl(option: int, arg) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(option, arg, 0, 0, 0)


def is_subreaper() -> bool | None:
    """Whether orphans below this process come to it (None where the system cannot say: not Linux)."""
    flag = ctypes.c_int(0)
    try:
        if _prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return bool(flag.value)


def set_subreaper(on: bool) -> bool:
    """Make this process receive (or stop receiving) the orphans below it; whether that worked."""
    try:
        return _prctl(PR_SET_CHILD_SUBREAPER, ctypes.c_ulong(1 if on else 0)) == 0
    except (OSError, AttributeError):
        return False


@contextlib.contextmanager
def adopting_orphans():
    """Orphans below this process are re-parented to it within this block (Linux); yields whether that is in effect."""
    before = is_subreaper()
    changed = before is False and set_subreaper(True)
    try:
        yield bool(before) or changed
    finally:
        if changed:
            set_subreaper(False)


def _ids(pid: int) -> tuple[int | None, int | None]:
    try:
        return os.getpgid(pid), os.getsid(pid)
    except OSError:
        return None, None


class Family:
    """The processes of one command (see the module docstring); :meth:`members` finds them now."""

    def __init__(self, own_descendants: bool = True):
        self.me = os.getpid()
        self.uid = os.getuid()
        self.own_descendants = own_descendants
        self.leaders: set[int] = set()  # processes started in a session of their own: their group and session ids
        self.seen: dict[int, float] = {}  # pid -> start time of every member found so far

    def add_leader(self, pid: int) -> None:
        """A process this command started in a new session: its group and session are the family's."""
        self.leaders.add(pid)

    def _table(self) -> dict[int, psutil.Process]:
        table = {}
        for proc in psutil.process_iter(["pid", "ppid", "uids", "create_time", "status"]):
            info = proc.info
            uids = info.get("uids")
            theirs = uids is None or uids.real != self.uid
            if info["pid"] == self.me or theirs or info.get("status") == psutil.STATUS_ZOMBIE:
                continue
            table[info["pid"]] = proc
        return table

    def members(self) -> list[psutil.Process]:
        """Every live member of this family now (remembered for the next look)."""
        table = self._table()
        children: dict[int, list[int]] = defaultdict(list)
        for pid, proc in table.items():
            children[proc.info["ppid"]].append(pid)
        led: dict[int, list[int]] = defaultdict(list)  # group or session id -> its processes
        for pid in table:
            for head in set(_ids(pid)) - {None}:
                led[head].append(pid)
        found = {pid for pid, proc in table.items() if self.seen.get(pid) == proc.info["create_time"]}
        found |= {pid for head in self.leaders for pid in led.get(head, ())}
        frontier = [*found, *self.leaders] + ([self.me] if self.own_descendants else [])
        while frontier:
            pid = frontier.pop()
            kin = children.get(pid, ()) if pid == self.me else (*children.get(pid, ()), *led.get(pid, ()))
            for other in kin:  # not this process's own group: a shell's pipeline may share it
                if other not in found:
                    found.add(other)
                    frontier.append(other)
        found.discard(self.me)
        self.seen.update({pid: table[pid].info["create_time"] for pid in found})
        return [table[pid] for pid in sorted(found)]

    def alive(self) -> list[int]:
        return [p.pid for p in self.members()]


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def stop_tree(family: Family | None = None, grace: float = 10.0) -> list[int]:
    """End ``family`` (default: this process's descendants): SIGTERM, ``grace`` s, SIGKILL; returns pids still alive."""
    family = family or Family()
    procs = family.members()
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace)
    alive += [p for p in family.members() if p.pid not in {a.pid for a in alive}]  # started meanwhile, or orphaned
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)
    time.sleep(0.1)
    return sorted(p.pid for p in family.members() if _running(p))

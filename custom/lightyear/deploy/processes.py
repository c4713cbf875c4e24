"""The FLARE processes one command starts, found again and stopped, also on Ctrl-C or failure.

Each command is started in a new session, so its process group holds it and everything it starts
that stays in the group (``startup/sub_start.sh`` and the server or client parent it runs). FLARE
2.9 starts every job process in a session of its own (``nvflare/utils/process_utils.py``,
``spawn_process`` with ``setsid``), outside that group; such a process is found by a *marker*, a
path unique to this deployment (its workspace) that appears on its command line (FLARE passes the
participant's workspace with ``-m``). :meth:`ProcessSet.stop` ends both: SIGTERM, a grace period,
then SIGKILL, and returns what is still alive (nothing, unless a process cannot be killed).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

from lightyear.cli import terminate_as_interrupt

__all__ = ["ProcessSet", "pids_with_marker", "terminate_as_interrupt"]


def pids_with_marker(marker: str) -> list[int]:
    """Processes of this user whose command line contains ``marker`` (read from /proc)."""
    found, me, uid = [], os.getpid(), os.getuid()
    needle = marker.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if needle in cmdline and not _zombie(int(entry)):
            found.append(int(entry))
    return sorted(found)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _all_pids() -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit()]


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


class ProcessSet:
    """Commands started in their own process groups, plus the processes carrying ``marker``."""

    def __init__(self, marker: str):
        if not marker or len(marker) < 8:
            raise ValueError(f"marker {marker!r} is too short to identify this deployment's processes")
        self.marker = marker
        self.groups: list[int] = []
        self.children: list[subprocess.Popen] = []

    def start(self, argv: list[str], env: dict, log_path: str, cwd: str | None = None) -> subprocess.Popen:
        """Start ``argv`` in a new session (stdin closed, output appended to ``log_path``)."""
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.groups.append(proc.pid)  # the session leader's pid is the group id
        self.children.append(proc)
        return proc

    def alive(self) -> list[int]:
        """Pids still running that belong to this set (its groups' members and marked processes)."""
        for child in self.children:
            child.poll()  # reap finished children so that they do not linger as zombies
        pids = set(pids_with_marker(self.marker))
        groups = set(self.groups)
        pids |= {pid for pid in _all_pids() if _pgid(pid) in groups and not _zombie(pid)}
        pids.discard(os.getpid())
        return sorted(pids)

    def _signal(self, sig: int) -> None:
        for pgid in self.groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
        for pid in pids_with_marker(self.marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def stop(self, grace: float = 10.0) -> list[int]:
        """End every process of this set: SIGTERM, up to ``grace`` s, then SIGKILL; returns survivors."""
        if not self.alive():
            return []
        self._signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        for _ in range(3):
            if not self.alive():
                break
            self._signal(signal.SIGKILL)
            time.sleep(0.5)
        return self.alive()

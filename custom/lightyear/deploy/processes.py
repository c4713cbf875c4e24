"""The FLARE processes one command starts, found again and stopped, also on Ctrl-C or failure.

Each command is started in a new session, so its process group holds it and everything it starts
that stays in the group (``startup/sub_start.sh`` and the server or client parent it runs). FLARE
2.9 starts every job process in a session of its own (``nvflare/utils/process_utils.py``,
``spawn_process`` with ``setsid``), outside that group, as a child of a process of the group; it is
found by that kinship (:class:`lightyear.flare.process_tree.Family`), also once its parent is gone,
and never by what its command line names. :meth:`ProcessSet.stop` ends them all: SIGTERM, a grace
period, then SIGKILL, and returns what is still alive (nothing, unless a process cannot be killed).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

from lightyear.cli import terminate_as_interrupt
from lightyear.flare.process_tree import Family

__all__ = ["ProcessSet", "terminate_as_interrupt"]


class ProcessSet:
    """Commands started in their own process groups, and every process they start (by kinship).

    With ``own_descendants`` every descendant of this process counts too: for a command whose
    children are all its own (use it with :func:`lightyear.flare.process_tree.adopting_orphans`,
    so that orphans stay descendants)."""

    def __init__(self, own_descendants: bool = False):
        self.family = Family(own_descendants=own_descendants)
        self.groups: list[int] = []
        self.children: list[subprocess.Popen] = []

    def start(self, argv: list[str], env: dict, log_path: str, cwd: str | None = None) -> subprocess.Popen:
        """Start ``argv`` in a new session (stdin closed, output appended to ``log_path``)."""
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.groups.append(proc.pid)  # the session leader's pid is the group id
        self.family.add_leader(proc.pid)
        self.children.append(proc)
        return proc

    def alive(self) -> list[int]:
        """Pids still running that belong to this set (its groups, what they started, and so on)."""
        for child in self.children:
            child.poll()  # reap finished children so that they do not linger as zombies
        return self.family.alive()

    def _signal(self, sig: int) -> None:
        for pid in self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def stop(self, grace: float = 10.0) -> list[int]:
        """End every process of this set: SIGTERM, up to ``grace`` s, then SIGKILL; returns survivors."""
        if not self.alive():  # also remembers every member while their parents still live
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

"""The FLARE processes one command starts, found again and stopped, also on Ctrl-C or failure: by kinship (also what
FLARE 2.9 starts in sessions of its own, :class:`lightyear.flare.process_tree.Family`), never by command line."""

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
    """Commands started in sessions of their own and what they start; ``own_descendants``: all of this process's too."""

    def __init__(self, own_descendants: bool = False):
        self.family = Family(own_descendants=own_descendants)
        self.children: list[subprocess.Popen] = []

    def start(self, argv: list[str], env: dict, log_path: str, cwd: str | None = None) -> subprocess.Popen:
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

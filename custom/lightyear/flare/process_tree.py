"""End a FLARE simulator run whole: the processes this command started, and those FLARE started
out of its reach.

FLARE 2.9's simulator runs its server in a child process and every site in a worker it starts
in a session of its own (``preexec_fn=os.setsid``, ``nvflare/private/fed/app/simulator/
simulator_runner.py``); it ends them only on Ctrl-C (KeyboardInterrupt in its main process).
A SIGTERM, or a worker orphaned by a crash, leaves them running. :func:`stop_tree` ends every
descendant of this process and every process whose command line holds a *marker*, the run's
absolute workspace (each worker is given it with ``-o`` and ``--simulator_root``): SIGTERM, a
grace period, then SIGKILL.
"""

from __future__ import annotations

import os
import time

import psutil


def _marked(marker: str) -> list[psutil.Process]:
    found, me = [], os.getpid()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if proc.info["pid"] != me and any(marker in part for part in cmdline):
            found.append(proc)
    return found


def members(marker: str | None = None) -> list[psutil.Process]:
    """This process's descendants and (with ``marker``) the processes whose command line holds it."""
    procs = {p.pid: p for p in psutil.Process().children(recursive=True)}
    if marker:
        procs.update({p.pid: p for p in _marked(marker)})
    return [p for p in procs.values() if _running(p)]


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def stop_tree(marker: str | None = None, grace: float = 10.0) -> list[int]:
    """End :func:`members`: SIGTERM, up to ``grace`` seconds, then SIGKILL. Returns the pids still alive."""
    procs = members(marker)
    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(alive, timeout=5)
    time.sleep(0.1)
    return sorted(p.pid for p in members(marker))

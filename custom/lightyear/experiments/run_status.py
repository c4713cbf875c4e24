"""Each run's outcome, kept in ``runs/<run>/status.json`` and gathered in ``sweep_status.json``: ``{"run", "status",
"reason", "wall_s", "started", "ended", "pid"}``. Files are replaced atomically, so SLURM array tasks may write side
by side.
"""

from __future__ import annotations

import json
import os
import time

from lightyear.experiments.runner import RUNS, is_finished, run_dir
from lightyear.records import atomic_write

PENDING, RUNNING, FINISHED, FAILED, INTERRUPTED = "pending", "running", "finished", "failed", "interrupted"
SWEEP_STATUS = "sweep_status.json"


def _write_json(path: str, obj) -> None:
    data = (json.dumps(obj, indent=1) + "\n").encode()
    atomic_write(path, lambda f: f.write(data))


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def write_run_status(folder: str, name: str, status: str, **fields) -> dict:
    record = {"run": name, "status": status, **fields}
    _write_json(os.path.join(folder, "status.json"), record)
    return record


def read_run_status(folder: str) -> dict:
    """The run's record; a run with a summary counts as finished whatever its record says."""
    try:
        with open(os.path.join(folder, "status.json")) as f:
            record = json.load(f)
    except (OSError, ValueError):
        record = {"status": PENDING}
    if is_finished(folder):
        record["status"] = FINISHED
    elif record.get("status") == FINISHED:
        record["status"] = PENDING  # the workspace was removed since
    return record


def gather(out: str, names: list[str]) -> dict:
    """``{run: record}`` for ``names`` and every other run folder under ``out/runs``."""
    folder = os.path.join(out, RUNS)
    others = sorted(n for n in os.listdir(folder) if n not in names) if os.path.isdir(folder) else []
    return {n: {"run": n, **read_run_status(run_dir(out, n))} for n in list(names) + others}


def write_sweep_status(out: str, names: list[str]) -> dict:
    """Write ``sweep_status.json`` (counts and one record per run); return it."""
    runs = gather(out, names)
    counts: dict[str, int] = {}
    for record in runs.values():
        counts[record["status"]] = counts.get(record["status"], 0) + 1
    status = {"updated": now(), "counts": counts, "runs": runs}
    _write_json(os.path.join(out, SWEEP_STATUS), status)
    return status


def known_walls(out: str, names: list[str]) -> list[float]:
    """Wall seconds of the finished runs among ``names`` that recorded them (for time estimates)."""
    walls = []
    for name in names:
        record = read_run_status(run_dir(out, name))
        if record["status"] == FINISHED and isinstance(record.get("wall_s"), (int, float)):
            walls.append(float(record["wall_s"]))
    return walls

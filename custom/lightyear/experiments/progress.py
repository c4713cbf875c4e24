"""A quiet live view of a running sweep: with rich and a terminal one status line redrawn in place, else plain lines,
one per started, finished or failed run and a status line at most once a minute.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import sys
import time
from dataclasses import dataclass, field


@dataclass
class Running:
    name: str
    round: int  # rounds finished so far (by the most advanced site)
    rounds: int | None
    seconds: float


@dataclass
class SweepState:
    total: int
    done: int
    failed: int
    elapsed: float
    eta: float | None
    running: list[Running] = field(default_factory=list)


def rounds_done(folder: str, rounds: int | None = None) -> int:
    """Rounds a run has finished, at most ``rounds`` (a star run records its final evaluation as one more)."""
    done = _rounds_done(folder)
    return min(done, rounds) if isinstance(rounds, int) and rounds > 0 else done


def _rounds_done(folder: str) -> int:
    path = os.path.join(folder, "ws", "server", "simulate_job", "progress.jsonl")
    best = 0
    if os.path.isfile(path):
        with open(path, errors="replace") as f:
            for line in f:
                try:
                    best = max(best, int(json.loads(line).get("round", -1)) + 1)
                except (ValueError, TypeError, AttributeError):
                    continue  # a line being written
        return best
    for rounds_csv in glob.glob(os.path.join(folder, "ws", "site-*", "simulate_job", "rounds.csv")):
        try:
            with open(rounds_csv, newline="", errors="replace") as f:
                best = max(best, sum(1 for _ in csv.DictReader(f)))
        except (OSError, csv.Error):
            continue  # a damaged record counts no rounds; the report names it
    return best


def estimate_left(walls: list[float], pending: int, running: list[Running], parallel: int) -> float | None:
    """Seconds left: the mean wall time of finished runs (or the running runs' pace per round) times the work left."""
    per_run = sum(walls) / len(walls) if walls else None
    if per_run is None:
        paces = [r.seconds / r.round * r.rounds for r in running if r.round and r.rounds]
        per_run = max(paces) if paces else None
    if per_run is None:
        return None
    left_running = sum(max(per_run - r.seconds, 0.0) for r in running)
    return (pending * per_run + left_running) / max(1, min(parallel, pending + len(running)))


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def status_line(state: SweepState) -> str:
    parts = [f"{state.done}/{state.total} done", f"{len(state.running)} running", f"{state.failed} failed"]
    parts += [f"elapsed {clock(state.elapsed)}", f"left ~{clock(state.eta)}"]
    runs = [f"{r.name} round {r.round}/{r.rounds or '?'}" for r in state.running]
    return " | ".join(parts + runs)


class PlainDisplay:
    """Plain lines: events as they happen, the status line every ``every`` seconds."""

    def __init__(self, stream=None, every: float = 60.0):
        self.stream = stream or sys.stdout
        self.every = every
        self._last = time.monotonic()

    def event(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def update(self, state: SweepState) -> None:
        if time.monotonic() - self._last >= self.every:
            self._last = time.monotonic()
            self.event(status_line(state))

    def close(self) -> None:
        pass


class RichDisplay:
    """One status line redrawn in place; events printed above it."""

    def __init__(self):
        from rich.console import Console
        from rich.live import Live

        self.console = Console()
        self.live = Live("", console=self.console, refresh_per_second=2, transient=True)
        self.live.start()

    def event(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def update(self, state: SweepState) -> None:
        from rich.text import Text

        self.live.update(Text(status_line(state), no_wrap=True, overflow="ellipsis"))

    def close(self) -> None:
        self.live.stop()


def make_display(plain: bool = False):
    """Rich's live line when rich is installed and stdout is a terminal, else plain lines."""
    if not plain and sys.stdout.isatty():
        try:
            return RichDisplay()
        except ImportError:
            pass
    return PlainDisplay()

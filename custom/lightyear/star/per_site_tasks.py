"""Waiting for one task per site (a rule that customises the model per site) as FLARE's broadcast waits for its
one task, so a round ends the same way whichever path sent it; and which sites the simulator lost at the start."""

from __future__ import annotations

import time
from collections.abc import Callable

from nvflare.apis.controller_spec import Task, TaskCompletionStatus
from nvflare.apis.signal import Signal

from lightyear.flare.worker_deaths import WORKER_DIED, WorkerDeaths

POLL_SECONDS = 0.2
"""How often the per-site send path looks at its tasks."""
GRACE_WAITS = 2
"""Waits for tasks (rounds) after which a site reported dead that fetched none is lost (:class:`StartWatch`)."""
LOST_AT_START = (
    f"{WORKER_DIED}; the run stops rather than go on with fewer sites than the job names. This is FLARE's "
    "start race, not the job: run it again (lightyear-simulate and lightyear-sweep do so once)"
)


class StartWatch:
    """The sites that fetched a task, and those the simulator lost at the start: reported dead by its runner
    (:class:`~lightyear.flare.worker_deaths.WorkerDeaths`) and without a task after :data:`GRACE_WAITS` waits (the
    grace lets a simulator with fewer threads than sites rerun a dead worker's site)."""

    def __init__(self):
        self.deaths = WorkerDeaths()
        self.fetched: set[str] = set()
        self.waits = 0

    def note(self, tasks: list[Task]) -> list[Task]:
        """``tasks``, waited for, with the sites that fetched them noted."""
        self.fetched |= {ct.client.name for task in tasks for ct in list(task.client_tasks)}
        self.waits += 1
        return tasks

    def lost(self, sites: list[str]) -> dict[str, str]:
        """site -> the reason it is dropped, for each of ``sites`` lost at the start."""
        if self.waits < GRACE_WAITS:
            return {}
        return self.deaths.lost_sites(sites, self.fetched)


def wait_like_broadcast(
    tasks: list[Task],
    need: int,
    wait_after: float,
    abort_signal: Signal | None,
    cancel_task: Callable[..., None],
    poll: float = POLL_SECONDS,
) -> None:
    """Wait until every task ended, or ``need`` sites answered ``wait_after`` seconds ago, or an abort; then cancel
    the open tasks with ``cancel_task`` (the controller's)."""
    enough_since = None
    while True:
        if abort_signal is not None and abort_signal.triggered:
            status = TaskCompletionStatus.ABORTED
            break
        if all(t.completion_status is not None for t in tasks):
            return
        answered = sum(1 for t in tasks for ct in t.client_tasks if ct.result_received_time is not None)
        if answered >= need:
            enough_since = enough_since if enough_since is not None else time.monotonic()
            if time.monotonic() - enough_since >= wait_after:
                status = TaskCompletionStatus.CANCELLED
                break
        time.sleep(poll)
    for task in tasks:
        if task.completion_status is None:
            cancel_task(task, completion_status=status)

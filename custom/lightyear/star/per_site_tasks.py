"""Waiting for one task per site as FLARE's broadcast waits for its one task.

A rule that customises the model per site (FedCAP) needs one task per site, since a broadcast sends
every client the same data. :func:`wait_like_broadcast` gives those tasks a broadcast's rules, so a
round ends the same way whichever path sent it. :class:`AbortOr` ends either wait early on a
condition of the controller's own, as an abort would; :class:`StartWatch` is the one the star
controller uses: a site lost at the start.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from nvflare.apis.controller_spec import Task, TaskCompletionStatus
from nvflare.apis.signal import Signal

from lightyear.flare.worker_deaths import WORKER_DIED, WorkerDeaths

POLL_SECONDS = 0.2
"""How often the per-site send path looks at its tasks."""
LOST_AT_START = (
    f"{WORKER_DIED}; the run stops rather than go on with fewer sites than the job names. This is FLARE's "
    "start race, not the job: run it again (lightyear-simulate and lightyear-sweep do so once)"
)


class AbortOr:
    """An abort signal for a wait (FLARE's ``broadcast_and_wait`` or :func:`wait_like_broadcast`) that
    reads as triggered when ``signal`` is, or when ``stop()`` returns true. The wait then cancels its
    open tasks as on an abort; the caller tells the two apart by ``signal``."""

    def __init__(self, signal: Signal | None, stop: Callable[[], bool]):
        self.signal, self.stop = signal, stop

    @property
    def triggered(self) -> bool:
        return bool(self.signal is not None and self.signal.triggered) or bool(self.stop())


class StartWatch:
    """The sites of a run that fetched a task, and those that FLARE's simulator reported dead before
    they did (:class:`~lightyear.flare.worker_deaths.WorkerDeaths`; none outside the simulator).

    A star run stops when a site is lost this way: it would otherwise go on a site short, every
    round waiting ``wait_time_after_min_received`` for it. A site that fetched a task and died later
    is a missing site, which every rule handles."""

    def __init__(self):
        self.deaths = WorkerDeaths()
        self.fetched: set[str] = set()

    def note(self, tasks: list[Task]) -> list[Task]:
        """``tasks``, with the sites that fetched them noted."""
        self.fetched |= _fetchers(tasks)
        return tasks

    def lost(self, sites: list[str], tasks: list[Task]) -> dict[str, str]:
        """site -> the runner's line, for each of ``sites`` whose worker died before the site fetched
        a task, ``tasks`` (not yet noted) included."""
        return self.deaths.never_started(sites, self.fetched | _fetchers(tasks))

    def reasons(self, sites: list[str], tasks: list[Task]) -> dict[str, str]:
        """site -> the reason it is dropped, for each site :meth:`lost`."""
        return {site: f"{WORKER_DIED} (FLARE: {line})" for site, line in sorted(self.lost(sites, tasks).items())}

    def signal(self, abort_signal: Signal | None, sites: list[str], tasks: list[Task]) -> AbortOr:
        """An abort signal for waiting on ``tasks`` that also triggers once a site is :meth:`lost`."""
        return AbortOr(abort_signal, lambda: bool(self.lost(sites, tasks)))


def _fetchers(tasks: list[Task]) -> set[str]:
    return {ct.client.name for task in tasks for ct in list(task.client_tasks)}


def wait_like_broadcast(
    tasks: list[Task],
    need: int,
    wait_after: float,
    abort_signal: Signal | AbortOr | None,
    cancel_task: Callable[..., None],
    poll: float = POLL_SECONDS,
) -> None:
    """Wait until every task ended (result, ``train_timeout``, dead site), or ``need`` sites
    answered and ``wait_after`` seconds (``wait_time_after_min_received``) passed since, or an
    abort; the tasks still open are then cancelled with ``cancel_task`` (the controller's)."""
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

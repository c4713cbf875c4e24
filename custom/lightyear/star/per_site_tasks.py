"""Waiting for one task per site as FLARE's broadcast waits for its one task.

A rule that customises the model per site (FedCAP) needs one task per site, since a broadcast sends
every client the same data. :func:`wait_like_broadcast` gives those tasks a broadcast's rules, so a
round ends the same way whichever path sent it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from nvflare.apis.controller_spec import Task, TaskCompletionStatus
from nvflare.apis.signal import Signal

POLL_SECONDS = 0.2
"""How often the per-site send path looks at its tasks."""


def wait_like_broadcast(
    tasks: list[Task],
    need: int,
    wait_after: float,
    abort_signal: Signal | None,
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

"""When a site whose run has ended should end its FLARE job process: its result cannot reach the server.

FLARE's client runner retries sending a result for as long as the server does not answer
(``ClientRunner._send_task_result``), so with the server dead the job process would wait for ever. No FLARE import.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

MIN_GRACE = 60.0
"""Seconds a finished run's result may take to reach the server, at least (a live server takes it in seconds)."""


def delivery_grace(peer_deadline: float) -> float:
    """The grace for a site whose ``peer_deadline`` is given: the longer of the two."""
    return max(MIN_GRACE, float(peer_deadline))


class DeliveryWatch:
    """Calls ``on_overdue`` once if ``grace`` seconds pass after :meth:`arm` without :meth:`disarm`."""

    def __init__(self, grace: float, on_overdue: Callable[[], None]):
        if not grace > 0:
            raise ValueError(f"the delivery grace must be positive seconds, got {grace!r}")
        self.grace = grace
        self.on_overdue = on_overdue
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self.fired = False

    def arm(self) -> None:
        """The run has ended: start counting (again, if it was armed before)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            timer = threading.Timer(self.grace, lambda: self._overdue(timer))
            timer.daemon = True
            self._timer = timer
            timer.start()

    def disarm(self) -> None:
        """The result reached the server, or the job is ending anyway: nothing to do."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    @property
    def armed(self) -> bool:
        with self._lock:
            return self._timer is not None

    def _overdue(self, timer: threading.Timer) -> None:
        with self._lock:
            if self._timer is not timer or self.fired:  # disarmed or armed again meanwhile
                return
            self._timer = None
            self.fired = True
        self.on_overdue()


def watch_delivery(component, engine, peer_deadline: float, prefix: str, run_dir: str | None) -> DeliveryWatch:
    """An armed :class:`DeliveryWatch` that ends ``component``'s job process (``system_panic``) once overdue."""
    grace = delivery_grace(peer_deadline)

    def overdue() -> None:
        message = (
            f"{prefix}the run's result has not reached the server in {grace:g} s (the server, or this site's "
            f"connection to it, is down): ending this site's job process. How the run ended and its last round's "
            f"checkpoint are in {run_dir}; submit the job again with resume_from to continue from it"
        )
        with engine.new_context() as ctx:
            component.log_error(ctx, message)
            component.system_panic(message, ctx)

    watch = DeliveryWatch(grace, overdue)
    watch.arm()
    return watch

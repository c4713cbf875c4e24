"""When a site whose run has ended should end its FLARE job process: its result cannot reach the server.

A peer-to-peer site's whole run is one FLARE task. When it ends (finished, stopped because it
could reach no neighbour, or failed), FLARE's client runner sends the result to the server and
retries for as long as the server does not answer (``ClientRunner._send_task_result`` in
``nvflare/private/fed/client/client_runner.py`` loops until the result is sent or the job is
aborted). With the server dead, the site's job process would wait like that until somebody
kills it or a restarted server aborts the job.

:class:`DeliveryWatch` is armed when the run ends and disarmed when FLARE reports the result
sent; if ``grace`` seconds pass first, it calls ``on_overdue`` once (the executor logs why and
asks FLARE to end the job: ``system_panic``). A server that is up takes the result within seconds,
so the grace only runs out when the server, or this site's connection to it, is gone. No FLARE
import here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

MIN_GRACE = 60.0
"""Seconds a finished run's result may take to reach the server, at least."""


def delivery_grace(peer_deadline: float) -> float:
    """The grace for a site whose ``peer_deadline`` is given: the longer of the two."""
    return max(MIN_GRACE, float(peer_deadline))


class DeliveryWatch:
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
    """An armed :class:`DeliveryWatch` for ``component`` (a FLARE component: ``log_error`` and
    ``system_panic``) that ends the site's job process when the run's result has not reached the
    server within :func:`delivery_grace`; ``prefix`` starts its message, ``run_dir`` is named in it."""
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

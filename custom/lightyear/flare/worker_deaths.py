"""Site workers of FLARE's simulator that died before their site started, seen as it happens.

FLARE 2.9's simulator runs each site in a worker process and talks to it over a control port
(``SimulatorRunner.do_one_task``, in the server's process). When that worker dies, or its control
connection breaks (FLARE's start race, :mod:`lightyear.flare.start_race`), the runner logs one
ERROR line naming the site ("Subprocess died for client <site>..." or "Communication error with
client <site>: ...") and never runs that site again. A worker that died before it opened its
control port is only given up on 60 s later, in a line that names no site ("run_client_thread error:
... Failed to create connection to the child process"); :meth:`WorkerDeaths.lost_sites` puts such
lines on the sites that never started, when there are exactly as many of them. A peer-to-peer run
needs every site to start, so without this the server waited ``start_timeout`` (90 s) for a site
that could no longer come, and a star run went on a site short.

:class:`WorkerDeaths` is a logging handler that notes those lines in the process it is installed
in: in the simulator that is the server's, where the P2P and star controllers read
:meth:`WorkerDeaths.lost_sites` while they wait for the sites. Elsewhere (POC, a real deployment)
no such line is logged: a P2P run's bound stays ``start_timeout``. No FLARE import.
"""

from __future__ import annotations

import logging
import re
import threading

WORKER_DIED = "its simulator worker died before the site started"
"""The reason a site dropped this way gets (:mod:`lightyear.flare.start_race` reads it)."""
RUNNER_LINE = re.compile(r"(?:Subprocess died for client|Communication error with client) ([^\s,:]+)")
GAVE_UP_LINE = re.compile(r"run_client_thread error: .*Failed to create connection to the child process")
RUNNER_LOGGER = "simulator_runner"
"""Part of the name of the runner's logger (``nvflare.private.fed.app.simulator.simulator_runner....``)."""


class WorkerDeaths(logging.Handler):
    """Notes every site the simulator's runner reports dead (first line per site kept).

    Only the runner's own records count, and only a message that starts with its words: the server
    also logs text a site sent (a failed site's reason), and a site must not be able to have another
    one dropped by sending these words."""

    def __init__(self):
        super().__init__(level=logging.ERROR)
        self._lines: dict[str, str] = {}
        self._unnamed: list[str] = []  # the runner's lines that gave up on a worker without naming its site
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if RUNNER_LOGGER not in str(record.name):
            return
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted names no site
            return
        found = RUNNER_LINE.match(message)
        with self._guard:
            if found:
                self._lines.setdefault(found.group(1), message[:300])
            elif GAVE_UP_LINE.match(message):
                self._unnamed.append(message[:300])

    def sites(self) -> dict[str, str]:
        """site -> the runner's line about it, for every site reported dead so far."""
        with self._guard:
            return dict(self._lines)

    def lost_sites(self, sites, started) -> dict[str, str]:
        """site -> why it is dropped (:data:`WORKER_DIED`, quoting the runner's line), for each site of
        ``sites`` not in ``started`` that the runner reported dead, and, when the runner gave up on as
        many workers without naming them as there are other sites not started, for each of those;
        re-installs the handler first (:meth:`install`)."""
        dead = self.install().sites()
        out = {site: line for site, line in dead.items() if site in sites and site not in started}
        with self._guard:
            unnamed = list(self._unnamed)
        silent = sorted(site for site in sites if site not in started and site not in dead)
        if unnamed and len(silent) == len(unnamed):
            out.update({site: unnamed[0] for site in silent})
        return {site: f"{WORKER_DIED} (FLARE: {line})" for site, line in sorted(out.items())}

    def install(self) -> WorkerDeaths:
        """Listen on the root logger (the runner's logger propagates to it), again if a logging
        configuration applied since replaced the root's handlers; returns self."""
        root = logging.getLogger()
        if self not in root.handlers:
            root.addHandler(self)
        return self

    def remove(self) -> None:
        logging.getLogger().removeHandler(self)

"""Site workers of FLARE's simulator that died before their site started, seen as it happens (no FLARE import): FLARE
2.9's ``SimulatorRunner`` logs an ERROR naming the site (or, later, none) and never runs it again; :class:`WorkerDeaths`
notes those lines in the server process so the controllers drop such a site at once, not after ``start_timeout``."""

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
    """Notes every site the simulator's runner reports dead (first line per site kept). Only the runner's own records
    starting with its words count: the server also logs text a site sent, which must not get another site dropped."""

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
        """site -> why it is dropped (:data:`WORKER_DIED`) for each site of ``sites`` not ``started`` that the runner
        reported dead, and for the others not started if it gave up on as many unnamed workers; re-installs itself."""
        dead = self.install().sites()
        out = {site: line for site, line in dead.items() if site in sites and site not in started}
        with self._guard:
            unnamed = list(self._unnamed)
        silent = sorted(site for site in sites if site not in started and site not in dead)
        if unnamed and len(silent) == len(unnamed):
            out.update({site: unnamed[0] for site in silent})
        return {site: f"{WORKER_DIED} (FLARE: {line})" for site, line in sorted(out.items())}

    def install(self) -> WorkerDeaths:
        """Listen on the root logger (again, if a logging configuration replaced its handlers); returns self."""
        root = logging.getLogger()
        if self not in root.handlers:
            root.addHandler(self)
        return self

    def remove(self) -> None:
        logging.getLogger().removeHandler(self)

"""The simulator runner's lines about dead site workers, named or not, read as sites that never started."""

import logging

from lightyear.flare.worker_deaths import WORKER_DIED, WorkerDeaths

RUNNER_LOGGER = "nvflare.private.fed.app.simulator.simulator_runner.SimulatorClientRunner"
GAVE_UP = (
    "run_client_thread error: RuntimeError: Failed to create connection to the child process in "
    "SimulatorClientRunner, timeout: 60.0"
)
SITES = ["site-1", "site-2", "site-3", "site-4"]


def dropped(line):
    """The reason a site lost this way is dropped for."""
    return f"{WORKER_DIED} (FLARE: {line})"


def test_a_worker_given_up_on_without_a_name_is_the_one_site_that_never_started():
    """FLARE's runner names no site when a worker died before opening its control port: the line goes
    to the sites not started when they are exactly as many as such lines, and to none otherwise."""
    deaths = WorkerDeaths().install()
    try:
        logging.getLogger(RUNNER_LOGGER).error(GAVE_UP)
        assert deaths.lost_sites(SITES, {"site-1", "site-2", "site-3"}) == {"site-4": dropped(GAVE_UP)}
        assert deaths.lost_sites(SITES, {"site-1", "site-2"}) == {}  # two silent sites, one line: which?
        assert deaths.lost_sites(SITES, set(SITES)) == {}
        logging.getLogger(RUNNER_LOGGER).error("Subprocess died for client site-2 before send, exit code: 1")
        found = deaths.lost_sites(SITES, {"site-1"})  # site-2 named, site-3 or site-4 unnamed: ambiguous
        assert list(found) == ["site-2"]
        logging.getLogger(RUNNER_LOGGER).error(GAVE_UP)
        assert deaths.lost_sites(SITES, {"site-1"}) == {
            "site-2": dropped("Subprocess died for client site-2 before send, exit code: 1"),
            "site-3": dropped(GAVE_UP),
            "site-4": dropped(GAVE_UP),
        }
    finally:
        deaths.remove()


def test_the_give_up_line_counts_only_from_the_runner_and_at_the_start_of_its_message():
    deaths = WorkerDeaths().install()
    try:
        logging.getLogger("lightyear.p2p.server.controller.P2PController").error(GAVE_UP)
        logging.getLogger(RUNNER_LOGGER).error("site-1 said: " + GAVE_UP)
        assert deaths.lost_sites(SITES, {"site-1", "site-2", "site-3"}) == {}
    finally:
        deaths.remove()

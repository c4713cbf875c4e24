"""Test-wide policy: a real simulator test gets one rerun.

FLARE's simulator starts each site's worker on a port it finds by binding port 0 and closing it
(``SimulatorRunner.do_one_task``); until the worker binds it again, any outgoing connection on the
machine may take that port as its own, and the worker then dies with "Address already in use"
before the job starts (the server log says "Subprocess died for client ... before send"). On 2
cores this has hit about one simulator launch in fifty, and it is FLARE's, not this toolkit's.
One rerun turns that into a pass; a failure of this toolkit's own code fails again and stays red.

The tiers run on pytest-xdist's workers (``-n``, see ``pyproject.toml``); every test that starts
real FLARE or SLURM processes goes to one worker (one ``xdist_group``), so two simulators never
run at once: on one machine they can cross-wire.
"""

import pytest


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("simulator"):
            item.add_marker(pytest.mark.flaky(reruns=1, reruns_delay=2))
        if item.get_closest_marker("simulator") or item.get_closest_marker("deployment"):
            item.add_marker(pytest.mark.xdist_group("flare"))

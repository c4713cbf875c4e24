"""A star site whose simulator worker died before it fetched a task (FLARE's start race) and that has
fetched none after two rounds stops the run, instead of the run going on a site short; a site that
died later, or that another simulator thread ran after all, is not lost."""

import json
import logging
import time

from nvflare.apis.controller_spec import TaskCompletionStatus
from nvflare.apis.fl_constant import ReservedKey
from nvflare.apis.fl_context import FLContext
from nvflare.apis.signal import Signal

from lightyear.flare.start_race import never_started
from lightyear.flare.worker_deaths import WORKER_DIED
from lightyear.star.aggregator import FedAvgAggregator
from lightyear.star.controller import StarController
from lightyear.star.messages import result_data

from flare_fakes import StarServerEngine, answer_star_task

RUNNER_LOGGER = "nvflare.private.fed.app.simulator.simulator_runner.SimulatorClientRunner"
SITES = ["site-1", "site-2", "site-3", "site-4"]
GAVE_UP = "run_client_thread error: RuntimeError: Failed to create connection to the child process, timeout: 60.0"


def started_controller(tmp_path, answering, rounds=3):
    """A star controller whose broadcast waits as FLARE's does: ``wait_time_after_min_received`` once
    ``min_responses`` sites answered (none when all did). The sites in ``answering(call)`` answer."""
    ctrl = StarController(rounds=rounds, model="cnn", num_classes=10, in_channels=1)
    ctx = FLContext()
    engine = StarServerEngine(str(tmp_path), SITES, {"aggregator": FedAvgAggregator()})
    ctx.set_prop(ReservedKey.ENGINE, engine, private=True, sticky=False)
    ctrl.start_controller(ctx)
    ctrl.panics, ctrl.waits = [], []
    ctrl.system_panic = lambda reason, fl_ctx: ctrl.panics.append(reason)

    def broadcast_and_wait(task, fl_ctx, targets, min_responses, wait_time_after_min_received, abort_signal):
        answered = answering(len(ctrl.waits))
        for site in answered:
            answer_star_task(task, site, result_data(ctrl.initial_weights(), 10, 0))
        ctrl.waits.append(task.name)
        if len(answered) < len(targets):
            time.sleep(0.2)
        task.completion_status = TaskCompletionStatus.OK

    ctrl.broadcast_and_wait = broadcast_and_wait
    return ctrl, ctx


def run(ctrl, ctx, tmp_path):
    """Run the job; the summary rows by site."""
    try:
        ctrl.control_flow(Signal(), ctx)
    finally:
        ctrl.stop_controller(ctx)
    assert ctrl._starts.deaths not in logging.getLogger().handlers
    return {r["site"]: r for r in json.loads((tmp_path / "summary.json").read_text())}


def test_a_site_whose_worker_died_before_its_first_task_stops_the_run_after_the_grace(tmp_path):
    """site-4's worker died at launch and it never fetches a task: the run stops after the second
    round (it went on to the end, every round waiting for site-4), with site-4 dropped for the reason
    lightyear-simulate recognises as the start race."""
    ctrl, ctx = started_controller(tmp_path, answering=lambda r: SITES[:3])
    logging.getLogger(RUNNER_LOGGER).error("Communication error with client site-4: [Errno 104] reset")
    rows = run(ctrl, ctx, tmp_path)
    assert len(ctrl.waits) == 2  # no third round, no final evaluation
    assert len(ctrl.panics) == 1 and "site-4" in ctrl.panics[0] and "run it again" in ctrl.panics[0]
    assert rows["site-4"]["status"] == "dropped" and WORKER_DIED in rows["site-4"]["reason"]
    assert "[Errno 104] reset" in rows["site-4"]["reason"]
    folder = tmp_path / "ws" / "server" / "simulate_job"
    folder.mkdir(parents=True)
    for name in ("summary.csv", "summary.json"):
        (folder / name).write_text((tmp_path / name).read_text())
    assert never_started(str(tmp_path / "ws")) == f"site-4 never started ({WORKER_DIED})"


def test_a_worker_the_runner_gave_up_on_without_naming_it_stops_the_run_too(tmp_path):
    """A worker that died before opening its control port is given up on 60 s later in a line that
    names no site: the one site that never fetched a task is the one."""
    ctrl, ctx = started_controller(tmp_path, answering=lambda r: SITES[:3])
    logging.getLogger(RUNNER_LOGGER).error(GAVE_UP)
    rows = run(ctrl, ctx, tmp_path)
    assert len(ctrl.waits) == 2 and len(ctrl.panics) == 1
    assert rows["site-4"]["status"] == "dropped" and WORKER_DIED in rows["site-4"]["reason"]


def test_a_site_another_simulator_thread_ran_after_its_worker_died_is_not_lost(tmp_path):
    """With fewer simulator threads than sites, another thread runs site-4 again: it answers from
    the second round on, and the run finishes with it."""
    ctrl, ctx = started_controller(tmp_path, answering=lambda r: SITES[:3] if r == 0 else SITES)
    logging.getLogger(RUNNER_LOGGER).error("Subprocess died for client site-4 before send, exit code: 1")
    rows = run(ctrl, ctx, tmp_path)
    assert ctrl.panics == [] and len(ctrl.waits) == 4  # three rounds and the final evaluation
    assert all(rows[s]["status"] == "finished" for s in SITES)


def test_a_site_that_died_after_it_fetched_a_task_is_a_missing_site_and_the_run_goes_on(tmp_path):
    """site-4 answered round 0, then its worker died: the rounds after it are aggregated without
    it and the run finishes; nothing is stopped."""
    ctrl, ctx = started_controller(tmp_path, answering=lambda r: SITES if r == 0 else SITES[:3], rounds=2)
    logging.getLogger(RUNNER_LOGGER).error("Subprocess died for client site-4, exit code: -9")
    rows = run(ctrl, ctx, tmp_path)
    assert ctrl.panics == [] and len(ctrl.waits) == 3  # two rounds and the final evaluation
    assert rows["site-4"]["status"] == "dropped" and WORKER_DIED not in rows["site-4"]["reason"]
    assert all(rows[s]["status"] == "finished" for s in SITES[:3])

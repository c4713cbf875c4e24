"""The peer-to-peer controller: one site's failure or death is that site's alone, the run ends and
the summary lists every site. Driven with a fake engine, in seconds."""

import json
import logging
import threading
import time

import pytest
from nvflare.apis.client import Client
from nvflare.apis.controller_spec import ClientTask
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal

from lightyear.flare import constants as C
from lightyear.flare.start_race import never_started
from lightyear.flare.worker_deaths import WORKER_DIED, WorkerDeaths
from lightyear.p2p.server.controller import MAX_PROGRESS_BYTES, P2PController
from lightyear.p2p.server.site_status import SiteStatus

from flare_fakes import ServerEngine, show_stats

SITES = ["site-1", "site-2", "site-3", "site-4"]


def controller(tmp_path, dead=(), **kwargs):
    ctrl = P2PController(
        rounds=3, peer_deadline=1.0, liveness_interval=1.0, liveness_failures=2, run_timeout=30, **kwargs
    )
    engine = ServerEngine(str(tmp_path), SITES, dead)
    ctx = FLContext()
    ctx.set_prop(ReservedKey.ENGINE, engine, private=True, sticky=False)
    ctrl.start_controller(ctx)
    ctrl.panics, ctrl.cancelled = [], []
    ctrl.system_panic = lambda reason, fl_ctx: ctrl.panics.append(reason)
    ctrl.cancel_task = lambda task, fl_ctx=None, **kw: ctrl.cancelled.append(task)

    def broadcast(task, fl_ctx, targets, min_responses, **kw):  # the run task of each site
        for site in targets:
            task.client_tasks.append(ClientTask(Client(site, None), task))
        ctrl.client_tasks = getattr(ctrl, "client_tasks", []) + task.client_tasks
        if len(ctrl.client_tasks) == len(SITES):
            ctrl.task = task

    ctrl.broadcast = broadcast
    return ctrl, ctx


def progress(ctrl, ctx, site, round_num, claimed=None):
    req = Shareable()
    req[C.KEY_PROGRESS] = {"site": claimed or site, "round": round_num, "val_acc": 0.5}
    req.set_peer_props({ReservedKey.IDENTITY_NAME: site})
    return ctrl._on_progress(C.TOPIC_PROGRESS, req, ctx)


def finish(ctrl, ctx, site, acc=0.9, error=None):
    ct = next(ct for ct in ctrl.client_tasks if ct.client.name == site)
    if error:
        ct.result = make_reply(ReturnCode.EXECUTION_EXCEPTION)
        ct.result[C.KEY_ERROR] = error
    else:
        ct.result = make_reply(ReturnCode.OK)
        ct.result[C.KEY_RESULT] = {"site": "forged-name", "malfunction": "none", "last_round": 2, "test": {"acc": acc}}
    ctrl._on_result(ct, ctx)


def run_sites(ctrl, ctx, plan):
    """plan: site -> ("finish" | "fail" | "die", round at which it fails or dies)."""

    def body():
        while not hasattr(ctrl, "task"):
            time.sleep(0.01)
        for round_num in range(3):
            for site, (fate, at) in plan.items():
                if fate in ("fail", "die") and round_num > at:
                    continue
                if fate == "fail" and round_num == at:
                    finish(ctrl, ctx, site, error=f"{site}: TypeError: '<' not supported")
                    continue
                progress(ctrl, ctx, site, round_num)
            time.sleep(0.05)
        for site, (fate, _) in plan.items():
            if fate == "finish":
                finish(ctrl, ctx, site)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread


def summary(tmp_path):
    return {row["site"]: row for row in json.loads((tmp_path / "summary.json").read_text())}


def test_a_site_that_raises_mid_run_is_failed_and_the_others_finish(tmp_path):
    ctrl, ctx = controller(tmp_path)
    plan = {"site-1": ("finish", 0), "site-2": ("finish", 0), "site-3": ("fail", 1), "site-4": ("finish", 0)}
    run_sites(ctrl, ctx, plan)
    start = time.monotonic()
    ctrl.control_flow(Signal(), ctx)
    assert time.monotonic() - start < 10
    assert ctrl.panics == []
    rows = summary(tmp_path)
    assert rows["site-3"]["status"] == "failed" and "TypeError" in rows["site-3"]["reason"]
    assert rows["site-3"]["last_round"] == 0
    for site in ("site-1", "site-2", "site-4"):
        assert rows[site]["status"] == "finished" and rows[site]["acc"] == 0.9
    assert rows["mean_benign"]["malfunction"] == "n=3"


def test_a_dead_site_is_dropped_and_the_run_ends_when_the_others_finish(tmp_path):
    ctrl, ctx = controller(tmp_path, dead={"site-4"})
    plan = {"site-1": ("finish", 0), "site-2": ("finish", 0), "site-3": ("finish", 0), "site-4": ("die", 0)}
    run_sites(ctrl, ctx, plan)
    start = time.monotonic()
    ctrl.control_flow(Signal(), ctx)
    # dropped after 2 missed pings 1 s apart, far sooner than progress_timeout (2 x 1 + 600 s)
    assert time.monotonic() - start < 10
    rows = summary(tmp_path)
    assert rows["site-4"]["status"] == "dropped" and "stopped answering" in rows["site-4"]["reason"]
    assert rows["site-4"]["last_round"] == 0
    assert all(rows[s]["status"] == "finished" for s in ("site-1", "site-2", "site-3"))
    assert ctrl.cancelled  # the dead site's task is cancelled


def test_summary_is_written_when_the_run_is_aborted(tmp_path):
    ctrl, ctx = controller(tmp_path)
    signal = Signal()
    threading.Timer(0.5, signal.trigger, args=("stop",)).start()
    ctrl.control_flow(signal, ctx)
    rows = summary(tmp_path)
    assert {rows[s]["status"] for s in SITES} == {"dropped"}
    assert show_stats(ctrl)["P2PController"]["phase"] == "aborted"


def test_records_are_keyed_by_the_identity_flare_gives_not_the_claimed_one(tmp_path):
    ctrl, ctx = controller(tmp_path)
    plan = {s: ("finish", 0) for s in SITES}
    run_sites(ctrl, ctx, plan)
    ctrl.control_flow(Signal(), ctx)
    rows = summary(tmp_path)
    assert "forged-name" not in rows  # the result claimed another name; the summary uses the task's client
    assert progress(ctrl, ctx, "site-9", 0).get_return_code() == ReturnCode.BAD_REQUEST_DATA
    (tmp_path / "second").mkdir()
    ctrl, ctx = controller(tmp_path / "second")
    ctrl.status = SiteStatus(SITES)
    progress(ctrl, ctx, "site-2", 1, claimed="site-1")
    last = json.loads((tmp_path / "second" / "progress.jsonl").read_text().splitlines()[-1])
    assert last["site"] == "site-2"


def test_a_site_gets_one_record_a_round_of_the_job_and_no_more(tmp_path):
    """A repeated, out-of-range or oversized round record is refused, so no site can grow
    progress.jsonl past its rounds' records; a refused one still shows the site alive."""
    ctrl, ctx = controller(tmp_path)
    ctrl.status = SiteStatus(SITES)
    warnings = []
    ctrl.log_warning = lambda fl_ctx, msg: warnings.append(msg)
    assert progress(ctrl, ctx, "site-1", 0).get_return_code() == ReturnCode.OK
    for round_num in (0, 3, -1, "1", True):
        assert progress(ctrl, ctx, "site-1", round_num).get_return_code() == ReturnCode.BAD_REQUEST_DATA
    huge = Shareable()
    huge[C.KEY_PROGRESS] = {"site": "site-1", "round": 1, "pad": "x" * MAX_PROGRESS_BYTES}
    huge.set_peer_props({ReservedKey.IDENTITY_NAME: "site-1"})
    assert ctrl._on_progress(C.TOPIC_PROGRESS, huge, ctx).get_return_code() == ReturnCode.BAD_REQUEST_DATA
    assert progress(ctrl, ctx, "site-1", 1).get_return_code() == ReturnCode.OK
    lines = [json.loads(line) for line in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert [(r["site"], r["round"]) for r in lines] == [("site-1", 0), ("site-1", 1)]
    assert "round 0 was recorded already" in warnings[0] and "got 3" in warnings[1]
    assert f"more than {MAX_PROGRESS_BYTES}" in warnings[-1]
    assert ctrl.status.snapshot()["rounds_done"]["site-1"] == 2  # rounds 0 and 1; the refused round 3 not counted


def test_progress_timeout_shorter_than_twice_the_peer_deadline_is_refused():
    with pytest.raises(ValueError, match="progress_timeout"):
        P2PController(peer_deadline=1800, progress_timeout=900)
    assert P2PController(peer_deadline=1800).progress_timeout == 2 * 1800 + 600


@pytest.mark.parametrize(
    "topology, args, message",
    [
        ("k_regular", {"k": 1}, "never connected"),
        ("random", {"degree": 5}, "1 <= degree <= 3"),
        ("k_regular", {"k": 4}, "allows k <= 3"),
    ],
)
def test_a_topology_that_cannot_connect_the_sites_stops_the_run_at_start(tmp_path, topology, args, message):
    ctrl, ctx = controller(tmp_path, topology=topology, topology_args=args)
    ctrl.control_flow(Signal(), ctx)
    assert len(ctrl.panics) == 1 and message in ctrl.panics[0]
    assert not hasattr(ctrl, "task")  # no site was sent a run
    rows = summary(tmp_path)
    assert {rows[s]["status"] for s in SITES} == {"dropped"} and "no usable topology" in rows["site-1"]["reason"]
    stats = show_stats(ctrl)["P2PController"]
    assert stats["phase"] == "failed" and stats["sites_dropped"] == 4


def test_show_stats_follows_the_run_phase_round_and_every_site(tmp_path):
    """What `show_stats JOB server` / `nvflare job monitor` show: before the start, mid-run with
    site-3 failed and site-4 dead (dropped after 2 missed pings), and after the end."""
    from nvflare.tool.job.job_cli import _build_monitor_key_aliases, _extract_monitor_metrics

    ctrl, ctx = controller(tmp_path, dead={"site-4"})
    before = show_stats(ctrl)["P2PController"]
    assert before["phase"] == "starting" and before["current_round"] is None and before["num_rounds"] == 3
    seen = {}

    def sites():
        while not hasattr(ctrl, "task"):
            time.sleep(0.01)
        for site in SITES:
            progress(ctrl, ctx, site, 0)
        progress(ctrl, ctx, "site-1", 1)
        progress(ctrl, ctx, "site-2", 1)
        finish(ctrl, ctx, "site-3", error="site-3: RuntimeError: CUDA out of memory")
        deadline = time.monotonic() + 10
        while "site-4" not in ctrl.status.dropped() and time.monotonic() < deadline:
            time.sleep(0.05)
        seen["mid"] = show_stats(ctrl)
        for site in ("site-1", "site-2"):
            progress(ctrl, ctx, site, 2)
            finish(ctrl, ctx, site)

    thread = threading.Thread(target=sites, daemon=True)
    thread.start()
    ctrl.control_flow(Signal(), ctx)
    thread.join(5)
    mid = seen["mid"]["P2PController"]
    assert mid["phase"] == "training" and mid["num_rounds"] == 3 and mid["sites"] == 4
    assert mid["current_round"] == 2  # site-1 and site-2, still running, finished rounds 0 and 1
    assert (mid["sites_running"], mid["sites_finished"], mid["sites_failed"], mid["sites_dropped"]) == (2, 0, 1, 1)
    assert "stopped answering" in mid["dropped"]["site-4"] and "CUDA out of memory" in mid["failed"]["site-3"]
    assert mid["rounds_done"] == {"site-1": 2, "site-2": 2, "site-3": 1, "site-4": 1}
    assert _extract_monitor_metrics({"server": seen["mid"]}, _build_monitor_key_aliases([])) == {
        "round": 2
    }  # "round=2"
    after = show_stats(ctrl)["P2PController"]
    assert after["phase"] == "finished" and after["current_round"] == 3
    assert (after["sites_running"], after["sites_finished"], after["sites_failed"], after["sites_dropped"]) == (
        0,
        2,
        1,
        1,
    )


RUNNER_LOGGER = "nvflare.private.fed.app.simulator.simulator_runner.SimulatorClientRunner"


def test_a_site_whose_simulator_worker_died_at_start_ends_the_run_at_once_not_after_start_timeout(tmp_path):
    """FLARE's start race: the simulator's runner logs that site-4's worker died and never runs it. The
    run ends within seconds (it waited start_timeout, 90 s by default), and lightyear-simulate and
    lightyear-sweep recognise it as the start race (they start the run again once)."""
    ctrl, ctx = controller(tmp_path, start_timeout=60)

    def broadcast(task, fl_ctx, targets, min_responses, **kw):
        for site in targets[:-1]:  # site-4 never picks up its task
            task.client_tasks.append(ClientTask(Client(site, None), task))
        ctrl.task = task

    ctrl.broadcast = broadcast
    runner = logging.getLogger(RUNNER_LOGGER)
    threading.Timer(
        0.3, runner.error, args=("Communication error with client site-4: [Errno 104] Connection reset by peer",)
    ).start()
    start = time.monotonic()
    ctrl.control_flow(Signal(), ctx)
    assert time.monotonic() - start < 5
    rows = summary(tmp_path)
    assert rows["site-4"]["status"] == "dropped" and WORKER_DIED in rows["site-4"]["reason"]
    assert "Connection reset by peer" in rows["site-4"]["reason"]
    assert len(ctrl.panics) == 1 and "site-4" in ctrl.panics[0] and ctrl.cancelled
    run = tmp_path / "ws" / "server" / "simulate_job"
    run.mkdir(parents=True)
    for name in ("summary.csv", "summary.json"):
        (run / name).write_text((tmp_path / name).read_text())
    assert never_started(str(tmp_path / "ws")) == f"site-4 never started ({WORKER_DIED})"
    ctrl.stop_controller(ctx)
    assert ctrl._worker_deaths not in logging.getLogger().handlers


def test_a_worker_that_dies_after_its_site_started_is_left_to_the_liveness_pings(tmp_path):
    """Only a site that never started is ended by the runner's line: one that started and died is
    dropped by the liveness pings, and the others finish."""
    ctrl, ctx = controller(tmp_path, dead={"site-4"})
    plan = {"site-1": ("finish", 0), "site-2": ("finish", 0), "site-3": ("finish", 0), "site-4": ("die", 0)}
    run_sites(ctrl, ctx, plan)
    threading.Timer(
        0.3, logging.getLogger(RUNNER_LOGGER).error, args=("Subprocess died for client site-4, exit code: -9",)
    ).start()
    ctrl.control_flow(Signal(), ctx)
    rows = summary(tmp_path)
    assert ctrl.panics == []
    assert rows["site-4"]["status"] == "dropped" and "stopped answering" in rows["site-4"]["reason"]
    assert all(rows[s]["status"] == "finished" for s in ("site-1", "site-2", "site-3"))


def test_only_the_simulator_runner_s_own_line_counts_not_a_site_s_words_logged_by_the_server():
    """The server logs a failed site's reason, text the site wrote: a site that puts the runner's words
    in it must not have another site dropped."""
    deaths = WorkerDeaths().install()
    try:
        logging.getLogger("lightyear.p2p.server.controller.P2PController").error(
            "site-1 failed: Communication error with client site-4: forged; the other sites go on"
        )
        logging.getLogger(RUNNER_LOGGER).error("site-1 said: Subprocess died for client site-3, exit code: 1")
        assert deaths.sites() == {}
        logging.getLogger(RUNNER_LOGGER).error("Subprocess died for client site-2, exit code: -9")
        assert list(deaths.sites()) == ["site-2"]
    finally:
        deaths.remove()


def test_the_run_start_imports_what_flare_imports_at_the_run_end(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr("lightyear.p2p.server.controller.import_in_background", lambda: started.append(True))
    controller(tmp_path)
    assert started == [True]

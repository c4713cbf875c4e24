"""A site cut off from every neighbour (the relaying server died) stops and ends its job process; a new job
resumes from its checkpoint."""

import csv
import json
import os
import time

import numpy as np
import pytest
from nvflare.apis.event_type import EventType
from nvflare.apis.fl_constant import FLContextKey, ReturnCode
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal

from lightyear.flare import constants as C
from lightyear.p2p.methods.p2p_fedavg import P2PFedAvgExecutor
from lightyear.p2p.site import result_watch as delivery
from lightyear.p2p.site.checkpoint import load_site_checkpoint
from lightyear.p2p.site.isolation import IsolationWatch, check_max_isolated_rounds
from lightyear.p2p.site.result_watch import DeliveryWatch, delivery_grace
from lightyear.p2p.site.resume import check_resume_from

from flare_fakes import SiteEngine, context
from p2p_fakes import starting_checkpoint

TRAIN = {"local_epochs": 1, "batch_size": 64}
FULL3 = {"site-1": ["site-2", "site-3"], "site-2": ["site-1", "site-3"], "site-3": ["site-1", "site-2"]}


def test_isolation_counts_rounds_in_a_row_without_any_contact():
    watch = IsolationWatch(3)
    assert [watch.update(True, False, False) for _ in range(2)] == [False, False]
    assert watch.update(True, True, False) is False and watch.count == 0  # one model arrived: reset
    watch.update(True, False, False)
    assert watch.update(False, False, False) is False and watch.count == 1  # no neighbours this round: no change
    watch.update(True, False, True)  # a send was acknowledged: reset
    assert [watch.update(True, False, False) for _ in range(3)] == [False, False, True]
    never = IsolationWatch(None)
    assert not any(never.update(True, False, False) for _ in range(50))


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "3"])
def test_max_isolated_rounds_is_checked(value):
    with pytest.raises(ValueError, match="max_isolated_rounds"):
        check_max_isolated_rounds(value)
    with pytest.raises(ValueError, match="max_isolated_rounds"):
        P2PFedAvgExecutor(train_args=TRAIN, max_isolated_rounds=value)


@pytest.mark.parametrize(
    "value, match",
    [
        ("", "folder path"),
        (3, "folder path"),
        ("/ckpt/{job}", "only the placeholder"),
        ("/ckpt/{", "valid path"),
        ("{site:>200000000}", "written plainly"),  # would build a 200 MB string for every site
        ("/ckpt/{site!r}", "written plainly"),
        ("/ckpt/{site[0]}", "only the placeholder"),
        ("/ckpt/{}", "only the placeholder"),
        ("/ckpt/" + "a" * 5000, "5006 characters long"),
    ],
)
def test_resume_from_is_checked(value, match):
    with pytest.raises(ValueError, match=match) as err:
        check_resume_from(value)
    assert len(str(err.value)) < 300
    with pytest.raises(ValueError, match="resume_from"):
        P2PFedAvgExecutor(train_args=TRAIN, resume_from=value)
    assert check_resume_from("/ckpt/{site}/{{literal}}") == "/ckpt/{site}/{{literal}}"


class RelayEngine(SiteEngine):
    """A site's engine whose server relay can die: pings (the start handshake) are answered until
    then; after ``dies_after`` model sends every send fails, as FLARE's do with the server gone."""

    def __init__(self, run_dir, dies_after=None):
        super().__init__(run_dir)
        self.dies_after = dies_after
        self.model_sends = 0

    def before_send(self, topic, targets):
        if topic == C.TOPIC_MODEL:
            self.model_sends += 1
            if self.dies_after is not None and self.model_sends > self.dies_after:
                raise ConnectionError("cannot reach the server")


def site(**kwargs):
    ex = P2PFedAvgExecutor(train_args=TRAIN, num_threads=1, compute_slots=0, **kwargs)
    ex.site = "site-1"
    ex.peer_deadline = 0.3  # below the 1 s a job may set: keeps the test fast
    return ex


def run_task(ex, engine, rounds=4):
    task = Shareable()
    task[C.KEY_CONFIG] = {"rounds": rounds, "seed": 0, "neighbours": FULL3}
    return ex.execute(C.P2P_RUN_TASK, task, context(engine), Signal())


def test_a_site_cut_off_from_every_neighbour_stops_with_its_checkpoint_and_a_new_job_resumes(tmp_path):
    first_job = tmp_path / "site-1" / "job-a"
    first_job.mkdir(parents=True)
    ex = site(max_isolated_rounds=2)
    reply = run_task(ex, RelayEngine(str(first_job), dies_after=0))  # the server dies once the run has started
    assert reply.get_return_code() == ReturnCode.EXECUTION_EXCEPTION
    assert "no neighbour reached for 2 rounds in a row" in reply[C.KEY_ERROR] and "resume_from" in reply[C.KEY_ERROR]
    status = json.loads((first_job / "site_status.json").read_text())
    assert status["status"] == "stopped" and status["last_round"] == 1 and "stopped after round 1" in status["reason"]
    assert status["checkpoint"] == str(first_job / "site_model.npz")
    with open(first_job / "rounds.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["round"], r["isolated_rounds"], r["sent_bytes"]) for r in rows] == [("0", "1", "0"), ("1", "2", "0")]
    saved = load_site_checkpoint(str(first_job))
    assert saved.round == 1

    # the job submitted again gets a new run folder: it starts from the stopped job's checkpoint
    second_job = tmp_path / "site-1" / "job-b"
    second_job.mkdir()
    again = site(resume_from="job-a")  # relative: the previous job's run folder in this site's workspace
    started_from = []
    train = again.local_update
    again.local_update = lambda r: started_from.append((r, again.runtime.get_weights())) or train(r)
    reply = run_task(again, RelayEngine(str(second_job)))
    assert reply.get_return_code() == ReturnCode.OK and reply[C.KEY_RESULT]["last_round"] == 3
    assert [r for r, _ in started_from] == [2, 3]
    for key, value in saved.weights.items():
        np.testing.assert_array_equal(started_from[0][1][key], value)
    with open(second_job / "rounds.csv", newline="") as f:
        assert [int(r["round"]) for r in csv.DictReader(f)] == [2, 3]
    assert json.loads((second_job / "site_status.json").read_text())["status"] == "finished"


def test_resume_from_names_a_missing_checkpoint_or_another_seed(tmp_path):
    from lightyear.p2p.site.checkpoint import SiteCheckpoint, save_site_checkpoint

    run_dir = tmp_path / "ws" / "job-b"
    run_dir.mkdir(parents=True)
    meta = {"rounds": 6, "seed": 0}
    with pytest.raises(ValueError, match=r"ckpt/site-1/site_model.npz does not exist for site-1"):
        starting_checkpoint(str(run_dir), meta, "site-1", str(tmp_path / "ckpt" / "{site}"))
    save_site_checkpoint(
        str(tmp_path / "ckpt" / "site-1"), SiteCheckpoint(2, {"w": np.zeros(2)}, {"rounds": 6, "seed": 1})
    )
    with pytest.raises(ValueError, match="seed 1, this job has seed 0"):
        starting_checkpoint(str(run_dir), meta, "site-1", str(tmp_path / "ckpt" / "{site}"))
    save_site_checkpoint(
        str(tmp_path / "ckpt" / "site-1"), SiteCheckpoint(2, {"w": np.zeros(2)}, {"rounds": 4, "seed": 0})
    )
    ckpt, source = starting_checkpoint(str(run_dir), meta, "site-1", str(tmp_path / "ckpt" / "{site}"))
    assert ckpt.round == 2 and source == os.path.join(
        str(tmp_path), "ckpt", "site-1"
    )  # more rounds: the run is extended
    save_site_checkpoint(
        str(run_dir), SiteCheckpoint(4, {"w": np.ones(2)}, meta)
    )  # the job's own, newer checkpoint wins
    assert starting_checkpoint(str(run_dir), meta, "site-1", str(tmp_path / "ckpt" / "{site}"))[0].round == 4


def test_a_delivery_watch_fires_once_after_its_grace_unless_disarmed():
    fired = []
    watch = DeliveryWatch(0.05, lambda: fired.append(time.monotonic()))
    started = time.monotonic()
    watch.arm()
    time.sleep(0.3)
    assert len(fired) == 1 and fired[0] - started >= 0.05 and not watch.armed
    calm = []
    watch = DeliveryWatch(0.1, lambda: calm.append(1))
    watch.arm()
    watch.disarm()
    time.sleep(0.3)
    assert calm == [] and not watch.armed
    assert delivery_grace(20.0) == 60.0 and delivery_grace(300.0) == 300.0
    with pytest.raises(ValueError, match="positive"):
        DeliveryWatch(0, lambda: None)


class PanicEngine(RelayEngine):
    """A relay engine that also records the events a component fires (FLARE's system_panic is one)."""

    def __init__(self, run_dir, dies_after=None):
        super().__init__(run_dir, dies_after)
        self.events = []

    def fire_event(self, event_type, fl_ctx):
        self.events.append((event_type, fl_ctx.get_prop(FLContextKey.EVENT_DATA)))


@pytest.mark.parametrize("delivered", [False, True])
def test_a_site_whose_result_cannot_reach_the_server_ends_its_job_process(tmp_path, monkeypatch, delivered):
    """With the server dead, FLARE retries sending the run's result forever; the site asks FLARE to
    end its job (FATAL_SYSTEM_ERROR, which aborts the client runner) once the grace has passed,
    and does nothing when FLARE reports the result sent."""
    monkeypatch.setattr(delivery, "delivery_grace", lambda peer_deadline: 0.2)
    ex = site(max_isolated_rounds=2)
    engine = PanicEngine(str(tmp_path), dies_after=0)
    reply = run_task(ex, engine)
    assert reply.get_return_code() == ReturnCode.EXECUTION_EXCEPTION
    if delivered:
        ex.handle_event(EventType.AFTER_SEND_TASK_RESULT, engine.ctx)
    time.sleep(0.6)
    panics = [reason for event, reason in engine.events if event == EventType.FATAL_SYSTEM_ERROR]
    if delivered:
        assert panics == []
    else:
        assert len(panics) == 1 and "has not reached the server" in panics[0] and "resume_from" in panics[0]

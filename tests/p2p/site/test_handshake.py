"""The start handshake says truly why a site cannot start: neighbours that failed, that are still
starting, or that never answered; the simulator advice only where it can be the cause."""

import json
import logging
import time

import pytest
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal

from lightyear.flare import constants as C
from lightyear.flare.early_pings import quiet_early_pings
from lightyear.p2p.site.handshake import (
    MAX_REASON,
    BackgroundHandshake,
    NeighboursGone,
    handshake,
    ping_answer,
    read_answer,
)

from flare_fakes import SiteEngine, context

PEERS = ["site-2", "site-3", "site-4"]


class Peers:
    """Neighbours answering pings as given: an Answer-making function per peer (None: silent)."""

    def __init__(self, **answers):
        self.answers = {k.replace("_", "-"): v for k, v in answers.items()}
        self.pings = 0
        self.options = []

    def send_aux_request(self, targets, topic, request, timeout, fl_ctx, **kwargs):
        self.pings += 1
        self.options.append(kwargs)
        return {t: self.answers[t]() for t in targets if self.answers.get(t) is not None}


def failed(reason):
    return lambda: ping_answer("failed", reason, ready=False)


def starting():
    return ping_answer("starting", "", ready=False)


def ready():
    return ping_answer("ready", "", ready=True)


def run(peers, timeout=0.6, logs=None):
    log = (lambda level, msg: logs.append((level, msg))) if logs is not None else (lambda *a: None)
    return handshake(peers, None, PEERS, timeout, abort=lambda: False, log=log, pause=0.05)


def test_every_neighbour_failed_stops_at_once_naming_their_reasons_without_simulator_advice():
    peers = Peers(
        site_2=failed("site-2: ValueError: resume_from='job-a': /ws/site-2/job-a/site_model.npz does not exist"),
        site_3=failed("site-3: CheckpointError: damaged"),
        site_4=lambda: ping_answer("stopped", "isolated", False),
    )
    start = time.monotonic()
    with pytest.raises(NeighboursGone) as err:
        run(peers, timeout=30)
    assert time.monotonic() - start < 5 and peers.pings == 1  # no waiting for the timeout
    message = str(err.value)
    assert "every neighbour's run ended before it was ready" in message
    assert (
        "site-2's run failed: site-2: ValueError: resume_from='job-a'" in message
        and "site-4's run stopped: isolated" in message
    )
    assert "-t " not in message and "simulator" not in message


def test_silent_neighbours_get_the_simulator_advice():
    with pytest.raises(RuntimeError) as err:
        run(Peers())
    assert "site-2 did not answer (it is not running this job)" in str(err.value)
    assert "-t 4" in str(err.value) and "-gpu " in str(err.value)


def test_answering_but_never_ready_names_ready_timeout_not_the_simulator():
    with pytest.raises(RuntimeError) as err:
        run(Peers(site_2=failed("broken"), site_3=starting, site_4=lambda: make_reply(ReturnCode.TOPIC_UNKNOWN)))
    message = str(err.value)
    assert not isinstance(err.value, NeighboursGone)
    assert (
        "site-2's run failed: broken" in message
        and "site-3 runs this job but was not ready within ready_timeout=0.6 s" in message
    )
    assert "site-4 runs this job" in message and "-t " not in message


def test_ready_neighbours_go_on_without_those_that_ended():
    logs = []
    peers = Peers(site_2=ready, site_3=ready, site_4=failed("out of memory"))
    start = time.monotonic()
    assert run(peers, timeout=30, logs=logs) == ["site-4"]
    assert time.monotonic() - start < 5
    assert logs == [("warning", "going on without site-4's run failed: out of memory")]


def test_a_neighbours_answer_is_read_as_hostile_input():
    reply = make_reply(ReturnCode.OK)
    reply.update({"state": "ready\nnow", "ready": "yes", "reason": "x" * 10_000})
    assert read_answer(reply).state == "starting"  # an unknown state with no real "ready": not ready
    reply.update({"state": "failed", "reason": "line one\nline two\x00" + "y" * 10_000})
    answer = read_answer(reply)
    assert answer.state == "failed" and "\n" not in answer.reason and len(answer.reason) == MAX_REASON
    assert answer.reason.startswith("line one line two?")
    old_peer = make_reply(ReturnCode.OK)
    old_peer["ready"] = True  # a peer of an earlier version
    assert read_answer(old_peer).state == "ready"
    assert read_answer(None).state == read_answer(make_reply(ReturnCode.COMMUNICATION_ERROR)).state == "silent"


class FailedNeighbours(SiteEngine):
    """A site's engine whose neighbours' runs have all failed (their pings say so)."""

    def send_aux_request(self, targets, topic, request, timeout, fl_ctx, optional=False, secure=False):
        if topic == C.TOPIC_PING:
            return {
                t: ping_answer("failed", f"{t}: ValueError: resume_from='job-a': no checkpoint", False) for t in targets
            }
        return super().send_aux_request(targets, topic, request, timeout, fl_ctx, optional, secure)


def test_a_healthy_site_whose_neighbours_failed_stops_saying_so_and_a_failed_site_answers_why(tmp_path):
    from lightyear.p2p.methods.p2p_fedavg import P2PFedAvgExecutor

    graph = {"site-1": ["site-2", "site-3"], "site-2": ["site-1", "site-3"], "site-3": ["site-1", "site-2"]}
    task = Shareable()
    task[C.KEY_CONFIG] = {"rounds": 2, "seed": 0, "neighbours": graph}
    healthy = P2PFedAvgExecutor(
        train_args={"local_epochs": 1, "batch_size": 64}, num_threads=1, compute_slots=0, ready_timeout=60
    )
    healthy.site = "site-1"
    reply = healthy.execute(C.P2P_RUN_TASK, task, context(FailedNeighbours(str(tmp_path))), Signal())
    error = reply[C.KEY_ERROR]
    assert error.startswith("site-1: every neighbour's run ended before it was ready")
    assert "site-2's run failed: site-2: ValueError: resume_from='job-a'" in error and "-t 3" not in error
    assert json.loads((tmp_path / "site_status.json").read_text())["status"] == "stopped"

    broken = P2PFedAvgExecutor(
        train_args={"local_epochs": 1, "batch_size": 64}, num_threads=1, compute_slots=0, resume_from="job-a"
    )
    broken.site = "site-2"
    assert read_answer(broken._on_ping(C.TOPIC_PING, Shareable(), None)).state == "starting"
    run_dir = tmp_path / "site-2" / "job-b"
    run_dir.mkdir(parents=True)
    reply = broken.execute(C.P2P_RUN_TASK, task, context(SiteEngine(str(run_dir)), "site-2"), Signal())
    assert reply.get_return_code() == ReturnCode.EXECUTION_EXCEPTION
    answer = read_answer(broken._on_ping(C.TOPIC_PING, Shareable(), None))
    assert answer.state == "failed" and "does not exist for site-2" in answer.reason


def test_the_background_handshake_returns_at_once_and_join_waits_for_the_neighbours():
    """The first round trains while the neighbours start: building the handshake does not wait,
    join() does, and gives the neighbours that were not ready."""
    state = {"site-2": starting, "site-3": starting, "site-4": None}
    peers = Peers(site_2=lambda: state["site-2"](), site_3=lambda: state["site-3"](), site_4=None)
    t0 = time.monotonic()
    greeting = BackgroundHandshake(peers, None, PEERS, 1.5, abort=lambda: False, log=lambda *a: None)
    assert time.monotonic() - t0 < 0.2  # the site goes on to train
    time.sleep(0.3)
    state["site-2"] = state["site-3"] = ready
    assert greeting.join() == ["site-4"]  # silent: not waited for


def test_the_background_handshake_hands_its_error_to_join():
    peers = Peers(site_2=failed("gone"), site_3=failed("gone"), site_4=failed("gone"))
    greeting = BackgroundHandshake(peers, None, PEERS, 30, abort=lambda: False, log=lambda *a: None)
    with pytest.raises(NeighboursGone, match="every neighbour's run ended"):
        greeting.join()


def test_a_ping_is_an_optional_message_so_a_peer_without_its_handler_logs_no_stream_error():
    peers = Peers(site_2=ready, site_3=ready, site_4=ready)
    assert run(peers) == []
    assert peers.options and all(o.get("optional") is True for o in peers.options)


def test_a_ping_before_the_handler_is_registered_is_no_error_line_and_other_unknown_topics_still_are(caplog):
    from nvflare.apis.fl_context import FLContext
    from nvflare.private.aux_runner import AuxRunner

    quiet_early_pings()
    quiet_early_pings()  # once per process, however many sites it runs
    runner = AuxRunner(None)
    with caplog.at_level(logging.INFO):
        assert (
            runner._process_request(C.TOPIC_PING, Shareable(), FLContext()).get_return_code()
            == ReturnCode.TOPIC_UNKNOWN
        )
        runner._process_request("someone.else", Shareable(), FLContext())
    unknown = [r for r in caplog.records if "unknown aux message topic" in r.getMessage()]
    assert [(r.levelname, r.getMessage().split(": ", 1)[-1]) for r in unknown] == [
        ("ERROR", "received unknown aux message topic someone.else")
    ]
    assert len(logging.getLogger("nvflare.private.aux_runner.AuxRunner").filters) == 1


def test_the_senders_stream_error_of_an_early_ping_is_no_warning_line_and_other_stream_errors_still_are(caplog):
    quiet_early_pings()
    streamer = logging.getLogger("nvflare.fuel.f3.streaming.byte_streamer")
    early = (
        "Late stream error: stream_id=7 channel=aux_communication topic=lightyear.ping sender=site-1 "
        "failed_destination=site-2: RxTask(7) No callback is registered for aux_communication/lightyear.ping"
    )
    other = early.replace("lightyear.ping", "lightyear.model")
    with caplog.at_level(logging.INFO):
        streamer.warning(early)
        streamer.warning(other)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [("WARNING", other)]

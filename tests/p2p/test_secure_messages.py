"""``secure_messages``: the choice reaches every model send, ``auto`` follows FLARE's secure mode,
and ``true`` where encryption is unavailable stops the run at its start with the reason."""

import threading
import time

import pytest
from nvflare.apis.client import Client
from nvflare.apis.controller_spec import ClientTask
from nvflare.apis.fl_constant import FLContextKey, ReservedKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal

from lightyear.flare import constants as C
from lightyear.p2p.methods.p2p_fedavg import P2PFedAvgExecutor
from lightyear.p2p.secure_messages import check_setting, resolve
from lightyear.p2p.server.controller import P2PController

from flare_fakes import ServerEngine, SiteEngine, context

TRAIN = {"local_epochs": 1, "batch_size": 64}
SITES = ["site-1", "site-2"]


def run_site(tmp_path, setting, secure_mode, engine=None):
    """One site runs one round against one neighbour (who never sends back) with the setting the server sent."""
    ex = P2PFedAvgExecutor(train_args=TRAIN, num_threads=1, compute_slots=0)
    ex.peer_deadline = 0.3  # below the 1 s a job may set: keeps the test fast
    ex.site = "site-1"
    engine = engine or SiteEngine(str(tmp_path))
    ctx = context(engine)
    ctx.set_prop(FLContextKey.SECURE_MODE, secure_mode, private=True, sticky=True)
    task = Shareable()
    task[C.KEY_CONFIG] = {
        "rounds": 1,
        "seed": 0,
        "neighbours": {"site-1": ["site-2"], "site-2": ["site-1"]},
        "secure_messages": setting,
    }
    reply = ex.execute(C.P2P_RUN_TASK, task, ctx, Signal())
    run_site.engine, run_site.executor = engine, ex
    return reply, [(topic, secure) for topic, _, _, secure in engine.sent]


@pytest.mark.parametrize("setting", [True, False])
def test_the_servers_choice_reaches_every_model_send(tmp_path, setting):
    reply, sends = run_site(tmp_path, setting, secure_mode=True)
    assert reply.get_return_code() == ReturnCode.OK
    models = [secure for topic, secure in sends if topic == C.TOPIC_MODEL]
    assert models and all(secure is setting for secure in models)


def test_a_site_without_secure_mode_refuses_to_send_in_the_clear_when_told_to_encrypt(tmp_path):
    reply, sends = run_site(tmp_path, True, secure_mode=False)
    assert reply.get_return_code() == ReturnCode.EXECUTION_EXCEPTION
    assert "secure_messages=true, but site-1 does not run in FLARE's secure mode" in reply[C.KEY_ERROR]
    assert not [s for s in sends if s[0] == C.TOPIC_MODEL]  # no model left the site


def test_auto_follows_the_deployment_and_bad_values_are_refused():
    assert resolve("auto", True, "x") is True and resolve("auto", False, "x") is False
    assert resolve(False, True, "x") is False and resolve(True, True, "x") is True
    with pytest.raises(RuntimeError, match="generate it with --set secure_messages=auto"):
        resolve(True, False, "the server")
    for bad in ("yes", 1, None, "true"):
        with pytest.raises(ValueError, match='secure_messages must be "auto", true or false'):
            check_setting(bad)
    with pytest.raises(ValueError, match="secure_messages"):
        P2PController(secure_messages="on")


def run_controller(tmp_path, setting, secure_mode):
    """The server's run with two sites that finish at once; returns (config sent, panics, summary rows)."""
    import json

    ctrl = P2PController(rounds=1, peer_deadline=1.0, liveness_interval=1.0, run_timeout=30, secure_messages=setting)
    ctx = FLContext()
    ctx.set_prop(ReservedKey.ENGINE, ServerEngine(str(tmp_path), SITES), private=True, sticky=False)
    ctx.set_prop(FLContextKey.SECURE_MODE, secure_mode, private=True, sticky=True)
    ctrl.start_controller(ctx)
    panics, sent = [], []
    ctrl.system_panic = lambda reason, fl_ctx: panics.append(reason)

    def broadcast(task, fl_ctx, targets, min_responses, **kw):
        sent.append(task.data[C.KEY_CONFIG])
        for site in targets:
            task.client_tasks.append(ClientTask(Client(site, None), task))

        def finish():
            time.sleep(0.05)
            for ct in task.client_tasks:
                ct.result = make_reply(ReturnCode.OK)
                ct.result[C.KEY_RESULT] = {
                    "site": ct.client.name,
                    "malfunction": "none",
                    "last_round": 0,
                    "test": {"acc": 0.5},
                }
                ctrl._on_result(ct, ctx)

        threading.Thread(target=finish, daemon=True).start()

    ctrl.broadcast = broadcast
    ctrl.control_flow(Signal(), ctx)
    rows = {r["site"]: r for r in json.loads((tmp_path / "summary.json").read_text())}
    return sent, panics, rows


def test_the_server_sends_the_resolved_choice_with_the_run(tmp_path):
    sent, panics, rows = run_controller(tmp_path, "auto", secure_mode=True)
    assert panics == [] and sent[0]["secure_messages"] is True
    assert all(rows[s]["status"] == "finished" for s in SITES)


def test_required_encryption_in_an_insecure_deployment_stops_the_run_at_its_start(tmp_path):
    sent, panics, rows = run_controller(tmp_path, True, secure_mode=False)
    assert sent == []  # no site was started
    assert len(panics) == 1 and "the server does not run in FLARE's secure mode" in panics[0]
    for site in SITES:
        assert rows[site]["status"] == "dropped" and "secure_messages=true" in rows[site]["reason"]


def model_frame(encrypted: bool, sid: int, size: int = 4096):
    """One frame of a model message from site-2 as it reaches site-1's cell, before FLARE decrypts it."""
    from nvflare.fuel.f3.cellnet.defs import CellChannel, MessageHeaderKey
    from nvflare.fuel.f3.message import Message
    from nvflare.fuel.f3.streaming.stream_const import STREAM_CHANNEL, STREAM_DATA_TOPIC, StreamHeaderKey

    headers = {
        MessageHeaderKey.ORIGIN: "site-2.job",
        MessageHeaderKey.DESTINATION: "site-1.job",
        MessageHeaderKey.CHANNEL: STREAM_CHANNEL,
        MessageHeaderKey.TOPIC: STREAM_DATA_TOPIC,
        StreamHeaderKey.CHANNEL: CellChannel.AUX_COMMUNICATION,
        StreamHeaderKey.TOPIC: C.TOPIC_MODEL,
        StreamHeaderKey.STREAM_ID: sid,
        StreamHeaderKey.SIZE: size,
    }
    if encrypted:
        headers.update({MessageHeaderKey.SECURE: True, MessageHeaderKey.ENCRYPTED: True})
    return Message(headers, b"x" * 4096)


@pytest.mark.parametrize("setting", [True, False])
def test_a_site_told_to_encrypt_refuses_model_messages_that_arrive_unencrypted(tmp_path, setting):
    """FLARE passes a plain message to a secure site's handler unmarked; the site's cell refuses it
    before FLARE decodes it (lightyear.p2p.wire.cell_gate), and takes an encrypted one."""
    from nvflare.fuel.f3.cellnet.defs import MessageHeaderKey

    reply, _ = run_site(tmp_path, setting, secure_mode=True)
    assert reply.get_return_code() == ReturnCode.OK
    cell = run_site.engine.cell
    plain = cell.deliver(model_frame(encrypted=False, sid=1))
    if setting:
        assert plain is not None and "not encrypted, and secure_messages=true refuses" in plain.get_header(
            MessageHeaderKey.ERROR
        )
        assert cell.rejected and "not encrypted" in cell.rejected[0][1]  # its sender is told
    else:
        assert plain is None
    assert cell.deliver(model_frame(encrypted=True, sid=2)) is None


def test_a_site_that_cannot_check_encryption_refuses_to_run_when_told_to_encrypt(tmp_path):
    class NoCell(SiteEngine):
        def get_cell(self):
            return None

    reply, sends = run_site(tmp_path, True, secure_mode=True, engine=NoCell(str(tmp_path)))
    assert reply.get_return_code() == ReturnCode.EXECUTION_EXCEPTION
    assert "could not refuse model messages that arrive unencrypted" in reply[C.KEY_ERROR]
    assert not [s for s in sends if s[0] == C.TOPIC_MODEL]
    reply, _ = run_site(tmp_path / "plain", False, secure_mode=True, engine=NoCell(str(tmp_path)))
    assert reply.get_return_code() == ReturnCode.OK  # without encryption the gate is a bound, not a must


def test_a_running_site_bounds_what_a_peer_sends_by_its_own_models_size(tmp_path):
    """Before FLARE buffers and deserialises a model message, its declared size is held to the site's
    own model (payload_limit: twice its bytes plus framing), whatever secure_messages says."""
    from nvflare.fuel.f3.cellnet.defs import MessageHeaderKey

    from lightyear.p2p.wire.cell_gate import PRE_RUN_LIMIT
    from lightyear.p2p.wire.payload import payload_limit

    reply, _ = run_site(tmp_path, False, secure_mode=True)
    assert reply.get_return_code() == ReturnCode.OK
    limit = payload_limit(run_site.executor.runtime.get_weights())
    assert limit > PRE_RUN_LIMIT  # the bound the run opened with, not the one before it
    cell = run_site.engine.cell
    assert cell.deliver(model_frame(encrypted=False, sid=1, size=limit)) is None
    refused = cell.deliver(model_frame(encrypted=False, sid=2, size=limit + 1))
    assert refused is not None and f"{limit + 1} bytes, more than the {limit} bytes" in refused.get_header(
        MessageHeaderKey.ERROR
    )
    assert [sid for sid, _ in cell.rejected] == [2]  # the sender is told

"""The server's fan-out: a model crosses each link once, and what a site sends it can neither
pose as another site, reach a site that is not its out-neighbour, make the server hold more than
its bound, nor stall the other receivers."""

import threading
import time

import numpy as np
import pytest

from lightyear.flare import constants as C
from lightyear.p2p.server import model_relay
from lightyear.p2p.server.model_relay import NOT_READY, OK, REFUSED, ModelRelay

GRAPH = {"site-1": ["site-2", "site-3"], "site-2": ["site-1", "site-3"], "site-3": ["site-1"]}
MODEL = {"w": np.ones(100, dtype=np.float32)}  # 400 bytes


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(model_relay, "RETRY_S", 0.05)  # a receiver not ready is tried again sooner


class Receivers:
    """The send function the relay is given: records what each site got; ``answers`` sets a site's reply."""

    def __init__(self, answers=None):
        self.got: dict[str, list[dict]] = {}
        self.answers = dict(answers or {})
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, targets, topic, message, timeout):
        assert topic == C.TOPIC_FORWARD
        codes = {}
        with self.lock:
            self.calls += 1
            for site in targets:
                code = self.answers.get(site, OK)
                if callable(code):
                    code = code()
                if code == "dead":
                    continue
                codes[site] = code
                if code == OK:
                    self.got.setdefault(site, []).append(dict(message))
        if len(codes) < len(targets):  # a dead receiver holds the broadcast for its timeout
            time.sleep(min(timeout, 0.2))
        return codes


def relay(deadline=2.0, answers=None, declare=True):
    logs = []
    receivers = Receivers(answers)
    r = ModelRelay(GRAPH, 5, deadline, 1.0, receivers, lambda level, text: logs.append((level, text)))
    if declare:
        for site in GRAPH:
            assert r.on_declare(r.tokens[site], 1000)[0] == OK
    r.logs, r.receivers = logs, receivers
    return r


def upload(r, site, targets, round_num=0, weights=MODEL, token=None, claimed=None, **extra):
    message = {C.KEY_ROUND: round_num, C.KEY_WEIGHTS: weights, C.KEY_TARGETS: targets, **extra}
    return r.on_upload(r.tokens[site] if token is None else token, message, claimed)


def settle(r, timeout=5.0):
    deadline = time.monotonic() + timeout
    while r.in_flight_bytes() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_one_upload_reaches_every_named_receiver_once_and_names_its_sender():
    r = relay()
    assert upload(r, "site-1", ["site-2", "site-3"]) == (OK, "", ["site-2", "site-3"])
    settle(r)
    for site in ("site-2", "site-3"):
        (got,) = r.receivers.got[site]
        assert got[C.KEY_SENDER] == "site-1" and got[C.KEY_ROUND] == 0
        np.testing.assert_array_equal(got[C.KEY_WEIGHTS]["w"], MODEL["w"])
    assert r.counts.uploads == 1 and r.counts.forwarded == 2
    assert r.counts.bytes_in == 400 and r.counts.bytes_out == 800
    assert r.in_flight_bytes() == 0  # the model is let go once handed on


def test_the_sender_is_the_site_whose_token_it_carries_whatever_it_claims():
    r = relay()
    code, _, _ = upload(r, "site-3", ["site-1"], claimed="site-2")  # site-3 poses as site-2
    assert code == OK
    settle(r)
    assert r.receivers.got["site-1"][0][C.KEY_SENDER] == "site-3"
    code, why, taken = upload(r, "site-3", ["site-1"], token="guessed", claimed="site-2")
    assert (code, taken) == (REFUSED, []) and "no valid token" in why
    code, why, _ = upload(r, "site-3", ["site-1"], token=None or 12345)
    assert code == REFUSED


def test_a_site_reaches_only_its_out_neighbours_in_the_runs_rounds():
    r = relay()
    code, why, _ = upload(r, "site-3", ["site-1", "site-2"])  # site-2 is not an out-neighbour of site-3
    assert code == REFUSED and "'site-2'" in why and "not its out-neighbours" in why
    for bad_round in (5, -1, True, "0", 2**70):
        assert upload(r, "site-1", ["site-2"], round_num=bad_round)[0] == REFUSED
    for bad_targets in ([], "site-2", [3], None):
        assert upload(r, "site-1", bad_targets)[0] == REFUSED
    assert upload(r, "site-1", ["site-2"], weights="not a model")[0] == REFUSED
    code, why, _ = upload(r, "site-1", ["site-2"], weights={"w": {"hidden": np.zeros(10**6)}})
    assert code == REFUSED and "its entry 'w' is dict, not an array" in why  # nothing the bound does not count
    settle(r)
    assert r.receivers.got == {} and r.counts.uploads == 0


def test_a_receiver_gets_one_model_per_sender_and_round():
    r = relay()
    assert upload(r, "site-1", ["site-2"])[2] == ["site-2"]
    code, _, taken = upload(r, "site-1", ["site-2", "site-3"], weights={"w": np.zeros(100, np.float32)})
    assert code == OK and taken == ["site-3"]  # site-2 already has site-1's model of round 0
    settle(r)
    assert len(r.receivers.got["site-2"]) == 1 and r.receivers.got["site-2"][0][C.KEY_WEIGHTS]["w"][0] == 1
    assert any("second model for round 0" in text for _, text in r.logs)
    assert upload(r, "site-1", ["site-2"], round_num=1)[2] == ["site-2"]  # the next round is a new one


def test_only_the_models_keys_are_handed_on():
    r = relay()
    upload(r, "site-1", ["site-2"], **{C.KEY_NUM_SAMPLES: 12, C.KEY_PAYLOAD: "float32", "extra": "x" * 100})
    settle(r)
    got = r.receivers.got["site-2"][0]
    assert set(got) == {C.KEY_ROUND, C.KEY_WEIGHTS, C.KEY_PAYLOAD, C.KEY_NUM_SAMPLES, C.KEY_SENDER}


def test_uploads_wait_for_a_majority_of_declarations_and_are_bounded_by_their_median():
    r = relay(declare=False)
    bounds = []
    r.on_bound = bounds.append
    assert r.on_declare(r.tokens["site-1"], 10**12)[0] == OK  # a hostile site declares a huge limit
    assert upload(r, "site-1", ["site-2"])[0] == NOT_READY  # 1 of 3 declared: no bound yet
    assert r.on_declare(r.tokens["site-2"], 1000)[0] == OK
    assert r.bound == 1000 and bounds == [1000]  # the lower median of two: the honest one
    assert r.on_declare(r.tokens["site-3"], 1000)[0] == OK and r.bound == 1000
    assert r.on_declare(r.tokens["site-2"], 10**12)[0] == OK and r.bound == 1000  # the first declaration stays
    code, why, _ = upload(r, "site-1", ["site-2"], weights={"w": np.zeros(1000, np.float32)})
    assert code == REFUSED and "more than the 1000 bytes" in why
    assert r.on_declare("forged", 5)[0] == REFUSED
    for bad in (0, -1, 2**41, 1.5, True, "1000"):
        assert r.on_declare(r.tokens["site-1"], bad)[0] == REFUSED


def test_a_receiver_not_ready_yet_is_tried_again_and_a_dead_one_stalls_no_other():
    tries = iter([NOT_READY, NOT_READY, OK])
    r = relay(deadline=1.0, answers={"site-2": lambda: next(tries), "site-3": "dead"})
    start = time.monotonic()
    upload(r, "site-1", ["site-2"])
    upload(r, "site-2", ["site-1"])
    upload(r, "site-3", ["site-1"])
    upload(r, "site-1", ["site-3"], round_num=1)
    deadline = time.monotonic() + 0.5
    while len(r.receivers.got.get("site-1", [])) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(r.receivers.got["site-1"]) == 2 and time.monotonic() - start < 0.5  # not held by site-3
    settle(r)
    assert len(r.receivers.got["site-2"]) == 1  # taken on the third try
    assert r.counts.undelivered == 1 and r.in_flight_bytes() == 0  # site-3 given up at the deadline
    assert any("could not hand the model of site-1 to ['site-3']" in text for _, text in r.logs)


def test_a_site_cannot_make_the_server_hold_more_than_two_uploads_per_receiver():
    r = relay(deadline=5.0, answers={"site-1": "dead"})
    taken = [upload(r, "site-3", ["site-1"], round_num=k)[0] for k in range(4)]
    assert taken == [OK, OK, NOT_READY, NOT_READY]  # site-3 has one out-neighbour
    assert r.in_flight_bytes() == 800
    r.stop()


def test_a_newer_model_stops_the_older_ones_forwarding_when_the_sender_says_so():
    r = relay(deadline=5.0, answers={"site-1": "dead"})
    upload(r, "site-3", ["site-1"], round_num=0)
    upload(r, "site-3", ["site-1"], round_num=1, **{C.KEY_SUPERSEDES: True})
    time.sleep(0.3)  # the older one's send under way when it was stopped ends (a dead receiver: 0.2 s)
    assert r.in_flight_bytes() == 400  # only the newest is held
    r.stop()


def test_the_route_is_the_server_unless_the_job_asks_for_direct_or_sends_no_model():
    assert model_relay.resolve_route("auto", "full") == "server"
    assert model_relay.resolve_route("direct", "ring") == "direct"
    assert model_relay.resolve_route("server", "none") == "direct"
    with pytest.raises(ValueError, match='model_route must be "auto", "server"'):
        model_relay.check_route("relay")


def start_run(tmp_path, secure_mode: bool, model_route: str):
    """The controller's start with a fake engine: (the config each site's run task carries, panics)."""
    from nvflare.apis.client import Client
    from nvflare.apis.controller_spec import ClientTask
    from nvflare.apis.fl_constant import FLContextKey, ReservedKey
    from nvflare.apis.fl_context import FLContext
    from nvflare.apis.signal import Signal

    from lightyear.p2p.server.controller import P2PController

    from flare_fakes import ServerEngine

    sites = list(GRAPH)
    ctrl = P2PController(rounds=2, peer_deadline=1.0, run_timeout=1.0, model_route=model_route)
    ctx = FLContext()
    ctx.set_prop(ReservedKey.ENGINE, ServerEngine(str(tmp_path), sites), private=True, sticky=False)
    ctx.set_prop(FLContextKey.SECURE_MODE, secure_mode, private=True, sticky=True)
    ctrl.start_controller(ctx)
    configs, panics = {}, []
    ctrl.system_panic = lambda reason, fl_ctx: panics.append(reason)
    ctrl.cancel_task = lambda task, fl_ctx=None, **kw: None

    def broadcast(task, fl_ctx, targets, min_responses, **kw):
        for site in targets:
            configs[site] = task.data[C.KEY_CONFIG]
            task.client_tasks.append(ClientTask(Client(site, None), task))

    ctrl.broadcast = broadcast
    ctrl.control_flow(Signal(), ctx)
    ctrl.stop_controller(ctx)
    return configs, panics, ctrl


def test_each_site_gets_its_own_token_with_its_run_and_only_the_relay_knows_whose_it_is(tmp_path):
    configs, panics, ctrl = start_run(tmp_path, secure_mode=False, model_route="auto")
    assert panics == [] and sorted(configs) == sorted(GRAPH)
    tokens = {site: config["token"] for site, config in configs.items()}
    assert len(set(tokens.values())) == len(GRAPH) and all(len(t) == 32 for t in tokens.values())
    assert all(config["model_route"] == "server" for config in configs.values())
    assert {site: ctrl.relay.site_of(token) for site, token in tokens.items()} == {s: s for s in GRAPH}


def test_with_end_to_end_encryption_models_go_through_the_server_sealed_or_direct_if_asked(tmp_path):
    configs, panics, ctrl = start_run(tmp_path, secure_mode=True, model_route="auto")
    assert panics == [] and ctrl.relay.sealed
    assert all(c["model_route"] == "server" and c["secure_messages"] is True and c["token"] for c in configs.values())
    configs, panics, ctrl = start_run(tmp_path, secure_mode=True, model_route="direct")
    assert panics == [] and ctrl.relay is None
    assert all(c["model_route"] == "direct" and c["token"] is None for c in configs.values())


SEAL = {"nonce": b"n" * 12, "signature": b"s" * 256, "wrapped": {"site-2": b"k2" * 128, "site-3": b"k3" * 128}}
SEALED = {"sealed": np.zeros(400, dtype=np.uint8)}


def sealed_relay():
    r = ModelRelay(GRAPH, 5, 2.0, 1.0, Receivers(), lambda level, text: None, sealed=True)
    r.receivers = r.send
    for site in GRAPH:
        assert r.on_declare(r.tokens[site], 1000, certificate=f"cert of {site}".encode())[0] == OK
    return r


def test_a_sealed_run_hands_on_the_seal_with_the_receivers_keys_and_the_senders_certificate():
    r = sealed_relay()
    assert upload(r, "site-1", ["site-2"], weights=SEALED, **{C.KEY_SEAL: SEAL})[0] == OK
    settle(r)
    (got,) = r.receivers.got["site-2"]
    assert got[C.KEY_SEAL] == {
        "nonce": SEAL["nonce"],
        "signature": SEAL["signature"],
        "wrapped": {"site-2": b"k2" * 128},
    }
    assert got[C.KEY_CERTIFICATE] == b"cert of site-1" and got[C.KEY_SENDER] == "site-1"


@pytest.mark.parametrize(
    "weights, seal, why",
    [
        (MODEL, SEAL, "not a sealed model"),
        (SEALED, None, "no seal"),
        (SEALED, dict(SEAL, nonce=b"short"), "without a 12-byte nonce"),
        (SEALED, dict(SEAL, signature=b"s" * 5000), "without a signature"),
        (SEALED, dict(SEAL, wrapped={"site-2": b"k"}), "no key wrapped for site-3"),
        (SEALED, dict(SEAL, wrapped={"site-2": b"k", "site-3": "text"}), "key for site-3 is not a short byte string"),
    ],
)
def test_a_sealed_run_refuses_an_upload_that_is_not_a_well_formed_sealed_model(weights, seal, why):
    r = sealed_relay()
    code, reason, taken = upload(r, "site-1", ["site-2", "site-3"], weights=weights, **{C.KEY_SEAL: seal})
    assert code == REFUSED and why in reason and taken == []


def test_a_sealed_run_takes_a_declaration_only_with_a_certificate_and_gives_out_only_out_neighbours_certificates():
    r = ModelRelay(GRAPH, 5, 2.0, 1.0, Receivers(), lambda level, text: None, sealed=True)
    assert r.on_declare(r.tokens["site-1"], 1000)[0] == REFUSED
    assert r.on_declare(r.tokens["site-1"], 1000, certificate=b"x" * (1 << 17))[0] == REFUSED
    for site in ("site-1", "site-2"):
        assert r.on_declare(r.tokens[site], 1000, certificate=f"cert of {site}".encode())[0] == OK
    # site-3 sends to site-1 alone; site-3 never declared
    assert r.on_certificates(r.tokens["site-3"], ["site-1", "site-2"]) == (OK, "", {"site-1": b"cert of site-1"})
    assert r.on_certificates(r.tokens["site-1"], ["site-2", "site-3"]) == (OK, "", {"site-2": b"cert of site-2"})
    assert r.on_certificates("forged", ["site-1"])[0] == REFUSED
    assert r.on_certificates(r.tokens["site-1"], "site-2")[0] == REFUSED


def test_the_server_returns_freed_memory_once_it_holds_no_model():
    r = relay()
    idle = []
    r.on_idle = lambda: idle.append(r.in_flight_bytes())
    upload(r, "site-1", ["site-2", "site-3"])
    settle(r)
    time.sleep(0.05)
    assert idle == [0]


def test_a_receiver_that_stays_not_ready_is_tried_less_and_less_often(monkeypatch):
    monkeypatch.setattr(model_relay, "MAX_RETRY_S", 0.2)
    r = relay(deadline=1.2, answers={"site-2": NOT_READY})
    upload(r, "site-1", ["site-2"])
    settle(r)
    # tries after 0, 0.05, 0.15, 0.35, 0.55, 0.75, 0.95, 1.15 s: 8, not the 24 of a try every 0.05 s
    assert 5 <= r.receivers.calls <= 12 and r.counts.undelivered == 1


class SlowReceivers(Receivers):
    """Receivers that take ``hold`` seconds to take a model (``hang`` for ``hung`` ones) and record the most
    models each was handed at once."""

    def __init__(self, hold, hung=(), hang=1.0):
        super().__init__()
        self.hold, self.hung, self.hang = hold, set(hung), hang
        self.now: dict[str, int] = {}
        self.most: dict[str, int] = {}

    def __call__(self, targets, topic, message, timeout):
        with self.lock:
            for site in targets:
                self.now[site] = self.now.get(site, 0) + 1
                self.most[site] = max(self.most.get(site, 0), self.now[site])
        time.sleep(min(timeout, self.hang) if self.hung & set(targets) else self.hold)
        with self.lock:
            for site in targets:
                self.now[site] -= 1
        live = [t for t in targets if t not in self.hung]
        codes = super().__call__(live, topic, message, timeout) if live else {}
        return codes


def test_a_receiver_is_handed_a_few_models_at_a_time_and_a_hung_one_holds_up_no_other():
    sites = [f"site-{k}" for k in range(1, 7)]
    graph = {s: [t for t in sites if t != s] for s in sites}  # full mesh: each receiver has 5 senders
    receivers = SlowReceivers(hold=0.05, hung=["site-6"], hang=1.0)
    r = ModelRelay(graph, 5, 3.0, 2.0, receivers, lambda level, text: None)
    for site in sites:
        r.on_declare(r.tokens[site], 1000)
    start = time.monotonic()
    for site in sites:
        assert r.on_upload(r.tokens[site], {C.KEY_ROUND: 0, C.KEY_WEIGHTS: MODEL, C.KEY_TARGETS: graph[site]})[0] == OK
    deadline = time.monotonic() + 2.0
    while sum(len(receivers.got.get(s, [])) for s in sites[:5]) < 25 and time.monotonic() < deadline:
        time.sleep(0.01)
    took = time.monotonic() - start
    r.stop()
    assert all(len(receivers.got.get(s, [])) == 5 for s in sites[:5]) and took < 0.9  # not held by site-6's 1 s
    assert max(receivers.most.values()) == model_relay.DELIVERIES_PER_RECEIVER


def test_a_send_that_fails_is_tried_again_and_said_once():
    r = relay()
    failures = iter([ConnectionError("link down"), ConnectionError("link down")])
    send = r.send

    def flaky(targets, topic, message, timeout):
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return send(targets, topic, message, timeout)

    r.send = flaky
    upload(r, "site-3", ["site-1"])
    settle(r)
    assert len(r.receivers.got["site-1"]) == 1 and r.counts.undelivered == 0
    said = [text for _, text in r.logs if "forwarding the model of site-3 to site-1 failed" in text]
    assert said == ["forwarding the model of site-3 to site-1 failed (ConnectionError: link down)"]


def test_a_receiver_keeps_its_deliveries_whatever_one_send_answers():
    # sends that answer no dict at all: tried again, and the receiver's worker goes on to its next model
    r = relay()
    answers, send = iter([None, "not a dict"]), r.send

    def odd(*args):
        answer = next(answers, OK)
        return send(*args) if answer == OK else answer

    r.send = odd
    upload(r, "site-2", ["site-1"])
    settle(r)
    upload(r, "site-3", ["site-1"])
    settle(r)
    assert len(r.receivers.got["site-1"]) == 2 and r.counts.undelivered == 0


def test_a_model_the_receiver_refuses_is_not_sent_again():
    r = relay(answers={"site-1": REFUSED})
    upload(r, "site-3", ["site-1"])
    settle(r)
    time.sleep(0.2)  # four retry periods
    assert r.receivers.calls == 1 and r.counts.undelivered == 1 and r.in_flight_bytes() == 0


def test_stopping_gives_up_every_delivery_not_made():
    r = relay(deadline=5.0, answers={"site-1": NOT_READY})
    upload(r, "site-3", ["site-1"])
    time.sleep(0.05)
    r.stop()
    assert r.counts.undelivered == 1 and r.in_flight_bytes() == 0


def test_a_sender_waits_for_one_receiver_without_holding_up_its_models_to_the_others():
    r = relay(deadline=5.0, answers={"site-1": "dead"})
    assert [upload(r, "site-2", ["site-1"], round_num=k)[0] for k in range(3)] == [OK, OK, NOT_READY]
    assert upload(r, "site-2", ["site-3"], round_num=2)[0] == OK  # two per receiver, not per sender
    settle(r, timeout=1.0)
    assert len(r.receivers.got["site-3"]) == 1
    r.stop()


def test_a_model_queued_for_a_receiver_that_does_not_answer_is_let_go_at_its_deadline():
    receivers = SlowReceivers(hold=0.0, hung=["site-1"], hang=1.0)
    r = ModelRelay(GRAPH, 5, 0.3, 2.0, receivers, lambda level, text: None)
    for site in GRAPH:
        r.on_declare(r.tokens[site], 1000)
    upload(r, "site-2", ["site-1"])
    upload(r, "site-3", ["site-1"])
    time.sleep(0.5)  # past both deadlines, the worker still in its first send
    assert r.in_flight_bytes() == 400 and r.counts.undelivered == 1
    r.stop(timeout=2.0)

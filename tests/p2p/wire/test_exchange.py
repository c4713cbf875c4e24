"""What a peer sends can get only that peer refused: checks on arrival, bounded buffers, neighbours
that stopped sending are no longer waited for, and are taken back when they return."""

import time

import numpy as np
from nvflare.apis.fl_constant import ReturnCode

from lightyear.flare import constants as C
from lightyear.p2p.wire.exchange import PeerExchange

from flare_fakes import model_message

REF = {"w": np.zeros((2, 2), dtype=np.float32), "n": np.array(3, dtype=np.int64)}
PEERS = ["site-2", "site-3", "site-4"]


def exchange(deadline=0.3, max_missed=2, rounds=10):
    logs = []
    ex = PeerExchange(
        PEERS, PEERS, rounds, deadline, 5.0, max_missed, 1e6, lambda level, msg: logs.append((level, msg))
    )
    ex.reference = REF
    ex.logs = logs
    return ex


def model(value=1.0):
    return {"w": np.full((2, 2), value, dtype=np.float32), "n": np.array(7, dtype=np.int64)}


def test_hostile_models_are_rejected_on_arrival_with_a_reason():
    ex = exchange()
    assert (
        ex.on_model(model_message("site-2", 0, {0: np.zeros(1), "w": np.zeros((2, 2))})).get_return_code()
        == ReturnCode.OK
    )
    assert (
        ex.on_model(model_message("site-3", 0, {"w": np.full((2, 2), 1e300), "n": np.array(1)})).get_return_code()
        == ReturnCode.OK
    )
    assert ex.on_model(model_message("site-4", 0, "not a model")).get_return_code() == ReturnCode.OK
    inbox = ex.collect(0, abort=lambda: False)
    assert inbox.valid == {}
    assert "parameter names must be strings" in inbox.rejected["site-2"]
    assert "not finite in float32" in inbox.rejected["site-3"]
    assert "expected a mapping" in inbox.rejected["site-4"]


def test_strangers_wrong_rounds_and_duplicates_are_not_kept():
    ex = exchange()
    assert ex.on_model(model_message("site-9", 0, model())).get_return_code() == ReturnCode.BAD_REQUEST_DATA
    ex.on_model(model_message("site-2", 0, model(1.0)))
    ex.on_model(model_message("site-2", 0, model(5.0)))  # a second model for the same round: the first stays
    ex.on_model(model_message("site-3", 10**12, model()))
    ex.on_model(model_message("site-3", True, model()))
    ex.on_model(model_message("site-4", 7, model()))
    assert ex.buffer.models_held() == 1
    inbox = ex.collect(0, abort=lambda: False)
    np.testing.assert_array_equal(inbox.valid["site-2"]["w"], np.ones((2, 2)))


def test_valid_models_are_cast_to_the_own_dtype():
    ex = exchange()
    ex.on_model(model_message("site-2", 0, {"w": np.full((2, 2), 2.0, dtype=np.float64), "n": np.array(1)}))
    inbox = ex.collect(0, abort=lambda: False)
    assert inbox.valid["site-2"]["w"].dtype == np.float32


def test_a_neighbour_that_missed_k_rounds_is_no_longer_waited_for_but_taken_back():
    ex = exchange(deadline=0.4, max_missed=2)
    timings = []
    for round_num in range(4):
        ex.on_model(model_message("site-2", round_num, model()))
        ex.on_model(model_message("site-3", round_num, model()))
        if round_num == 3:
            ex.on_model(model_message("site-4", round_num, model()))  # site-4 comes back
        start = time.monotonic()
        inbox = ex.collect(round_num, abort=lambda: False)
        timings.append(time.monotonic() - start)
        ex.release(round_num)
        if round_num < 2:
            assert inbox.late == ["site-4"]
        if round_num == 2:
            assert inbox.late == [] and inbox.not_waited_for == ["site-4"]
    assert timings[0] >= 0.35 and timings[1] >= 0.35  # waited out the deadline twice
    assert timings[2] < 0.2  # then no longer
    assert sorted(inbox.valid) == PEERS  # round 3: site-4's model is taken again
    assert ex.missed["site-4"] == 0


def sized(sender, round_num, weights, num_samples):
    req = model_message(sender, round_num, weights)
    req[C.KEY_NUM_SAMPLES] = num_samples
    return req


def test_claimed_dataset_sizes_are_checked_as_hostile_input():
    ex = exchange()
    ex.on_model(sized("site-2", 0, model(), 120))
    ex.on_model(model_message("site-3", 0, model()))  # an older sender without the field: still taken
    ex.on_model(sized("site-4", 0, model(), 10**12))
    inbox = ex.collect(0, abort=lambda: False)
    assert inbox.num_samples == {"site-2": 120}
    assert sorted(inbox.valid) == ["site-2", "site-3"]
    assert "num_samples must be an integer in [1, 1000000000]" in inbox.rejected["site-4"]
    for round_num, bad in enumerate([0, -5, True, 2.5, float("inf"), "many", np.float64(3.0), "x" * 10**6], start=1):
        ex.release(round_num - 1)
        ex.on_model(sized("site-2", round_num, model(), bad))
        inbox = ex.collect(round_num, abort=lambda: False)
        assert inbox.valid == {} and "num_samples" in inbox.rejected["site-2"], bad
        assert len(inbox.rejected["site-2"]) < 300  # a hostile value is not echoed whole


class RecordingEngine:
    def __init__(self, refuse=()):
        self.sent = []
        self.refuse = set(refuse)

    def new_context(self):
        return None

    def send_aux_request(self, targets, topic, request, timeout, fl_ctx, optional=False, secure=False):
        self.sent.append((list(targets), request.get(C.KEY_ROUND), request.get(C.KEY_NUM_SAMPLES)))
        from nvflare.apis.shareable import make_reply

        return {t: make_reply(ReturnCode.OK) for t in targets if t not in self.refuse}


def test_send_goes_only_to_the_given_out_neighbours_with_the_size():
    ex = exchange()
    engine = RecordingEngine()
    ex.num_samples = 77
    ex.send(0, model(), engine, targets=["site-3", "site-9"])  # site-9 is no out-neighbour: ignored
    ex.wait_sent(5.0)
    assert engine.sent == [(["site-3"], 0, 77)]
    ex.send(1, model(), engine, targets=[])
    ex.wait_sent(5.0)
    assert len(engine.sent) == 1  # nobody listens this round: nothing sent


def test_collect_waits_only_for_the_round_senders_and_drops_the_others():
    ex = exchange(deadline=2.0)
    ex.on_model(model_message("site-2", 0, model(2.0)))
    ex.on_model(model_message("site-4", 0, model(4.0)))  # not sampled this round: dropped
    start = time.monotonic()
    inbox = ex.collect(0, abort=lambda: False, senders=["site-2", "site-3"], wait_for=["site-2"])
    assert time.monotonic() - start < 1.0  # site-3 is taken if it arrives but not waited for
    assert sorted(inbox.valid) == ["site-2"] and inbox.late == []
    assert ex.missed == {"site-2": 0, "site-3": 0, "site-4": 0}  # only awaited senders can miss a round


def async_exchange(wait=0.3, rounds=10):
    logs = []
    ex = PeerExchange(
        PEERS,
        PEERS,
        rounds,
        5.0,
        5.0,
        2,
        1e6,
        lambda level, msg: logs.append((level, msg)),
        asynchronous=True,
        async_wait=wait,
    )
    ex.reference = REF
    ex.logs = logs
    return ex


def test_asynchronous_mode_keeps_the_newest_model_of_each_sender_whatever_its_round():
    ex = async_exchange()
    ex.on_model(model_message("site-2", 0, model(0.0)))
    ex.on_model(model_message("site-2", 3, model(3.0)))  # a fast peer, rounds ahead: taken
    ex.on_model(model_message("site-2", 1, model(1.0)))  # older than what it already sent: stale
    ex.on_model(model_message("site-3", 0, model(5.0)))
    ex.on_model(model_message("site-3", 1, {"w": np.full((2, 2), np.nan, dtype=np.float32), "n": np.array(1)}))
    ex.on_model(model_message("site-4", 10, model()))  # past the last round
    assert ex.latest.models_held() == 2  # one model per sender at most
    start = time.monotonic()
    inbox = ex.collect(1, abort=lambda: False)
    assert time.monotonic() - start < 1.0  # site-4 never delivered: waited async_wait, not peer_deadline
    np.testing.assert_array_equal(inbox.valid["site-2"]["w"], np.full((2, 2), 3.0))
    assert inbox.sent_round == {"site-2": 3}
    assert "not finite" in inbox.rejected["site-3"]  # its bad model replaced nothing
    assert inbox.late == ["site-4"]
    ex.release(1)
    inbox = ex.collect(2, abort=lambda: False)  # nothing new: the held models again, however old
    assert inbox.sent_round == {"site-2": 3, "site-3": 0}
    assert sorted(inbox.late) == PEERS


def test_asynchronous_send_is_superseded_by_the_next():
    ex = async_exchange()
    ex.peer_deadline = 30.0
    engine = RecordingEngine(refuse={"site-3"})  # site-3 never takes a model: the first send would retry 30 s
    ex.send(0, model(), engine, targets=["site-2", "site-3"])
    time.sleep(0.3)
    first = ex._threads[-1]
    ex.send(1, model(), engine, targets=["site-2"])
    first.join(timeout=3.0)
    assert not first.is_alive()
    assert any("superseded" in msg for _, msg in ex.logs)


def test_a_payload_larger_than_a_model_is_refused_before_it_is_decoded_or_kept(monkeypatch):
    from lightyear.p2p.wire import payload as payload_module
    from lightyear.p2p.wire.payload import PAYLOAD_SLACK_BYTES, payload_limit

    assert payload_limit(REF) == 2 * (16 + 8) + PAYLOAD_SLACK_BYTES
    ex = exchange()
    decoded = []
    monkeypatch.setattr(ex.codec, "decode", lambda *a: decoded.append(a) or (a[0], []))
    huge = {"w": np.zeros(PAYLOAD_SLACK_BYTES // 8 + 64, dtype=np.float64), "n": np.array(1)}  # > 1 MiB + 48 bytes
    ex.on_model(model_message("site-2", 0, huge))
    many = {f"k{i}": np.zeros(1, np.float32) for i in range(3)}  # more entries than the model has
    ex.on_model(model_message("site-3", 0, many))
    ex.on_model(model_message("site-4", 0, {"w": "x" * (PAYLOAD_SLACK_BYTES + 100), "n": np.array(1)}))
    assert decoded == []  # nothing of them was decoded, cast or copied
    inbox = ex.collect(0, abort=lambda: False)
    assert inbox.valid == {}
    assert "larger than the 1048624 bytes a model of this site takes" in inbox.rejected["site-2"]
    assert "payload has 3 entries, this site's model 2" in inbox.rejected["site-3"]
    assert "larger than" in inbox.rejected["site-4"]
    assert payload_module.payload_size_problem(model(), REF) is None
    assert (
        payload_module.payload_size_problem({"w": np.zeros((2, 2), np.float64), "n": np.array(1)}, REF) is None
    )  # float64 fits


def test_a_model_from_an_in_neighbour_this_round_does_not_take_leaves_a_trace():
    # with sample_neighbours a round takes some in-neighbours only: what the others sent is not
    # used, and a malformed one is still recorded as rejected, with its reason
    ex = exchange()
    ex.on_model(model_message("site-2", 0, model(2.0)))
    ex.on_model(model_message("site-3", 0, {"w": np.full((2, 2), np.nan, np.float32), "n": np.array(1)}))
    ex.on_model(model_message("site-4", 0, model(4.0)))
    inbox = ex.collect(0, abort=lambda: False, senders=["site-2"])
    assert sorted(inbox.valid) == ["site-2"]
    assert list(inbox.rejected) == ["site-3"] and "not finite" in inbox.rejected["site-3"]
    assert any("site-4 not taken" in message for _, message in ex.logs)


def test_what_a_peer_chooses_is_cut_short_in_the_log():
    ex = exchange()
    ex.on_model(model_message("S" * 1_000_000, 0, model()))
    ex.on_model(model_message("site-2", "R" * 1_000_000, model()))
    assert len(ex.logs) == 2 and all(len(message) < 200 for _, message in ex.logs)


def forwarded(sender, round_num, weights, relay="server"):
    """A model the server hands on: FLARE names the server as the peer, the payload names the sender."""
    req = model_message(relay, round_num, weights)
    req[C.KEY_SENDER] = sender
    return req


def test_a_model_through_the_server_is_from_the_sender_the_server_names_and_no_other_route_is_taken():
    ex = exchange()
    ex.via_server, ex.token = True, "t"
    assert ex.on_model(forwarded("site-2", 0, model(2.0)), C.TOPIC_FORWARD).get_return_code() == ReturnCode.OK
    refused = ex.on_model(forwarded("site-9", 0, model()), C.TOPIC_FORWARD).get_return_code()
    assert refused == ReturnCode.BAD_REQUEST_DATA  # the server named a site that is no in-neighbour
    direct = ex.on_model(model_message("site-3", 0, model()), C.TOPIC_MODEL).get_return_code()
    assert direct == ReturnCode.BAD_REQUEST_DATA  # this run's models come through the server
    inbox = ex.collect(0, abort=lambda: False)
    assert list(inbox.valid) == ["site-2"] and inbox.valid["site-2"]["w"][0, 0] == 2.0
    plain = exchange()
    assert plain.on_model(forwarded("site-2", 0, model()), C.TOPIC_FORWARD).get_return_code() == (
        ReturnCode.BAD_REQUEST_DATA
    )  # in a run whose models go direct, nothing claims to be forwarded


def test_through_the_server_a_model_goes_up_once_for_all_its_receivers():
    from nvflare.apis.shareable import make_reply

    class Server:
        def __init__(self):
            self.requests = []

        def new_context(self):
            return None

        def send_aux_request(self, targets, topic, request, timeout, fl_ctx, optional=False, secure=False):
            self.requests.append((targets, topic, dict(request)))
            return {"server": make_reply(ReturnCode.OK)}

    ex = exchange()
    ex.via_server, ex.token = True, "token-1"
    server = Server()
    sent = ex.send(3, model(), server)
    ex.wait_sent(2.0)
    ((targets, topic, request),) = server.requests
    assert targets == [C.SERVER] and topic == C.TOPIC_UPLOAD
    assert request[C.KEY_TARGETS] == PEERS and request[C.KEY_TOKEN] == "token-1" and request[C.KEY_ROUND] == 3
    assert sent["bytes"] == 16 + 8  # one copy of the model, not one per receiver


def test_a_model_from_a_sender_rounds_ahead_is_sent_again_later_not_lost():
    # a sender that does not wait for this site runs ahead: its model for round 3 arrives while this
    # site is in round 0; answered "not ready" (kept nowhere), it is taken when sent again in round 2
    ex = exchange()
    reply = ex.on_model(model_message("site-2", 3, model(3.0)))
    assert reply.get_return_code() == ReturnCode.SERVICE_UNAVAILABLE and ex.buffer.models_held() == 0
    for done in (0, 1):
        ex.release(done)
    assert ex.on_model(model_message("site-2", 3, model(3.0))).get_return_code() == ReturnCode.OK
    assert ex.buffer.models_held() == 1

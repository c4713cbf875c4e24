"""What goes on the wire (transfer_dtype): float16 deltas from the seeded initial model, rebuilt and checked."""

import numpy as np
import pytest
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.shareable import make_reply
from nvflare.apis.signal import Signal

from lightyear.flare import constants as C
from lightyear.p2p.methods.p2p_fedavg import P2PFedAvgExecutor
from lightyear.p2p.wire.exchange import PeerExchange
from lightyear.p2p.wire.payload import FLOAT16_DELTA, PayloadCodec, check_transfer_dtype

from flare_fakes import context, model_message

INITIAL = {"w": np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32), "n": np.array(0, dtype=np.int64)}
MODEL = {"w": np.array([1.1, -2.25, 0.5, 3.001], dtype=np.float32), "n": np.array(7, dtype=np.int64)}


def codec(kind=FLOAT16_DELTA, initial=INITIAL):
    return PayloadCodec(kind, initial if kind == FLOAT16_DELTA else None)


def test_a_delta_is_half_the_bytes_and_rebuilds_the_model_by_hand_worked_values():
    sender, receiver = codec(), codec()
    payload = sender.encode(MODEL)
    assert payload["w"].dtype == np.float16 and payload["n"] == 7  # counters travel unchanged
    assert payload["w"].nbytes == MODEL["w"].nbytes // 2
    model, problems = receiver.decode(payload, sender.marker, INITIAL)
    assert problems == []
    # 1.1 - 1.0 = 0.1 -> float16 0.0999755859375 (1638 * 2**-14); -0.25 and 0 are exact;
    # 3.001 - 3.0 = 0.0010000 -> float16 0.0010004 (spacing 2**-20 near 1e-3)
    expected = [1.0 + 0.0999755859375, -2.25, 0.5, 3.0 + float(np.float16(np.float32(3.001) - np.float32(3.0)))]
    np.testing.assert_array_equal(model["w"], np.array(expected, dtype=np.float32))
    assert model["w"].dtype == np.float32 and model["n"] == 7
    # the float16 model of the same weights: 1.1 -> 1.099609375, 3.001 -> 3.001953125 (spacing 2**-9 near 3)
    half = codec("float16").encode(MODEL)
    assert float(half["w"][0]) == 1.099609375 and float(half["w"][3]) == 3.001953125
    assert abs(model["w"][0] - 1.1) < 2.5e-5 < 3.9e-4 < abs(float(half["w"][0]) - 1.1)
    assert abs(model["w"][3] - np.float32(3.001)) < 5e-7 < 9e-4 < abs(float(half["w"][3]) - np.float32(3.001))


def test_delta_rounding_error_is_bounded_by_the_change_not_the_weight():
    rng = np.random.default_rng(0)
    initial = {"w": rng.normal(0, 0.5, 10_000).astype(np.float32)}
    trained = {"w": (initial["w"] + rng.normal(0, 0.01, 10_000)).astype(np.float32)}
    c = codec(initial=initial)
    rebuilt, problems = c.decode(c.encode(trained), c.marker, initial)
    delta_err = np.abs(rebuilt["w"].astype(np.float64) - trained["w"])
    half_err = np.abs(codec("float16").encode(trained)["w"].astype(np.float64) - trained["w"])
    change = np.abs(trained["w"].astype(np.float64) - initial["w"])
    # float16 keeps 11 significant bits: error <= 2**-11 * |value| (+ 2**-25 for float16's subnormals);
    # the delta path adds float32 rounding of the difference and of the sum (<= 2**-23 * |w| together)
    assert np.all(delta_err <= 2.0**-11 * change + 2.0**-23 * np.abs(trained["w"]) + 2.0**-25)
    assert np.all(half_err <= 2.0**-11 * np.abs(trained["w"]) + 2.0**-25)
    assert delta_err.max() < half_err.max() / 10 and delta_err.mean() < half_err.mean() / 10


def test_a_difference_beyond_float16_range_travels_as_float32():
    far = {"w": INITIAL["w"] + np.float32(1e5), "n": INITIAL["n"]}
    c = codec()
    payload = c.encode(far)
    assert payload["w"].dtype == np.float32
    rebuilt, _ = c.decode(payload, c.marker, INITIAL)
    np.testing.assert_allclose(rebuilt["w"], far["w"], rtol=1e-7)


def delta_exchange(kind=FLOAT16_DELTA, max_abs=1e6):
    ex = PeerExchange(["site-2"], ["site-2"], 5, 1.0, 1.0, 2, max_abs, lambda level, msg: None)
    ex.codec = codec(kind)
    ex.reference = {k: v.copy() for k, v in INITIAL.items()}
    return ex


def receive(ex, payload, marker, round_num=0):
    req = model_message("site-2", round_num, payload)
    if marker is not None:
        req[C.KEY_PAYLOAD] = marker
    assert ex.on_model(req).get_return_code() == ReturnCode.OK
    return ex.collect(round_num, lambda: False)


@pytest.mark.parametrize(
    "payload, marker, reason",
    [
        ({"w": np.zeros(3, np.float16), "n": np.array(0)}, "own", "delta: w: shape (3,)"),
        ({"w": np.full(4, np.nan, np.float16), "n": np.array(0)}, "own", "delta: w: 4 values not finite"),
        ({"n": np.array(0)}, "own", "delta: missing keys [w]"),
        ([1, 2], "own", "delta: expected a mapping"),
        ({"w": np.array(["a"] * 4), "n": np.array(0)}, "own", "non-numeric dtype"),
        (MODEL, "float32", "not a float16_delta"),  # a full model sent to a delta site
        (MODEL, None, "not a float16_delta"),
        ({"w": np.zeros(4, np.float16), "n": np.array(0)}, "float16_delta@0123456789abcdef", "another initial model"),
        ({"w": np.full(4, 2e6, np.float32), "n": np.array(0)}, "own", "exceed max_abs_weight=1e+06"),
    ],
)
def test_malformed_or_foreign_deltas_are_rejected_with_the_reason(payload, marker, reason):
    ex = delta_exchange()
    inbox = receive(ex, payload, ex.codec.marker if marker == "own" else marker)
    assert inbox.valid == {} and inbox.heard == ["site-2"]
    assert reason in inbox.rejected["site-2"]


def test_a_finite_delta_that_overflows_once_added_to_the_base_is_rejected():
    ex = delta_exchange(max_abs=None)
    base = {"w": np.full(4, 3e38, np.float32), "n": np.array(0, dtype=np.int64)}
    ex.codec, ex.reference = PayloadCodec(FLOAT16_DELTA, base), base
    inbox = receive(ex, {"w": np.full(4, 1e38, np.float32), "n": np.array(0)}, ex.codec.marker)
    assert "w: 4 values not finite in float32" in inbox.rejected["site-2"]  # 3e38 + 1e38 > float32's 3.4e38


def test_a_full_model_site_refuses_deltas_and_takes_both_full_kinds():
    ex = delta_exchange(kind="float16")
    assert "not a full model" in receive(ex, codec().encode(MODEL), codec().marker, 0).rejected["site-2"]
    ex.release(0)
    inbox = receive(ex, codec("float16").encode(MODEL), "float16", 1)
    np.testing.assert_allclose(inbox.valid["site-2"]["w"], MODEL["w"], rtol=1e-3)


def test_transfer_dtype_is_checked():
    with pytest.raises(ValueError, match="transfer_dtype must be one of"):
        check_transfer_dtype("delta")
    with pytest.raises(ValueError, match="transfer_dtype"):
        P2PFedAvgExecutor(train_args={"local_epochs": 1}, transfer_dtype="int8")
    with pytest.raises(ValueError, match="initial model"):
        PayloadCodec(FLOAT16_DELTA)


class CountingEngine:
    def __init__(self):
        self.messages = []

    def send_aux_request(self, targets, topic, request, timeout, fl_ctx, optional=False, secure=False):
        self.messages.append(request)
        return {t: make_reply(ReturnCode.OK) for t in targets}

    def new_context(self):
        return self.ctx

    def fire_event(self, event_type, fl_ctx):
        pass


def test_a_delta_round_sends_half_the_bytes_and_records_sent_bytes():
    from p2p_fakes import FULL3, FakeRuntime, wire

    ex = wire(P2PFedAvgExecutor(train_args={"local_epochs": 1}), FULL3)
    initial = ex.runtime.get_weights()  # w = 1.0 everywhere, n = 0
    ex.exchange.codec = PayloadCodec(FLOAT16_DELTA, initial)
    peer = PayloadCodec(FLOAT16_DELTA, FakeRuntime().get_weights())  # another site builds the same base
    for sender, value in (("site-2", 3.0), ("site-3", 6.0)):
        req = model_message(sender, 0, peer.encode({"w": np.full(4, value, np.float32), "n": np.array(5)}))
        req[C.KEY_PAYLOAD] = peer.marker
        ex._on_model(C.TOPIC_MODEL, req, None)
    engine = CountingEngine()
    row = ex._round(0, context(engine), Signal())
    np.testing.assert_allclose(ex.runtime.w["w"], (0.9 + 3.0 + 6.0) / 3, rtol=1e-3)
    sent = engine.messages[0]
    assert sent[C.KEY_PAYLOAD] == peer.marker
    np.testing.assert_allclose(sent[C.KEY_WEIGHTS]["w"].astype(np.float32), -0.1, rtol=1e-3)  # 0.9 - 1.0
    # 4 float16 values (8 bytes) + one int64 counter (8 bytes), acknowledged by 2 receivers
    assert row["model_bytes"] == 16 and row["sent_bytes"] == 32

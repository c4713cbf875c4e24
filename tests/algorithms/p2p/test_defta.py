"""DeFTA: trusted averaging weights, the trust system, and the asynchronous inputs, by hand."""

import json
import math

import numpy as np
import pytest

from lightyear.algorithms.p2p.defta import (
    DeftaTrust,
    async_inputs,
    crelu,
    defta_aggregate,
    defta_out_degrees,
    trust_sample_weights,
    trusted_weights,
)
from lightyear.p2p.topology import build_graph


def model(w, count=3):
    return {"w": np.array(w, dtype=np.float32), "n": np.array(count, dtype=np.int64)}


SIZES = {"a": 100, "b": 300, "c": 200}
DEGREES = {"a": 2, "b": 3, "c": 4}  # out-degrees with the self-loop


def test_trusted_weights_by_hand():
    # |D|/d: a 100/2 = 50, b 300/3 = 100, c 200/4 = 50; sum 200 -> 0.25, 0.5, 0.25
    assert trusted_weights(SIZES, DEGREES, ["a", "b", "c"]) == pytest.approx({"a": 0.25, "b": 0.5, "c": 0.25})
    # a subset renormalises: a and c -> 50 / 100 each
    assert trusted_weights(SIZES, DEGREES, ["a", "c"]) == pytest.approx({"a": 0.5, "c": 0.5})
    # FedAvg by size would give b 0.5 too but a 1/6, c 1/3: the out-degree changes the answer
    assert trusted_weights(SIZES, {"a": 1, "b": 1, "c": 1}, ["a", "b", "c"]) == pytest.approx(
        {"a": 1 / 6, "b": 0.5, "c": 1 / 3}
    )


def test_out_degrees_count_the_self_loop():
    g = build_graph(["a", "b", "c", "d"], "ring")  # 2 out-neighbours each
    assert defta_out_degrees(g) == {"a": 3, "b": 3, "c": 3, "d": 3}
    assert defta_out_degrees({"a": ["b"], "b": []}, self_loop=False) == {"a": 1, "b": 0}


def test_aggregate_includes_own_model():
    own = model([4.0, 0.0])  # site a
    received = {"b": model([0.0, 4.0], 9), "c": model([8.0, 8.0])}
    out, weights = defta_aggregate("a", own, received, SIZES, DEGREES)
    # 0.25 * [4, 0] + 0.5 * [0, 4] + 0.25 * [8, 8] = [3, 4]
    assert weights == pytest.approx({"a": 0.25, "b": 0.5, "c": 0.25})
    np.testing.assert_allclose(out["w"], [3.0, 4.0])
    assert out["n"] == 3 and out["w"].dtype == np.float32
    out2, w2 = defta_aggregate("a", own, received, SIZES, DEGREES, include_self=False)
    # b 100, c 50 -> 2/3, 1/3: 2/3 * [0, 4] + 1/3 * [8, 8] = [2.667, 5.333]
    assert w2 == pytest.approx({"b": 2 / 3, "c": 1 / 3})
    np.testing.assert_allclose(out2["w"], [8 / 3, 16 / 3], rtol=1e-6)


def test_aggregate_refuses_bad_inputs():
    with pytest.raises(ValueError, match="out-degree of 'c'"):
        defta_aggregate("a", model([0.0]), {"c": model([1.0])}, SIZES, {"a": 2, "c": 0})
    with pytest.raises(ValueError, match="'b'.*not finite"):
        defta_aggregate("a", model([0.0]), {"b": model([np.nan])}, SIZES, DEGREES)


def test_crelu_and_sample_weights():
    np.testing.assert_allclose(crelu([-2.0, 0.0, 5.0]), [-2.0, 0.0, 1.0])  # 0.2 * 5 = 1
    # softmax(cRELU([0, 0])) = [0.5, 0.5]; a blocked peer (-inf) gets 0
    assert trust_sample_weights({"a": 0.0, "b": 0.0, "x": -math.inf}) == pytest.approx({"a": 0.5, "b": 0.5, "x": 0.0})
    assert trust_sample_weights({"x": -math.inf}) == {"x": 0.0}


def test_trust_falls_for_a_peer_whose_models_raise_the_loss():
    trust = DeftaTrust(["a", "b", "c"])
    rng = np.random.default_rng(0)
    assert trust.sample_peers(rng) == ["a", "b", "c"]  # S^0 = N_i
    first = trust.observe(1.0, {"a": 0.25, "b": 0.25, "c": 0.25})
    assert first.loss_trust == 0.0 and first.save_backup and not first.damaged  # no previous loss yet
    d = trust.observe(1.5, {"a": 0.5})  # loss rose by 0.5 after aggregating a with p = 0.5
    assert d.loss_trust == pytest.approx(0.5) and not d.save_backup  # 1.5 is not the lowest loss
    assert d.score_changes == pytest.approx({"a": -0.25})
    d = trust.observe(1.2, {"b": 0.5})  # loss fell by 0.3 after aggregating b
    assert d.score_changes == pytest.approx({"b": 0.15}) and not d.save_backup  # 1.2 > best 1.0
    assert trust.scores == pytest.approx({"a": -0.25, "b": 0.15, "c": 0.0})
    # cRELU: a -0.25, b 0.2 * 0.15 = 0.03, c 0; softmax: e^-0.25 = 0.7788, e^0.03 = 1.0305, e^0 = 1;
    # sum 2.8093 -> a 0.2772, b 0.3668, c 0.3560
    w = trust.sample_weights()
    assert w == pytest.approx({"a": 0.7788 / 2.8093, "b": 1.0305 / 2.8093, "c": 1.0 / 2.8093}, abs=1e-4)
    assert w["a"] < w["c"] < w["b"]
    assert trust.observe(0.9, {"c": 0.5}).save_backup  # lowest loss so far


def test_damaged_model_restores_backup_and_blocks_its_peers():
    trust = DeftaTrust(["a", "b", "c"])
    trust.observe(1.0, {"a": 0.25, "b": 0.25, "c": 0.25})
    d = trust.observe(float("nan"), {"a": 0.3, "b": 0.3})
    assert d.damaged and not d.save_backup and d.loss_trust == math.inf
    assert trust.blocked() == ["a", "b"]
    assert trust.last_loss == 1.0  # loss_last untouched by a damaged round
    rng = np.random.default_rng(1)
    assert all(trust.sample_peers(rng) == ["c"] for _ in range(5))  # only c can still be drawn
    trust.observe(float("inf"), {"c": 0.5})
    assert trust.sample_peers(rng) == []  # everyone cut off: the site trains alone


def test_damage_ratio_flags_a_loss_jump():
    trust = DeftaTrust(["a"], damage_ratio=10.0)
    trust.observe(0.2, {})
    assert trust.is_damaged(2.5)  # 2.5 > 10 * 0.2
    assert not trust.is_damaged(1.9)
    assert not DeftaTrust(["a"]).is_damaged(1e6)  # default: only NaN / Inf count


def test_sampling_size_and_seeding():
    trust = DeftaTrust(["a", "b", "c", "d"], sample_size=2)
    trust.observe(1.0, {})
    draws = [trust.sample_peers(np.random.default_rng(s)) for s in range(20)]
    assert all(len(d) == 2 and d == sorted(d) for d in draws)
    assert len({tuple(d) for d in draws}) > 1
    assert trust.sample_peers(np.random.default_rng(3)) == draws[3]


def test_state_round_trips_through_json():
    trust = DeftaTrust(["a", "b", "c"], sample_size=1, damage_ratio=5.0)
    trust.observe(1.0, {"a": 0.5})
    trust.observe(0.8, {"b": 0.5})
    trust.observe(float("nan"), {"c": 0.5})
    saved = json.loads(json.dumps(trust.to_dict(), allow_nan=False))
    back = DeftaTrust.from_dict(saved)
    assert back.to_dict() == trust.to_dict()
    assert back.scores["c"] == -math.inf and back.scores["b"] == pytest.approx(0.1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"sample_size": 0}, "sample_size"),
        ({"positive_slope": 0.0}, "positive_slope"),
        ({"positive_slope": 1.5}, "positive_slope"),
        ({"damage_ratio": 1.0}, "damage_ratio"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DeftaTrust(["a"], **kwargs)


def test_observe_refuses_unknown_peers_and_bad_weights():
    trust = DeftaTrust(["a"])
    with pytest.raises(ValueError, match="not peers"):
        trust.observe(1.0, {"z": 0.5})
    with pytest.raises(ValueError, match=r"in \(0, 1\]"):
        trust.observe(1.0, {"a": 0.0})


def test_async_inputs_take_the_newest_model_whatever_its_age():
    latest = {"a": (3, model([1.0])), "b": (7, model([2.0]))}
    models, staleness = async_inputs(["a", "b", "c"], latest, round_index=8)
    assert sorted(models) == ["a", "b"]  # c never heard from
    assert staleness == {"a": 5, "b": 1}


def test_sampling_among_the_peers_a_round_can_hear():
    trust = DeftaTrust(["a", "b", "c", "d"], sample_size=2)
    trust.observe(1.0, {})
    assert trust.sample_peers(np.random.default_rng(0), among=["a", "b", "c", "d"]) == trust.sample_peers(
        np.random.default_rng(0)
    )
    draws = [trust.sample_peers(np.random.default_rng(s), among=["b", "d", "z"]) for s in range(10)]
    assert all(d == ["b", "d"] for d in draws)  # both of the two it can hear; "z" is no peer
    trust.observe(float("nan"), {"b": 0.5})  # b cut off
    assert trust.sample_peers(np.random.default_rng(0), among=["b", "d"]) == ["d"]
    assert DeftaTrust(["a", "b"]).sample_peers(np.random.default_rng(0), among=["b"]) == ["b"]  # S^0: all it can hear


def test_a_peer_the_round_can_hear_is_drawn_even_beside_a_far_better_one_it_cannot():
    # theta over {b} alone is 1: a softmax over every peer, renormalised after, underflowed to 0 here
    trust = DeftaTrust(["a", "b"], sample_size=1)
    trust.observe(1.0, {})
    trust.scores = {"a": 0.0, "b": -800.0}  # low, but finite: b is not cut off
    assert trust.sample_peers(np.random.default_rng(0), among=["b"]) == ["b"]

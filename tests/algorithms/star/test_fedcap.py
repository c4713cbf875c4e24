"""FedCAP's server rules on hand-worked rounds."""

import math

import numpy as np
import pytest

from lightyear.algorithms.star.fedcap import (
    FedCapState,
    check_alpha,
    check_phi,
    check_t_norm,
    customization_weights,
    fedcap_calibrate_and_detect,
    fedcap_customize,
)

LN3 = math.log(3.0)  # exp(LN3 * cos) is 1 for cos 0 and 3 for cos 1: softmax by hand


def v(*xs):
    return np.array(xs, dtype=np.float64)


POOL = {"a": v(1, 0), "b": v(0, 1), "c": v(1, 0)}


def test_weights_by_hand_sum_to_one_with_self_weight_phi():
    # site a: cos(a,b) = 0 -> 1, cos(a,c) = 1 -> 3; softmax b 1/4, c 3/4; times 1 - phi = 0.8
    w = customization_weights(POOL["a"], POOL, "a", alpha=LN3, phi=0.2)
    assert w == pytest.approx({"a": 0.2, "b": 0.2, "c": 0.6})
    assert sum(w.values()) == pytest.approx(1.0)


def test_weights_with_default_settings_keep_phi_and_sum_to_one():
    rng = np.random.default_rng(0)
    pool = {f"s{i}": rng.normal(size=5) for i in range(6)}
    w = customization_weights(pool["s3"], pool, "s3")  # alpha 10, phi 0.1
    assert w["s3"] == 0.1 and sum(w.values()) == pytest.approx(1.0) and min(w.values()) >= 0


def test_weights_for_a_site_outside_the_pool_and_alpha_zero():
    # newcomer with update [0,1]: cos 0, 1, 0 -> 1, 3, 1 -> softmax 0.2, 0.6, 0.2, no self weight
    assert customization_weights(v(0, 1), POOL, None, alpha=LN3) == pytest.approx({"a": 0.2, "b": 0.6, "c": 0.2})
    # alpha 0: the others share 1 - phi equally
    assert customization_weights(POOL["b"], POOL, "b", alpha=0, phi=0.3) == pytest.approx(
        {"a": 0.35, "b": 0.3, "c": 0.35}
    )
    assert customization_weights(v(1, 1), {"a": v(1, 0)}, "a") == {"a": 1.0}  # alone in the pool


def test_two_rounds_by_hand():
    state = FedCapState(global_vector=v(0, 0))
    # round 0: empty pool -> everyone gets w^0
    sent = fedcap_customize(state, ["a", "b", "c"])
    assert all(np.array_equal(x, [0, 0]) for x in sent.values())
    det = fedcap_calibrate_and_detect(state, {"a": v(1, 0), "b": v(0, 1), "c": v(2, 0)}, {"a": 1, "b": 1, "c": 2})
    assert det.kept == ["a", "b", "c"] and det.removed_now == []

    sent = fedcap_customize(state, ["a", "b", "c"], alpha=LN3, phi=0.2)
    # a: self 0.2, b (cos 0) 0.2, c (cos 1) 0.6 -> 0.2[1,0] + 0.2[0,1] + 0.6[2,0] = [1.4, 0.2]
    # b: self 0.2, a and c (cos 0) 0.4 each   -> 0.2[0,1] + 0.4[1,0] + 0.4[2,0] = [1.2, 0.2]
    # c: self 0.2, a (cos 1) 0.6, b 0.2       -> 0.2[2,0] + 0.6[1,0] + 0.2[0,1] = [1.0, 0.2]
    np.testing.assert_allclose(sent["a"], [1.4, 0.2])
    np.testing.assert_allclose(sent["b"], [1.2, 0.2])
    np.testing.assert_allclose(sent["c"], [1.0, 0.2])
    # Eq. 6: (1[1,0] + 1[0,1] + 2[2,0]) / 4 = [1.25, 0.25]
    np.testing.assert_allclose(state.global_vector, [1.25, 0.25])

    # the sites return updates d_k; the controller recovers w~_k = w^_k + d_k with the model it sent
    updates = {"a": v(0.1, 0), "b": v(0, 0.1), "c": v(-0.2, 0.1)}
    local = {s: sent[s] + d for s, d in updates.items()}
    np.testing.assert_allclose(local["c"], [0.8, 0.3])
    det = fedcap_calibrate_and_detect(state, local, {"a": 1, "b": 1, "c": 2})
    # d~ = w~ - [1.25, 0.25]: a [0.25, -0.05], b [-0.05, 0.05], c [-0.45, 0.05]
    np.testing.assert_allclose(state.calibrated["a"], [0.25, -0.05])
    assert det.norms == pytest.approx({"a": math.sqrt(0.065), "b": math.sqrt(0.005), "c": math.sqrt(0.205)})
    assert state.round == 2 and state.customized == {}


def test_norm_check_removes_a_site_for_good():
    state = FedCapState(global_vector=v(0, 0))
    fedcap_customize(state, ["a", "b", "x"])
    # ||[30, 40] - [0, 0]|| = 50 > T_norm = 10; ||[1,0]|| = ||[0,1]|| = 1
    det = fedcap_calibrate_and_detect(state, {"a": v(1, 0), "b": v(0, 1), "x": v(30, 40)}, dict.fromkeys("abx", 1))
    assert det.removed_now == ["x"] and det.norms["x"] == pytest.approx(50.0) and state.removed == {"x": 0}
    for _ in range(2):  # later rounds: x behaves, but stays out
        sent = fedcap_customize(state, ["a", "b", "x"])
        assert sorted(sent) == ["a", "b"]
        det = fedcap_calibrate_and_detect(state, {"a": v(1, 0), "b": v(0, 1), "x": v(1, 0)}, dict.fromkeys("abx", 1))
        assert det.ignored == ["x"] and det.removed_now == [] and "x" not in state.recovered
        assert state.removed == {"x": 0}


def test_threshold_is_strict_and_settable():
    state = FedCapState(global_vector=v(0, 0))
    det = fedcap_calibrate_and_detect(state, {"a": v(3, 4), "b": v(6, 8)}, {"a": 1, "b": 1}, t_norm=5.0)
    assert det.kept == ["a"] and det.removed_now == ["b"]  # 5 is not > 5; 10 is


def test_site_outside_the_pool_needs_a_fresh_update_or_the_fallback():
    state = FedCapState(global_vector=v(0, 0))
    fedcap_calibrate_and_detect(state, {"a": v(1, 0), "b": v(0, 1)}, {"a": 1, "b": 3})
    with pytest.raises(ValueError, match=r"\['n'\] have no calibrated update"):
        fedcap_customize(state, ["a", "b", "n"])
    sent = fedcap_customize(state, ["a", "b", "n"], alpha=LN3, fresh_updates={"n": v(0, 2)})
    # n: cos with a 0, with b 1 -> 1, 3 -> 0.25[1,0] + 0.75[0,1]
    np.testing.assert_allclose(sent["n"], [0.25, 0.75])
    sent = fedcap_customize(state, ["a", "b", "n"], absent="global")
    np.testing.assert_allclose(sent["n"], [0.25, 0.75])  # Eq. 6: (1[1,0] + 3[0,1]) / 4


def test_bad_settings_and_inputs_are_refused():
    with pytest.raises(ValueError, match="alpha"):
        check_alpha(-1.0)
    with pytest.raises(ValueError, match=r"phi .*\[0, 1\]"):
        check_phi(1.5)
    with pytest.raises(ValueError, match="t_norm"):
        check_t_norm(0)
    state = FedCapState(global_vector=v(0, 0))
    with pytest.raises(ValueError, match="NaN or inf"):
        fedcap_calibrate_and_detect(state, {"a": v(np.nan, 0)}, {"a": 1})
    with pytest.raises(ValueError, match="global model has 2"):
        fedcap_calibrate_and_detect(state, {"a": v(1, 0, 0)}, {"a": 1})
    with pytest.raises(ValueError, match="num_samples"):
        fedcap_calibrate_and_detect(state, {"a": v(1, 0)}, {})

"""BALANCE (Fang et al., CCS 2024) on hand-worked cases."""

import math

import numpy as np
import pytest

from lightyear.algorithms.p2p.balance import balance_threshold, balance_update


def model(w, count=3):
    return {"w": np.array(w, dtype=np.float32), "n": np.array(count, dtype=np.int64)}


def test_radius_shrinks_with_t():
    # gamma * exp(-kappa * t / T) * ||theta||, ||theta|| = 10, gamma 0.3, kappa 1, T 10:
    # t = 0: 0.3 * 10 = 3; t = 5: 3 * e^-0.5 = 1.8196; t = 10: 3 * e^-1 = 1.1036
    assert balance_threshold(10.0, 0, 10) == pytest.approx(3.0)
    assert balance_threshold(10.0, 5, 10) == pytest.approx(3.0 * math.exp(-0.5))
    assert balance_threshold(10.0, 10, 10) == pytest.approx(3.0 * math.exp(-1.0))
    # kappa = 0: constant radius
    assert balance_threshold(10.0, 10, 10, kappa=0.0) == pytest.approx(3.0)


def test_all_accepted_gives_alpha_own_plus_rest_mean():
    own = model([3.0, 4.0])  # ||own|| = 5; gamma 1, t 0 -> radius 5
    received = {"b": model([3.0, 5.0], 7), "c": model([4.0, 4.0], 9)}  # distances 1 and 1
    out, accepted, distances = balance_update(own, received, t=0, T=10, gamma=1.0, alpha=0.5)
    # mean(accepted) = [3.5, 4.5]; 0.5 * [3, 4] + 0.5 * [3.5, 4.5] = [3.25, 4.25]
    np.testing.assert_allclose(out["w"], [3.25, 4.25])
    assert accepted == ["b", "c"]
    assert distances == pytest.approx({"b": 1.0, "c": 1.0})
    assert out["n"] == 3 and out["w"].dtype == np.float32


def test_weights_sum_to_one_so_identical_models_stay_put():
    # alpha + (1 - alpha) = 1: averaging copies of the own model changes nothing. The authors' weights
    # (1 - alpha) / (|S| + 1) per neighbour would give 0.5 * 4 + 2 * (0.5 / 3) * 4 = 3.33 here.
    own = model([4.0, 0.0])
    out, accepted, _ = balance_update(own, {"b": model([4.0, 0.0]), "c": model([4.0, 0.0])}, t=3, T=10)
    assert accepted == ["b", "c"]
    np.testing.assert_allclose(out["w"], [4.0, 0.0])


def test_neighbour_accepted_early_rejected_late():
    own = model([3.0, 4.0])  # ||own|| = 5, gamma 0.3 -> radius 1.5 at t = 0, 1.5 / e = 0.552 at t = T
    near = {"b": model([3.0, 5.2])}  # distance 1.2
    out0, acc0, _ = balance_update(own, near, t=0, T=10)
    # accepted: 0.5 * [3, 4] + 0.5 * [3, 5.2] = [3, 4.6]
    assert acc0 == ["b"]
    np.testing.assert_allclose(out0["w"], [3.0, 4.6], rtol=1e-6)
    out10, acc10, dist = balance_update(own, near, t=10, T=10)
    assert acc10 == [] and dist["b"] == pytest.approx(1.2, rel=1e-6)
    np.testing.assert_allclose(out10["w"], [3.0, 4.0])  # nobody accepted: own model kept


def test_far_neighbour_left_out_of_the_mean():
    own = model([3.0, 4.0])  # radius 1.5 at t = 0
    received = {"near": model([4.0, 4.0]), "far": model([30.0, -40.0])}
    out, accepted, _ = balance_update(own, received, t=0, T=10, alpha=0.25)
    # 0.25 * [3, 4] + 0.75 * [4, 4] = [3.75, 4]
    assert accepted == ["near"]
    np.testing.assert_allclose(out["w"], [3.75, 4.0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"gamma": 0.0}, "gamma must be a number > 0"),
        ({"kappa": -0.1}, "kappa must be a number >= 0"),
        ({"alpha": 1.5}, r"alpha must be a number in \[0, 1\]"),
        ({"T": 0}, "T must be an integer >= 1"),
        ({"t": -1}, "t must be a number >= 0"),
        ({"gamma": float("nan")}, "gamma must be a number > 0"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    args = {"t": 0, "T": 10, **kwargs}
    with pytest.raises(ValueError, match=message):
        balance_update(model([1.0]), {}, **args)


def test_non_finite_neighbour_is_refused():
    with pytest.raises(ValueError, match="'b'.*not finite"):
        balance_update(model([1.0, 1.0]), {"b": model([np.inf, 1.0])}, t=0, T=10)

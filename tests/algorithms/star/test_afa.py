"""Adaptive Federated Averaging on hand-worked rounds."""

import json

import numpy as np
import pytest

from lightyear.algorithms.star.afa import AfaReputation, afa_round, check_block_threshold, check_xi


def v(*xs):
    return np.array(xs, dtype=np.float64)


def test_low_side_outlier_is_removed_by_hand():
    updates = {"a": v(1, 0), "b": v(2, 0), "c": v(1, 0), "d": v(1, 0), "e": v(-1, 0)}
    n = {"a": 1, "b": 3, "c": 2, "d": 2, "e": 2}
    rep = AfaReputation()
    out = afa_round(updates, n, rep)
    # pass 1: every p_k = 3/6, so weights are n_k / 10:
    #   agg = (1*1 + 3*2 + 2*1 + 2*1 + 2*(-1)) / 10 = 0.9 along x -> s = [1, 1, 1, 1, -1]
    #   mean 0.6 < median 1 -> low side; std = sqrt(mean(s^2) - 0.6^2) = sqrt(0.64) = 0.8
    #   remove s < 1 - 2 * 0.8 = -0.6 -> e
    # pass 2 (xi 2.25): s = [1, 1, 1, 1], std 0 -> nothing removed, stop
    assert out.good == ["a", "b", "c", "d"] and out.bad == ["e"]
    # weights n_k / 8 over a..d: (1*1 + 3*2 + 2*1 + 2*1) / 8 = 11/8
    assert out.weights == pytest.approx({"a": 1 / 8, "b": 3 / 8, "c": 2 / 8, "d": 2 / 8})
    np.testing.assert_allclose(out.aggregate, [11 / 8, 0.0])
    assert out.similarity["e"] == pytest.approx(-1.0)
    assert rep.counts("a") == (4.0, 3.0) and rep.counts("e") == (3.0, 4.0)
    assert out.blocked == [] and out.newly_blocked == []


def test_high_side_branch_when_mean_is_above_median():
    # agg = ([1,0,0] + [-1,0,0] + [0,1,0] + [0,-1,0] + [0,0,1]) / 5 = [0, 0, 0.2]
    # s = [0, 0, 0, 0, 1]: mean 0.2 >= median 0 -> high side; std = sqrt(0.2 - 0.04) = 0.4
    # remove s > 0 + 2 * 0.4 = 0.8 -> e. Pass 2: the aggregate of a..d is the zero vector,
    # whose cosine with anything is 0 by convention -> std 0 -> stop, aggregate [0, 0, 0].
    updates = {"a": v(1, 0, 0), "b": v(-1, 0, 0), "c": v(0, 1, 0), "d": v(0, -1, 0), "e": v(0, 0, 1)}
    out = afa_round(updates, dict.fromkeys(updates, 1.0), AfaReputation())
    assert out.bad == ["e"] and out.good == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(out.aggregate, [0.0, 0.0, 0.0])
    assert not np.isnan(list(out.similarity.values())).any()


def test_weights_use_expected_reputation_not_alpha_over_beta():
    rep = AfaReputation(alpha={"x": 5.0}, beta={"x": 3.0})
    out = afa_round({"x": v(1, 0), "y": v(3, 0)}, {"x": 2, "y": 1}, rep)
    # p_x = 5/8, p_y = 3/6: n*p = 1.25 and 0.5 -> weights 5/7, 2/7; aggregate 5/7 + 6/7 = 11/7
    # (alpha/beta would give 10/3 and 1 -> 10/13, 3/13 -> 19/13)
    assert out.weights == pytest.approx({"x": 5 / 7, "y": 2 / 7})
    np.testing.assert_allclose(out.aggregate, [11 / 7, 0.0])


def test_persistent_outlier_is_blocked_and_the_block_outlives_the_round():
    honest = {"a": v(1, 0.1), "b": v(1, -0.1), "c": v(1.2, 0), "d": v(0.8, 0)}
    n = dict.fromkeys("abcde", 1.0)
    rep = AfaReputation()
    # e is bad every round, so after r rounds beta_e = 3 + r and
    # P(p < 1/2) = P(Bin(2 + r + 3, 1/2) >= 3) for Beta(3, 3 + r):
    #   r = 5: 1 - (1 + 10 + 45) / 2^10 = 968/1024 = 0.9453 <= 0.95 -> not yet
    #   r = 6: 1 - (1 + 11 + 55) / 2^11 = 1981/2048 = 0.9673 > 0.95 -> blocked
    for r in range(1, 7):
        out = afa_round({**honest, "e": v(-1, 0)}, n, rep)
        assert out.bad == ["e"]
        if r in (5, 6):
            assert rep.prob_bad("e") == pytest.approx({5: 968 / 1024, 6: 1981 / 2048}[r])
        assert out.newly_blocked == (["e"] if r == 6 else [])
    assert rep.blocked == {"e"} and rep.counts("e") == (3.0, 9.0) and rep.counts("a") == (9.0, 3.0)
    # round 7: e now sends an honest-looking update; it stays blocked and is ignored
    out = afa_round({**honest, "e": v(1, 0)}, n, rep)
    assert out.good == ["a", "b", "c", "d"] and out.bad == [] and out.blocked == ["e"]
    assert "e" not in out.weights and rep.counts("e") == (3.0, 9.0)
    # all honest p = 9/12: equal weights 1/4 -> aggregate = mean = [1, 0]
    np.testing.assert_allclose(out.aggregate, [1.0, 0.0])


def test_to_dict_is_json():
    rep = AfaReputation(alpha={"s1": 4.0}, beta={"s1": 3.0}, blocked={"s2"})
    data = json.loads(json.dumps(rep.to_dict()))
    assert data == {"alpha0": 3.0, "beta0": 3.0, "alpha": {"s1": 4.0}, "beta": {"s1": 3.0}, "blocked": ["s2"]}


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="xi0"):
        check_xi(0.0, 0.25)
    with pytest.raises(ValueError, match="delta_xi"):
        check_xi(2.0, -1.0)
    with pytest.raises(ValueError, match=r"block_threshold .*\(0.5, 1\)"):
        check_block_threshold(1.0)
    with pytest.raises(ValueError, match="alpha0"):
        AfaReputation(alpha0=0.0)
    with pytest.raises(ValueError, match=r"num_samples\['b'\]"):
        afa_round({"a": v(1.0), "b": v(2.0)}, {"a": 1}, AfaReputation())
    with pytest.raises(ValueError, match="NaN or inf"):
        afa_round({"a": v(np.nan)}, {"a": 1}, AfaReputation())
    with pytest.raises(ValueError, match="no unblocked site"):
        afa_round({"a": v(1.0)}, {"a": 1}, AfaReputation(blocked={"a"}))


def test_sample_counts_at_the_top_of_the_float_range_still_weigh_equally():
    # four equal counts of 1e308: their sum overflows; each weight is still 1/4, the aggregate the mean
    updates = {s: v(1, 2) for s in "abcd"}
    out = afa_round(updates, {s: 1e308 for s in "abcd"}, AfaReputation())
    assert out.weights == pytest.approx({s: 0.25 for s in "abcd"})
    np.testing.assert_allclose(out.aggregate, [1.0, 2.0])

"""The validated aggregation and its paired test, on one-number models whose per-sample validation results
are given by hand."""

import math
import tracemalloc

import numpy as np
import pytest

from assessments import GOOD, assessment
from lightyear.algorithms.p2p.decayed_update import decayed_mean_update
from lightyear.algorithms.p2p.validated_update import OWN_FUNCTION, peer_weight, validated_update
from lightyear.algorithms.p2p.validation_bounds import Bounds, Held, Measured, excess

Z95 = 1.6448536269514722  # Phi^-1(0.95)


OWN = {"w": np.array([0.0]), "count": np.array(3, dtype=np.int64)}  # w all zero: no norm bound on it


def model(value):
    return {"w": np.array([float(value)]), "count": np.array(9, dtype=np.int64)}


class Validation:
    """Per-sample losses 0.2 on four samples for a model with w <= 1; on 1 < w <= 1.5 the last sample's
    loss is 0.3 (within the noise); beyond, losses 5 and every sample wrong. Counts the calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, weights):
        w = float(weights["w"][0])
        self.calls.append(w)
        if w <= 1.0:
            return assessment(GOOD)
        if w <= 1.5:
            return assessment([0.2, 0.2, 0.2, 0.3])
        return assessment([5.0] * 4, [1.0] * 4)


def run(peers, gamma=1.0, t=0, evaluate=None, bounds=None, held=None, own=OWN, own_found=None):
    evaluate = evaluate or Validation()
    assessed = {p: assessment(GOOD) for p in peers}
    found = own_found or assessment(GOOD)
    out = validated_update(own, found, peers, assessed, list(peers), gamma, t, evaluate, bounds or Bounds(), held)
    return out, evaluate


def test_the_paired_excess_is_the_lower_confidence_bound_of_the_mean_difference():
    # differences 1, 2, 3, 4: mean 2.5, sample std sqrt(5/3) = 1.29099, standard error 0.645497
    assert excess([1, 2, 3, 4], [0, 0, 0, 0], Z95) == pytest.approx(2.5 - Z95 * 0.645497, abs=1e-6)
    assert excess([0.3, 0.3, 0.3], [0.2, 0.2, 0.2], Z95) == pytest.approx(0.1)  # no spread: the mean itself
    assert excess([0.2, 0.2, 0.2, 0.3], GOOD, Z95) == pytest.approx(0.025 - Z95 * 0.025, abs=1e-9)  # noise: < 0
    assert math.isnan(excess([np.inf, 0.0], [0.0, 0.0], Z95)) and excess([], [], Z95) == -math.inf
    with pytest.raises(ValueError, match="paired samples"):
        excess([1.0, 2.0], [1.0], Z95)


def test_the_tolerance_shrinks_as_the_validation_set_grows():
    # one sample in ten a loss 1 higher: within the noise on 10 samples, significant on 1,000
    small, large = [1.0] + [0.0] * 9, ([1.0] + [0.0] * 9) * 100
    assert excess(small, [0.0] * 10, Z95) < 0.0 < excess(large, [0.0] * 1000, Z95)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"confidence": 1.0}, "confidence"),
        ({"confidence": 0.4}, "confidence"),
        ({"max_norm_growth": -1}, "max_norm_growth"),
        ({"drift_budget": float("inf")}, "drift_budget"),
        ({"max_peer_share": 0}, "max_peer_share"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Bounds(**kwargs)


def test_a_candidate_is_judged_against_the_model_the_site_started_the_round_from():
    bounds, own = Bounds(), assessment([0.1, 0.1, 0.1, 0.1])
    mixture = assessment([0.2, 0.2, 0.2, 0.2])  # worse than the fresh model, no worse than the round's start
    assert bounds.fault(mixture, own) == "loss"  # no start known: the own model of the round
    assert bounds.fault(mixture, own, Held(start=Measured.of(assessment(GOOD)))) == ""
    wrong = assessment(GOOD, [1.0, 1.0, 1.0, 1.0])
    assert bounds.fault(wrong, own, Held(start=Measured.of(assessment(GOOD)))) == "error"
    assert bounds.fault(assessment([np.nan] * 4), own) == "not finite"


def test_the_anchor_bounds_the_drift_over_rounds():
    bounds = Bounds(drift_budget=0.1)
    start, anchor = Measured.of(assessment([0.5] * 4)), Measured.of(assessment([0.1] * 4))
    own = assessment([0.4] * 4)
    # no worse than the start, but 0.4 above the anchor while above the own model: refused
    assert bounds.fault(assessment([0.5] * 4), own, Held(start, anchor)) == "drift"
    # within the budget of the anchor, or no higher than the own model (its own training took it there): adopted
    assert bounds.fault(assessment([0.15] * 4), own, Held(start, anchor)) == ""
    assert bounds.fault(assessment([0.4] * 4), own, Held(start, anchor)) == ""


def test_the_site_carries_the_adopted_model_as_its_start_and_the_lowest_loss_as_its_anchor():
    held = Held().after(assessment([0.3] * 4), assessment([0.4] * 4))
    assert held.start.losses.tolist() == [0.4] * 4 and held.anchor.losses.tolist() == [0.3] * 4
    held = held.after(assessment([0.5] * 4), assessment([0.2] * 4))
    assert held.start.losses.tolist() == [0.2] * 4 and held.anchor.losses.tolist() == [0.2] * 4
    held = held.after(assessment([0.6] * 4), assessment([np.nan] * 4))  # a non-finite one is never carried
    assert held.start.losses.tolist() == [0.2] * 4 and held.anchor.losses.tolist() == [0.2] * 4


def test_a_passing_aggregate_is_eq_18_and_costs_one_evaluation():
    peers = {"a": model(0.4), "b": model(0.8)}
    out, evaluate = run(peers, gamma=0.9, t=2)
    # 0 + 0.9^2 * (0.4 + 0.8) / 2 = 0.486
    assert out.weights["w"][0] == pytest.approx(0.486)
    np.testing.assert_allclose(out.weights["w"], decayed_mean_update(OWN, list(peers.values()), 0.9, 2)["w"])
    assert out.adopted == ["a", "b"] and out.excluded == {} and out.evaluations == 1
    assert evaluate.calls == [pytest.approx(0.486)] and out.weights["count"] == 3  # counters keep the own value


def test_a_benign_minority_gets_its_full_step_back_within_s_plus_2_passes():
    # weight 1/3: the whole 1/3 (0.6 + 0.9 + 9) = 3.5 fails; alone a (0.2) and b (0.3) pass, c (3) fails;
    # a and b with weight 1/2 each: 0.75, adopted. 1 + 3 + 1 = |S| + 2 passes.
    out, evaluate = run({"a": model(0.6), "b": model(0.9), "c": model(9.0)})
    assert evaluate.calls == pytest.approx([3.5, 0.2, 0.3, 3.0, 0.75]) and out.evaluations == 5
    assert out.adopted == ["a", "b"] and list(out.excluded) == ["c"] and out.weights["w"][0] == pytest.approx(0.75)
    assert "significantly above the model the round started from at confidence 0.95" in out.excluded["c"]


def test_peers_that_pass_alone_but_not_together_get_half_the_step():
    # weight 1/2 (max_peer_share): the whole 0.5 (1.6 + 1.8) = 1.7 fails; alone 0.8 and 0.9 pass; all of them
    # with half the step, 0.25 (1.6 + 1.8) = 0.85, passes. 1 + 2 + 1 = |S| + 2 passes.
    out, evaluate = run({"a": model(1.6), "b": model(1.8)})
    assert evaluate.calls == pytest.approx([1.7, 0.8, 0.9, 0.85]) and out.evaluations == 4
    assert out.adopted == ["a", "b"] and out.weights["w"][0] == pytest.approx(0.85) and out.excluded == {}


class Barrier(Validation):
    """Good (losses 0.2) for w <= 0.7 and 1.3 <= w <= 1.5, every sample wrong elsewhere: two contributions
    that pass alone with a barrier between them."""

    def __call__(self, weights):
        w = float(weights["w"][0])
        self.calls.append(w)
        return assessment(GOOD) if w <= 0.7 or 1.3 <= w <= 1.5 else assessment([5.0] * 4, [1.0] * 4)


def test_when_half_the_step_fails_too_the_best_contribution_alone_is_adopted():
    # the whole 0.5 (1.2 + 2.8) = 2 fails; alone 0.6 and 1.4 pass; half the step, 1.0, fails; the two
    # contributions have the same loss, and the first by name, a's, is adopted as tested
    out, evaluate = run({"a": model(1.2), "b": model(2.8)}, evaluate=Barrier())
    assert evaluate.calls == pytest.approx([2.0, 0.6, 1.4, 1.0]) and out.adopted == ["a"]
    assert out.weights["w"][0] == pytest.approx(0.6) and "passed alone" in out.excluded["b"]


def test_no_single_received_model_is_ever_taken_whole():
    out, _ = run({"a": model(0.8)})  # |S| = 1 at round 0: Eq. 18 would adopt it whole
    assert out.weights["w"][0] == pytest.approx(0.4) and peer_weight(1.0, 0, 1, 0.5) == 0.5


def test_non_finite_results_are_never_adopted_and_the_own_model_is_kept():
    out, _ = run({"a": model(0.4)}, evaluate=lambda w: assessment([np.nan] * 4))
    assert out.adopted == [] and out.weights["w"][0] == 0.0 and "non-finite" in out.excluded["a"]


def test_a_peer_whose_midpoint_outgrows_the_own_model_is_left_out_without_a_pass():
    own = {"w": np.array([1.0, 1.0])}
    peers = {"big": {"w": np.array([5.0, 5.0])}, "near": {"w": np.array([1.2, 0.8])}}
    evaluate = lambda w: assessment(GOOD)  # noqa: E731
    # halfway to big: 3 times the own norm (growth 2 > 0.5); near's halfway grows by 0: kept, one pass
    out, _ = run(peers, evaluate=evaluate, own=own)
    assert out.adopted == ["near"] and "grew an entry's norm by 2" in out.excluded["big"] and out.evaluations == 1


def test_a_copy_of_the_own_function_is_left_out_before_averaging_and_not_counted():
    predicted = np.array([1, 2, 3, 4])
    own_found = assessment(GOOD, predicted=predicted)
    peers = {"copy": model(0.4), "a": model(0.6)}
    assessed = {"copy": assessment(GOOD, predicted=predicted), "a": assessment(GOOD, predicted=np.array([1, 2, 3, 0]))}
    out = validated_update(OWN, own_found, peers, assessed, ["copy", "a"], 1.0, 0, Validation())
    # a alone with the step it gets alone (min(1, 1/2)): 0.3
    assert out.adopted == ["a"] and out.excluded == {"copy": OWN_FUNCTION} and out.weights["w"][0] == pytest.approx(0.3)


def test_an_order_that_does_not_list_the_selected_peers_once_is_refused():
    with pytest.raises(ValueError, match="order must list"):
        validated_update(OWN, assessment(GOOD), {"a": model(1)}, {"a": assessment(GOOD)}, ["a", "a"], 1.0, 0, None)


@pytest.mark.parametrize("keys", [("empty", "w"), ("w", "empty"), ("empty",)])
def test_an_entry_with_no_values_is_carried_wherever_it_stands(keys):
    parts = {"empty": np.zeros(0, np.float32), "w": np.ones(2, np.float32)}
    own = {k: parts[k] for k in keys}
    peer = {k: v + 0.1 for k, v in own.items()}
    out, _ = run({"p": peer}, evaluate=lambda w: assessment(GOOD), own=own)
    assert out.adopted == ["p"] and out.weights["empty"].size == 0
    if "w" in keys:  # one peer at max_peer_share 1/2: halfway
        np.testing.assert_allclose(out.weights["w"], [1.05, 1.05], rtol=1e-6)


def test_the_memory_a_round_needs_beyond_the_received_models_does_not_grow_with_the_peers():
    # ten 1 MiB models on the longest path: the whole (w 2.0) fails, each alone (0.2) passes, half the step
    # (1.0) fails, the best alone is adopted. Held at once: the own model's copy and flat vector, the scratch
    # difference, the candidate under test: a few model sizes, not one per peer.
    size = 1 << 18
    peers = {}
    for i in range(10):
        w = np.zeros(size, np.float32)
        w[0] = 2.0
        peers[f"p{i}"] = {"w": w}
    own = {"w": np.zeros(size, np.float32)}
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out, evaluate = run(peers, evaluate=Barrier(), own=own)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert evaluate.calls == pytest.approx([2.0] + [0.2] * 10 + [1.0]) and out.adopted == ["p0"]
    assert out.weights["w"][0] == pytest.approx(0.2)
    assert peak < 5 * size * 4, f"peak {peak / (size * 4):.1f} model sizes"


class CountedModel(dict):
    """A received model that counts how often its entries are read."""

    reads = 0

    def __getitem__(self, key):
        self.reads += 1
        return super().__getitem__(key)


def test_a_round_whose_aggregate_passes_reads_each_received_model_once():
    # the midpoint screen and the whole aggregate share one difference a peer: one read of each entry
    peers = {p: CountedModel(model(v)) for p, v in (("a", 0.4), ("b", 0.6), ("c", 0.8))}
    out, _ = run(peers)
    assert out.adopted == ["a", "b", "c"] and out.evaluations == 1
    assert [peers[p].reads for p in peers] == [1, 1, 1]

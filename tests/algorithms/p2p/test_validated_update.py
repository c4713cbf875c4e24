"""The validated aggregation on one-number models whose validation results are given by hand."""

import dataclasses

import numpy as np
import pytest

from lightyear.algorithms.p2p.decayed_update import decayed_mean_update
from lightyear.algorithms.p2p.validated_update import norm_growth, peer_weight
from lightyear.algorithms.p2p.validated_update import validated_update as validated_with_midpoints
from lightyear.algorithms.p2p.validation_bounds import LOSS_SLACK, Bounds
from lightyear.algorithms.p2p.validation_bounds import barrier as loss_barrier

OWN = {"w": np.array([0.0]), "count": np.array(3, dtype=np.int64)}  # w all zero: no norm bound on it


def model(value):
    return {"w": np.array([float(value)]), "count": np.array(9, dtype=np.int64)}


def validated_update(*args, bounds=None, **kwargs):
    """The validated aggregation without the midpoint test (tested on its own below): these cases are
    about the aggregates that follow it."""
    args = list(args)
    if len(args) == 8:
        bounds = args.pop()
    bounds = dataclasses.replace(bounds or Bounds(), midpoint_test=False)
    return validated_with_midpoints(*args, bounds=bounds, **kwargs)


class Validation:
    """Accuracy 1 for a model with w <= 1, else 0; loss 0.2 (w <= 1.5) or 5.0; counts the calls."""

    def __init__(self):
        self.calls = []

    def __call__(self, weights):
        w = float(weights["w"][0])
        self.calls.append(w)
        return (1.0 if w <= 1.0 else 0.0), (0.2 if w <= 1.5 else 5.0)


def test_a_passing_aggregate_is_eq_18_and_costs_one_evaluation():
    evaluate = Validation()
    peers = {"a": model(0.4), "b": model(0.8)}
    out = validated_update(OWN, peers, ["a", "b"], gamma=0.9, t=2, evaluate=evaluate, own_evaluation=(1.0, 0.2))
    # 0 + 0.9^2 * (0.4 + 0.8) / 2 = 0.486
    assert out.weights["w"][0] == pytest.approx(0.486)
    np.testing.assert_allclose(out.weights["w"], decayed_mean_update(OWN, list(peers.values()), 0.9, 2)["w"])
    assert (
        out.adopted == ["a", "b"]
        and out.excluded == {}
        and out.evaluations == 1
        and evaluate.calls == [pytest.approx(0.486)]
    )
    assert out.weights["count"] == 3  # counters keep the own value
    assert out.adopted_evaluation == (1.0, 0.2)


def test_a_peer_whose_addition_fails_is_excluded_and_the_others_kept():
    evaluate = Validation()
    # weight 0.5 each: the whole aggregate 0.5 * (1 + 3) = 2 fails; alone, a gives 0.5 (passes), b 1.5 (accuracy 0);
    # a is kept (its test alone is its adoption: no second pass), then a and b give 2 again and b is excluded:
    # the whole aggregate's model once more, whose evaluation is taken as measured
    out = validated_update(OWN, {"a": model(1.0), "b": model(3.0)}, ["a", "b"], 1.0, 0, evaluate, (1.0, 0.2))
    assert out.weights["w"][0] == pytest.approx(0.5) and out.adopted == ["a"] and list(out.excluded) == ["b"]
    assert "scored 0 (loss 5) on the own validation set against the own model's 1 (loss 0.2)" in out.excluded["b"]
    assert evaluate.calls == [2.0, 0.5, 1.5] and out.evaluations == 3  # no renormalised try: min(1, 0.5) is no larger


def test_a_benign_minority_gets_its_full_step_back():
    evaluate = Validation()
    # three peers, weight 1/3: the whole 1/3 * (0.6 + 0.9 + 9) = 3.5 fails; alone a (0.2) and b (0.3) pass, c (3)
    # fails; a and b together (0.5) pass, with c the whole again fails (the same model: no pass); the kept two
    # with weight 1/2: 0.75, adopted
    peers = {"a": model(0.6), "b": model(0.9), "c": model(9.0)}
    out = validated_update(OWN, peers, ["a", "b", "c"], 1.0, 0, evaluate, (1.0, 0.2))
    assert evaluate.calls == pytest.approx([3.5, 0.2, 0.3, 3.0, 0.5, 0.75])
    assert out.adopted == ["a", "b"] and list(out.excluded) == ["c"] and out.weights["w"][0] == pytest.approx(0.75)


def test_the_loss_bound_excludes_what_accuracy_does_not_see():
    # accuracy unchanged but loss 5.0 > 1.1 * 0.2 + LOSS_SLACK
    def evaluate(weights):
        return 1.0, 5.0

    out = validated_update(OWN, {"a": model(0.5)}, ["a"], 1.0, 0, evaluate, (1.0, 0.2))
    assert out.adopted == [] and list(out.excluded) == ["a"] and out.weights["w"][0] == 0.0
    ok = validated_update(OWN, {"a": model(0.5)}, ["a"], 1.0, 0, lambda w: (1.0, 1.1 * 0.2 + LOSS_SLACK), (1.0, 0.2))
    assert ok.adopted == ["a"]  # exactly at the bound passes


def test_a_candidate_that_grows_an_entry_is_refused_without_a_forward_pass():
    evaluate = Validation()
    own = {"w": np.array([1.0, 0.0])}
    out = validated_update(own, {"a": {"w": np.array([100.0, 0.0])}}, ["a"], 1.0, 0, evaluate, (1.0, 0.2))
    # one peer: weight 0.5, candidate 1 + 0.5 * 99 = 50.5, its norm 49.5 x larger than the own
    assert evaluate.calls == [] and out.evaluations == 0 and out.adopted == []
    assert "grew an entry's norm by 49.5" in out.excluded["a"]
    assert norm_growth(own, {"w": np.array([1.05, 0.0])}) == pytest.approx(0.05)
    assert norm_growth(own, {"w": np.array([0.5, 0.0])}) == 0.0  # shrinking is no growth
    assert norm_growth(
        {"w": np.array([0.0]), "v": np.array([2.0])}, {"w": np.array([7.0]), "v": np.array([3.0])}
    ) == pytest.approx(0.5)


def test_no_single_received_model_is_ever_taken_whole():
    # one selected peer at the first aggregation: Eq. 18 would adopt it as it is (gamma^0 / 1 = 1)
    out = validated_update(OWN, {"a": model(0.8)}, ["a"], 1.0, 0, Validation(), (1.0, 0.2))
    assert out.weights["w"][0] == pytest.approx(0.4)
    assert peer_weight(1.0, 0, 1, 0.5) == 0.5 and peer_weight(0.5, 2, 8, 0.5) == pytest.approx(0.25 / 8)
    whole = validated_update(
        OWN, {"a": model(0.8)}, ["a"], 1.0, 0, Validation(), (1.0, 0.2), Bounds(max_peer_share=1.0)
    )
    assert whole.weights["w"][0] == pytest.approx(0.8)


def test_non_finite_results_are_never_adopted_and_no_selection_keeps_the_own_model():
    out = validated_update(OWN, {"a": model(0.5)}, ["a"], 1.0, 0, lambda w: (float("nan"), 0.1), (1.0, 0.2))
    assert out.adopted == [] and out.weights["w"][0] == 0.0
    empty = validated_update(OWN, {}, [], 1.0, 0, Validation(), (0.7, 0.3))
    assert empty.adopted == [] and empty.evaluations == 0 and empty.adopted_evaluation == (0.7, 0.3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"delta": 1.5}, "validation_delta must be a number in"),
        ({"delta": -0.1}, "validation_delta"),
        ({"max_loss_growth": -1}, "max_loss_growth must be a number >= 0"),
        ({"max_norm_growth": float("inf")}, "max_norm_growth"),
        ({"max_peer_share": 0.0}, "max_peer_share must be a number in \\(0, 1\\]"),
        ({"max_peer_share": True}, "max_peer_share"),
    ],
)
def test_bad_bounds_are_refused_naming_the_setting(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Bounds(**kwargs)


def test_an_order_that_does_not_list_the_selected_peers_once_is_refused():
    with pytest.raises(ValueError, match="order must list every selected peer once"):
        validated_update(OWN, {"a": model(0.5)}, ["a", "a"], 1.0, 0, Validation(), (1.0, 0.2))


def test_the_peers_that_help_most_alone_are_added_first():
    """Two entries, weight 1/3. Accuracy 1 while both entries are <= 0.25; the loss 0.2 - 0.05 w2 falls
    along the second entry. x = (0.6, 0), y = (0, 0.3), z = (0.3, 0.3). Whole: (0.3, 0.2) fails. Alone:
    x (0.2, 0) loss 0.2, y (0, 0.1) and z (0.1, 0.1) loss 0.195: all pass, and y, z come before x (in the
    given order x, y, z they would not). y + z = (0.1, 0.2) passes; adding x gives the whole again and
    fails. The kept y, z renormalised to 1/2: (0.15, 0.3) fails, so (0.1, 0.2) is adopted."""
    calls = []

    def evaluate(weights):
        w1, w2 = (float(v) for v in weights["w"])
        calls.append((round(w1, 6), round(w2, 6)))
        return (1.0 if w1 <= 0.25 and w2 <= 0.25 else 0.0), 0.2 - 0.05 * w2

    own = {"w": np.zeros(2)}
    peers = {"x": {"w": np.array([0.6, 0.0])}, "y": {"w": np.array([0.0, 0.3])}, "z": {"w": np.array([0.3, 0.3])}}
    out = validated_update(own, peers, ["x", "y", "z"], 1.0, 0, evaluate, (1.0, 0.2))
    assert out.adopted == ["y", "z"] and list(out.excluded) == ["x"]
    np.testing.assert_allclose(out.weights["w"], [0.1, 0.2])
    assert calls == [(0.3, 0.2), (0.2, 0.0), (0.0, 0.1), (0.1, 0.1), (0.1, 0.2), (0.3, 0.2), (0.15, 0.3)]


def test_a_peer_whose_contribution_gave_non_finite_outputs_is_tried_last():
    # p0 helps alone; p1 (loss 1.6 alone) and p3 (1.5) fail alone; p2 gives non-finite outputs.
    # Peers that failed alone are added by their loss, the non-finite one last: p0, p3, p1, p2
    # (a NaN key left Python's sort in the order given and adopted p0 + p1 at loss 0.8, not p0 + p3 at 0.6)
    own = {"w": np.array([10.0, 0, 0, 0, 0])}
    peers = {f"p{i}": {"w": own["w"] + np.eye(5)[i + 1]} for i in range(4)}
    effect = {1: -0.7, 2: +0.6, 4: +0.5}  # the loss per unit each peer's coordinate adds (at weight 1/4)

    def evaluate(weights):
        w = weights["w"]
        if w[3] > 0:
            return float("nan"), float("nan")
        return 1.0, 1.0 + sum(c * w[i] / 0.25 for i, c in effect.items())

    out = validated_update(own, peers, ["p0", "p1", "p2", "p3"], 1.0, 0, evaluate, (1.0, 1.0))
    assert out.adopted == ["p0", "p3"]
    # the kept pair at its renormalised weight 1/2 each: loss 1 + 4 (-0.7 / 2 + 0.5 / 2) = 0.6
    assert out.adopted_evaluation[1] == pytest.approx(0.6)
    assert [c.peers for c in out.candidates[5:8]] == [("p0", "p3"), ("p0", "p3", "p1"), ("p0", "p3", "p2")]


@pytest.mark.parametrize("keys", [("empty", "w"), ("w", "empty"), ("empty",)])
def test_an_entry_with_no_values_is_carried_wherever_it_stands(keys):
    parts = {"empty": np.zeros(0, np.float32), "w": np.ones(2, np.float32)}
    own = {k: parts[k] for k in keys}
    peer = {k: v + 0.1 for k, v in own.items()}
    out = validated_update(own, {"p": peer}, ["p"], 1.0, 0, lambda w: (1.0, 0.1), (1.0, 0.1))
    assert out.adopted == ["p"] and out.weights["empty"].size == 0
    if "w" in keys:  # one peer at max_peer_share 1/2: halfway
        np.testing.assert_allclose(out.weights["w"], [1.05, 1.05], rtol=1e-6)


def barrier(weights):
    """Accuracy 1 and loss 0.2 everywhere but on 0.8 < w < 1.2, where accuracy is 0 and loss 5: two
    models that predict alike with a barrier between them."""
    w = float(weights["w"][0])
    return (0.0, 5.0) if 0.8 < w < 1.2 else (1.0, 0.2)


def test_a_peer_with_a_barrier_halfway_is_left_out_before_averaging_and_not_counted():
    """Own 0, four peers at 0.4 and one at 2.0 (each scoring 1, loss 0.2, on the own validation set).
    Without the test the whole aggregate 1/5 (4 * 0.4 + 2.0) = 0.72 passes and holds the far peer. With
    it the midpoints are 0.2 (four times) and 1.0, which scores 0: the far peer is left out, and the four
    others share the step: 1/4 (4 * 0.4) = 0.4, adopted. Five midpoints and one aggregate: 6 passes."""
    peers = {**{f"h{i}": model(0.4) for i in range(4)}, "far": model(2.0)}
    order = list(peers)
    found = {p: barrier(w) for p, w in peers.items()}
    out = validated_with_midpoints(OWN, peers, order, 1.0, 0, barrier, (1.0, 0.2), Bounds(), found)
    assert out.adopted == ["h0", "h1", "h2", "h3"] and list(out.excluded) == ["far"]
    assert out.weights["w"][0] == pytest.approx(0.4) and out.evaluations == 6
    assert "the model halfway to it scored 0 (loss 5)" in out.excluded["far"]
    assert out.midpoints["far"] == (0.0, 5.0) and out.midpoints["h0"] == (1.0, 0.2)
    without = validated_update(OWN, peers, order, 1.0, 0, barrier, (1.0, 0.2))
    assert without.adopted == order and without.weights["w"][0] == pytest.approx(0.72)


@pytest.mark.parametrize(
    "peer, halfway, passes",
    [
        # the reference is the larger of the two losses: a peer that does worse here than the own model (its
        # data is elsewhere) passes when halfway is within 1.5 times its loss; the own loss alone would refuse it
        ((0.9, 0.5), (0.92, 0.45), True),
        ((0.9, 0.5), (0.92, 1.5 * 0.5 + LOSS_SLACK), True),  # exactly at the bound
        ((0.9, 0.5), (0.92, 0.77), False),  # above 1.5 * 0.5 + 0.01
        ((0.9, 0.5), (0.5, 0.45), True),  # accuracy is the aggregate's test, not the midpoint's
        ((0.9, float("nan")), (1.0, 0.1), False),  # a peer with non-finite outputs has no reference
        ((0.9, 0.5), (float("inf"), 0.1), False),
        ((0.9, 0.5), (0.9, float("nan")), False),
    ],
)
def test_the_midpoint_loss_is_judged_against_the_larger_of_the_two_ends(peer, halfway, passes):
    no_barrier = Bounds(midpoint_barrier=10.0)  # the barrier bound has its own test below
    out = validated_with_midpoints(
        OWN, {"a": model(0.5)}, ["a"], 1.0, 0, lambda w: halfway, (1.0, 0.2), no_barrier, {"a": peer}
    )
    # (one peer at share 1/2: the aggregate is the midpoint again, judged against the own model alone)
    assert out.midpoints["a"] == halfway and ("halfway" in out.excluded.get("a", "")) is not passes


def test_the_loss_barrier_is_the_midpoints_loss_above_the_mean_of_the_ends():
    assert loss_barrier(2.0, 0.2, 1.8) == pytest.approx(1.0)  # 2.0 - (0.2 + 1.8) / 2
    assert loss_barrier(0.3, 0.2, 0.6) == pytest.approx(-0.1)  # below the straight line: no barrier


@pytest.mark.parametrize(
    "own, peer, halfway_loss, why",
    [
        # own loss 0.2, the peer's 1.8 here (its data is elsewhere): mean 1.0, the ratio bound 1.5 * 1.8 + 0.01 = 2.71
        ((1.0, 0.2), (0.6, 1.8), 1.4, ""),  # 0.4 above the mean: at the barrier bound, which passes
        ((1.0, 0.2), (0.6, 1.8), 1.45, "a loss 0.45 above the mean of the two (more than midpoint_barrier 0.4)"),
        # near chance (ln 10 = 2.3), as halfway to a copy with its units permuted: far within the ratio bound
        ((1.0, 0.2), (0.6, 1.8), 2.0, "a loss 1 above the mean of the two (more than midpoint_barrier 0.4)"),
        # own 0.05, peer 0.1: mean 0.075, ratio bound 0.16; 0.2 is 0.125 above the mean but over the ratio bound
        ((1.0, 0.05), (0.9, 0.1), 0.2, "a loss above 1 + midpoint_loss_growth (1.5) times the larger of the two"),
    ],
)
def test_a_peer_whose_midpoint_rises_above_the_line_between_the_ends_is_left_out(own, peer, halfway_loss, why):
    out = validated_with_midpoints(
        OWN, {"a": model(0.5)}, ["a"], 1.0, 0, lambda w: (0.9, halfway_loss), own, Bounds(), {"a": peer}
    )
    assert out.barriers == {"a": pytest.approx(halfway_loss - (own[1] + peer[1]) / 2)}
    if why:
        assert why in out.excluded["a"] and out.excluded["a"].endswith("(left out before averaging)")
        assert out.adopted == [] and out.evaluations == 1  # the midpoint's pass only: no aggregate is tested
    else:
        # past the midpoint test; the aggregate (at round 0 the midpoint itself) is then judged against the own
        # model alone, and its loss of 1.4 against 0.2 refuses it after averaging
        assert out.midpoints["a"] == (0.9, halfway_loss) and "halfway" not in out.excluded["a"]


def test_the_midpoint_test_needs_every_selected_peers_evaluation():
    with pytest.raises(ValueError, match="the midpoint test needs peer_evaluations"):
        validated_with_midpoints(OWN, {"a": model(0.5)}, ["a"], 1.0, 0, barrier, (1.0, 0.2), Bounds(), {"b": (1, 0)})
    with pytest.raises(ValueError, match="midpoint_test must be true or false"):
        Bounds(midpoint_test="yes")
    with pytest.raises(ValueError, match="midpoint_loss_growth must be a number >= 0"):
        Bounds(midpoint_loss_growth=-0.5)
    with pytest.raises(ValueError, match="midpoint_norm_growth must be a number >= 0 .1: halfway to a peer"):
        Bounds(midpoint_norm_growth=float("nan"))
    with pytest.raises(ValueError, match="midpoint_barrier must be a number >= 0 .0.4: halfway to a peer"):
        Bounds(midpoint_barrier=-0.1)


def test_a_peer_whose_midpoint_outgrows_the_own_model_is_left_out_without_a_pass():
    """Own w = (1, 0), norm 1. Halfway to near (1.4, 0) is (1.2, 0): grown by 0.2; to edge (3, 0) it is
    (2, 0): grown by exactly 1, the bound, which passes; to big (4, 0) it is (2.5, 0): grown by 1.5, left
    out with no pass. The two midpoints evaluated, then the aggregate of near and edge at 1/2 each:
    1 + 1/2 (0.4 + 2) = 2.2 (the aggregate's own norm bound set aside here): 3 passes."""
    evaluate = Validation()
    own = {"w": np.array([1.0, 0.0])}
    peers = {
        "near": {"w": np.array([1.4, 0.0])},
        "big": {"w": np.array([4.0, 0.0])},
        "edge": {"w": np.array([3.0, 0.0])},
    }
    found = {p: (1.0, 0.2) for p in peers}
    lenient = Bounds(
        max_norm_growth=10.0, delta=1.0, max_loss_growth=100.0, midpoint_loss_growth=100.0, midpoint_barrier=100.0
    )
    out = validated_with_midpoints(own, peers, ["near", "big", "edge"], 1.0, 0, evaluate, (1.0, 0.2), lenient, found)
    assert evaluate.calls == [pytest.approx(1.2), pytest.approx(2.0), pytest.approx(2.2)] and out.evaluations == 3
    assert list(out.excluded) == ["big"] and set(out.midpoints) == {"near", "edge"}
    assert "the model halfway to it grew an entry's norm by 1.5 over the own model's" in out.excluded["big"]
    assert out.adopted == ["near", "edge"] and out.weights["w"][0] == pytest.approx(2.2)
    tight = validated_with_midpoints(
        own,
        peers,
        ["near", "big", "edge"],
        1.0,
        0,
        Validation(),
        (1.0, 0.2),
        dataclasses.replace(lenient, midpoint_norm_growth=0.25),
        found,
    )
    assert sorted(tight.excluded) == ["big", "edge"] and tight.adopted == ["near"]


def test_a_midpoint_measured_before_or_under_another_name_costs_no_pass():
    evaluate = Validation()
    same = model(0.4)
    peers = {"a": same, "b": same, "c": model(0.6)}
    found = {p: (1.0, 0.2) for p in peers}
    out = validated_with_midpoints(
        OWN, peers, ["a", "b", "c"], 1.0, 0, evaluate, (1.0, 0.2), Bounds(), found, known_midpoints={"c": (1.0, 0.2)}
    )
    # a's midpoint (0.2) serves b, c's is known: one midpoint pass, then the aggregate 1/3 (0.4 + 0.4 + 0.6)
    assert evaluate.calls == [pytest.approx(0.2), pytest.approx(0.4667, abs=1e-4)] and out.evaluations == 2
    assert out.midpoints == {"a": (1.0, 0.2)} and out.adopted == ["a", "b", "c"]


def test_a_model_tested_twice_is_evaluated_once():
    """Own 0, one peer at 0.8 (evaluations all pass). Round 0: its midpoint is 0.4, and so is its share of
    1/2 in the aggregate: one pass. Round 1 with gamma 0.9: the aggregate is 0.45 * 0.8 = 0.36, a model of
    its own: two passes."""
    found = {"a": (1.0, 0.2)}
    first, later = Validation(), Validation()
    out = validated_with_midpoints(OWN, {"a": model(0.8)}, ["a"], 0.9, 0, first, (1.0, 0.2), Bounds(), found)
    assert first.calls == [pytest.approx(0.4)] and out.evaluations == 1 and out.weights["w"][0] == pytest.approx(0.4)
    assert out.adopted == ["a"] and out.candidates[0].reused and out.adopted_evaluation == (1.0, 0.2)
    step = validated_with_midpoints(OWN, {"a": model(0.8)}, ["a"], 0.9, 1, later, (1.0, 0.2), Bounds(), found)
    assert later.calls == [pytest.approx(0.4), pytest.approx(0.36)] and step.evaluations == 2

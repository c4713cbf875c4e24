"""The adaptive step search, the harmful direction and the attack on Krum, on hand-worked cases.

Krum case, 1-D: benign updates 5, 3, 1, -1, -3 (mean 1, so s = +1 and the crafted update is
c = -lambda), m = 2 attackers: n = 7, f = default_f(7) = 2, each score sums the n - f - 2 = 3
smallest squared distances. For 2 <= lambda < 3 (c between -3 and -1):
  crafted: 0 (the other copy) + (lambda - 3)^2 (to -3) + (lambda - 1)^2 (to -1)
  b = -3:  2 (lambda - 3)^2 (both copies) + 4 (to -1)
crafted < b = -3  <=>  (lambda - 1)^2 < (lambda - 3)^2 + 4  <=>  lambda < 3; at lambda = 3 the two tie
(4 = 4) and a tie goes to the lower index, the benign update. Every other benign score is >= 6 there
(b = -1: 2 (lambda - 1)^2 + 4), and above 3 the crafted score only grows faster than b = -3's.
So Krum picks a crafted copy for lambda just below 3 and never from 3 on: lambda* = 3.
"""

import math

import numpy as np
import pytest

from lightyear.algorithms.attacks import adaptive as A
from lightyear.algorithms.star.krum import krum_select


class Counted:
    """An acceptance test that records the alphas it was asked about."""

    def __init__(self, rule):
        self.rule, self.calls = rule, []

    def __call__(self, alpha):
        self.calls.append(alpha)
        return self.rule(alpha)


# --- largest_accepted_step --------------------------------------------------------------------


def test_threshold_predicate_within_tol_never_above():
    accepts = Counted(lambda a: a <= 3.7)
    alpha = A.largest_accepted_step(accepts, max_step=10.0, tol=0.01)
    assert 3.7 - 0.01 <= alpha <= 3.7
    assert alpha in accepts.calls and accepts.rule(alpha)
    # honest check, grid 10, 5, 2.5 (first accepted), then bisection of [2.5, 5]: after k halvings
    # the bracket is 2.5 / 2^k wide, <= 0.01 from k = 8 on (0.0098): 1 + 3 + 8 = 12 calls
    assert accepts.calls[:4] == [0.0, 10.0, 5.0, 2.5]
    assert len(accepts.calls) == 12 <= 16


def test_max_step_accepted_is_returned_at_once():
    accepts = Counted(lambda a: True)
    assert A.largest_accepted_step(accepts, 10.0, 0.01) == 10.0
    assert accepts.calls == [0.0, 10.0]


def test_honest_rejected_gives_zero():
    accepts = Counted(lambda a: a > 1.0)  # rejects the honest model (and accepts large steps)
    assert A.largest_accepted_step(accepts, 10.0, 0.01) == 0.0
    assert accepts.calls == [0.0]


def test_without_honest_check_zero_is_not_tested():
    accepts = Counted(lambda a: a <= 3.7)
    alpha = A.largest_accepted_step(accepts, 10.0, 0.01, check_honest=False)
    assert 0.0 not in accepts.calls and 3.69 <= alpha <= 3.7


def test_nothing_accepted_down_to_tol_gives_zero():
    accepts = Counted(lambda a: a <= 0.001)
    assert A.largest_accepted_step(accepts, 10.0, 0.01, max_evaluations=100) == 0.0
    # grid 10, 5, ..., 10/2^9 = 0.0195 (the last >= tol): 10 points after the honest check
    assert len(accepts.calls) == 11 and min(accepts.calls[1:]) >= 0.01


def test_budget_caps_the_calls_and_the_answer_is_still_accepted():
    for budget in range(1, 14):
        accepts = Counted(lambda a: a <= 3.7)
        alpha = A.largest_accepted_step(accepts, 10.0, 0.01, max_evaluations=budget)
        assert len(accepts.calls) <= budget
        assert alpha == 0.0 or (alpha in accepts.calls and alpha <= 3.7)
    # 4 calls: honest, 10, 5, 2.5 -> 2.5 accepted but no call left to bisect
    assert A.largest_accepted_step(lambda a: a <= 3.7, 10.0, 0.01, max_evaluations=4) == 2.5


def test_non_monotone_predicate_returns_a_tested_accepted_step():
    # accepted on [0, 1] and on [4.5, 6], rejected elsewhere: grid 10 no, 5 yes -> bisect [5, 10]
    def rule(a):
        return a <= 1.0 or 4.5 <= a <= 6.0

    accepts = Counted(rule)
    alpha = A.largest_accepted_step(accepts, 10.0, 0.01)
    assert alpha in accepts.calls and rule(alpha)
    assert 6.0 - 0.01 <= alpha <= 6.0


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"max_step": 0.0}, "max_step must be a finite number > 0"),
        ({"max_step": float("inf")}, "max_step must"),
        ({"tol": -1.0}, "tol must be"),
        ({"tol": 20.0}, r"tol \(20.0\) must not exceed max_step"),
        ({"max_evaluations": 0}, "max_evaluations must be an integer >= 1"),
        ({"max_evaluations": 2.5}, "max_evaluations must"),
        ({"accepts": 3}, "accepts must be a callable"),
    ],
)
def test_largest_accepted_step_refuses(kw, match):
    args = {"accepts": lambda a: True, "max_step": 10.0, "tol": 0.01} | kw
    with pytest.raises(ValueError, match=match):
        A.largest_accepted_step(**args)


# --- harmful_direction -------------------------------------------------------------------------


def test_reverse_direction_is_the_unit_negative_benign_mean():
    known = [[2.0, 0.0], [4.0, 8.0]]  # mean [3, 4], norm 5
    np.testing.assert_allclose(A.harmful_direction(np.array([9.0, 9.0]), known), [-0.6, -0.8])


def test_reverse_direction_without_benign_updates_uses_own():
    np.testing.assert_allclose(A.harmful_direction(np.array([0.0, -2.0]), None), [0.0, 1.0])
    np.testing.assert_allclose(A.harmful_direction(np.array([0.0, -2.0]), []), [0.0, 1.0])


def test_sign_direction_is_unit_length():
    # mean [3, -0.5, 0]: -sign = [-1, 1, 0], norm sqrt(2)
    d = A.harmful_direction(np.zeros(3), [[3.0, -1.0, 0.0], [3.0, 0.0, 0.0]], kind="sign")
    np.testing.assert_allclose(d, [-1 / math.sqrt(2), 1 / math.sqrt(2), 0.0])


def test_zero_direction_is_all_zeros():
    out = A.harmful_direction(np.array([1.0, 1.0]), [[1.0, -1.0], [-1.0, 1.0]])
    assert out.tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    "own,known,kind,match",
    [
        (np.ones(2), None, "up", "unknown direction 'up'"),
        (np.ones((2, 2)), None, "reverse", "1-D vector"),
        (np.ones(2), [[1.0, 2.0, 3.0]], "reverse", "3 values but own_update has 2"),
        (np.array([np.inf, 1.0]), None, "reverse", "NaN or inf"),
    ],
)
def test_harmful_direction_refuses(own, known, kind, match):
    with pytest.raises(ValueError, match=match):
        A.harmful_direction(own, known, kind)


# --- krum_adaptive -----------------------------------------------------------------------------

BENIGN = [[5.0], [3.0], [1.0], [-1.0], [-3.0]]  # -3, the runner-up, last: right before the copies


def with_copies(crafted, m=2):
    return np.vstack([np.array(BENIGN), np.tile(crafted, (m, 1))])


def test_krum_adaptive_by_hand():
    crafted, lam = A.krum_adaptive(BENIGN, n_attackers=2)
    tol = 13.0 / 1024  # default max_lambda = (max norm 5 + spread 8) / ||u|| 1 = 13, tol = 13 / 1024
    assert 3.0 - tol <= lam < 3.0
    np.testing.assert_array_equal(crafted, [-lam])
    assert krum_select(with_copies(crafted))[0] >= 5  # a crafted copy is selected (f = default_f(7) = 2)
    assert krum_select(with_copies([-(lam + 2 * tol)]))[0] < 5
    assert krum_select(with_copies([-3.0]))[0] == 4  # the tie at lambda* goes to benign -3 (index 4)


def test_krum_adaptive_random_high_dimensional_case():
    rng = np.random.default_rng(11)
    benign = rng.normal(0.1, 1.0, size=(8, 20))
    for direction in A.DIRECTIONS:
        crafted, lam = A.krum_adaptive(benign, n_attackers=3, direction=direction, tol=1e-3)
        assert lam > 0
        assert krum_select(np.vstack([benign, np.tile(crafted, (3, 1))]))[0] >= 8
        bigger = crafted * (lam + 2e-3) / lam
        assert krum_select(np.vstack([benign, np.tile(bigger, (3, 1))]))[0] < 8


def test_krum_adaptive_zero_benign_mean_gives_zero():
    crafted, lam = A.krum_adaptive([[1.0], [-1.0], [2.0], [-2.0], [0.0]], n_attackers=1)
    assert lam == 0.0 and crafted.tolist() == [0.0]


def test_krum_adaptive_copies_krum_cannot_outvote_reach_max_lambda():
    # 3 benign + 4 copies, f = 2: each score sums n - f - 2 = 3 neighbours, and a copy's 3 nearest
    # are the other copies (score 0), so Krum picks a copy for every lambda: max_lambda comes back
    crafted, lam = A.krum_adaptive([[1.0], [2.0], [3.0]], n_attackers=4, f=2, max_lambda=50.0)
    assert lam == 50.0 and crafted.tolist() == [-50.0]


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"n_attackers": 0}, "n_attackers must be an integer >= 1"),
        ({"f": 3}, r"n > 2f \+ 2"),
        ({"direction": "up"}, "unknown direction 'up'"),
        ({"max_lambda": -1.0}, "max_lambda must be"),
        ({"tol": 0.0}, "tol must be"),
    ],
)
def test_krum_adaptive_refuses(kw, match):
    args = {"known_benign_updates": BENIGN, "n_attackers": 2} | kw
    with pytest.raises(ValueError, match=match):
        A.krum_adaptive(**args)


# ---------------------------------------------------------------------------- most_harmful
def test_most_harmful_takes_the_accepted_candidate_of_largest_harm_across_families():
    # "step": accepted up to 3, harm (s, 0) peaks at the edge; "fixed": one candidate, accepted, harm (1, 9)
    def predict(candidate):
        family, s = candidate
        if family == "fixed":
            return True, (1.0, 9.0)
        return s <= 3.0, (s, 0.0)

    families = {"step": (lambda s: ("step", s), 8.0), "fixed": (lambda s: ("fixed", s), None)}
    candidate, fields = A.most_harmful(families, predict, tol_share=1 / 64, max_evaluations=16)
    # downward 8 (no), 4 (no), 2 (yes), then bisection of [2, 4] to 1/8: 3 (yes), 3.5 (no), 3.25 (no), 3.125 (no)
    assert candidate == ("step", 3.0) and fields["attack_family"] == "step" and fields["attack_strength"] == 3.0
    assert fields["attack_harm"] == 3.0 and fields["attack_evaluations"] == 8


def test_most_harmful_compares_harm_lexicographically_and_finds_none_without_harm():
    families = {"a": (lambda s: "a", None), "b": (lambda s: "b", None)}
    harms = {"a": (0.0, 5.0), "b": (0.0, 2.0)}  # the same accuracy drop: the larger loss rise wins
    assert A.most_harmful(families, lambda c: (True, harms[c]))[0] == "a"
    none, fields = A.most_harmful(families, lambda c: (True, (0.0, -1.0)))  # accepted but harmless
    assert none is None and fields["attack_family"] == "" and fields["attack_evaluations"] == 2
    rejected, _ = A.most_harmful(families, lambda c: (False, (9.0, 9.0)))  # harmful but never accepted
    assert rejected is None


# --- fedcap_targeted --------------------------------------------------------------------------
def predicted_harm(d, benign, attackers, alpha=10.0, phi=0.1):
    """The harm fedcap_targeted maximises, written out: u = -mean / ||mean||; every benign site's
    softmax weight on the attackers' copies of d (its pool: the other benign sites and the copies)
    times d . u, plus the attackers' share of the global mean times d . u."""
    benign = [np.asarray(b, dtype=float) for b in benign]
    mean = np.mean(benign, axis=0)
    u = -mean / np.linalg.norm(mean)
    along = float(d @ u)
    harm = attackers / (len(benign) + attackers) * along
    cos = lambda a, b: float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))  # noqa: E731
    for k, mine in enumerate(benign):
        logits = [alpha * cos(mine, o) for j, o in enumerate(benign) if j != k] + [alpha * cos(mine, d)] * attackers
        soft = np.exp(np.array(logits) - max(logits))
        harm += (1 - phi) * soft[-attackers:].sum() / soft.sum() * along
    return harm


def far_edge_of(benign, t_norm, margin):
    """r u: the farthest point along u = -mean / ||mean|| inside FedCAP's norm ball, r = (1 - margin) T_norm."""
    mean = np.mean([np.asarray(b, dtype=float) for b in benign], axis=0)
    return (1 - margin) * t_norm * -mean / np.linalg.norm(mean)


def test_fedcap_targeted_trades_cosine_for_weight_and_beats_the_far_edge():
    # two orthogonal benign sites: the far edge r u has cosine -0.71 with both and gets almost no weight;
    # a direction closer to one of them wins weight in its customised model and still points against the mean
    benign = {"a": [1.0, 0.0], "b": [0.0, 1.0]}
    crafted, found = A.fedcap_targeted(benign, attackers=1, t_norm=10.0, alpha=10.0, phi=0.1, margin=0.02)
    assert np.linalg.norm(crafted) == pytest.approx(9.8)  # inside the norm ball FedCAP keeps
    far_edge = far_edge_of(benign.values(), 10.0, 0.02)
    mine, edge = predicted_harm(crafted, benign.values(), 1), predicted_harm(far_edge, benign.values(), 1)
    assert found["harm"] == pytest.approx(mine) and mine > 1.3 * edge
    assert found["target"] == "a" and 0.0 < found["angle"] < math.pi / 2
    # three sites fanned over 90 degrees: no angle wins enough weight, the far edge is the best candidate
    fanned = {"a": [1.0, 0.0], "b": [0.7071, 0.7071], "c": [0.0, 1.0]}
    crafted, found = A.fedcap_targeted(fanned, attackers=2, t_norm=10.0, alpha=10.0, phi=0.1)
    np.testing.assert_allclose(crafted, far_edge_of(fanned.values(), 10.0, 0.02), atol=1e-6)


def test_fedcap_targeted_refuses_what_it_cannot_use():
    with pytest.raises(ValueError, match="needs the benign calibrated updates"):
        A.fedcap_targeted({}, 1, 10.0, 10.0, 0.1)
    with pytest.raises(ValueError, match="attackers must be an integer >= 1"):
        A.fedcap_targeted({"a": [1.0, 0.0]}, 0, 10.0, 10.0, 0.1)

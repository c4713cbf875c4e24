"""The FedCAP attacks on hand-worked update vectors.

Min-Max / Min-Sum case, 1-D: known updates 0, 0, 3. mean = 1, population std =
sqrt((1 + 1 + 4) / 3) = sqrt(2), so p = -sqrt(2) and the crafted update is 1 - t with t = gamma sqrt(2).
  Min-Max: distances to the known ones |1 - t|, |1 - t|, |t + 2|; the largest is t + 2 (t >= 0).
           bound = max pairwise distance = 3, so t <= 1: gamma = 1/sqrt(2) ~ 0.70711, crafted 0.
  Min-Sum: sum of squares (1 - t)^2 * 2 + (t + 2)^2 = 6 + 3 t^2 (the linear terms cancel around
           the mean); bound = max_i sum_j d_ij^2 = max(0 + 9, 0 + 9, 9 + 9) = 18, so t^2 <= 4:
           gamma = 2/sqrt(2) = sqrt(2) ~ 1.41421, crafted -1.
"""

import math

import numpy as np
import pytest

from lightyear.algorithms.attacks import updates as U

TOL = 1e-5
KNOWN_1D = [[0.0], [0.0], [3.0]]


def max_distance_holds(crafted, known):
    known = np.asarray(known, dtype=float)
    bound = max(np.sum((a - b) ** 2) for a in known for b in known)
    return max(np.sum((crafted - k) ** 2) for k in known) <= bound


def sum_distance_holds(crafted, known):
    known = np.asarray(known, dtype=float)
    bound = max(sum(np.sum((a - b) ** 2) for b in known) for a in known)
    return sum(np.sum((crafted - k) ** 2) for k in known) <= bound


# --- SF, MR, IPM ----------------------------------------------------------------------------


def test_sign_flip_and_model_replacement():
    d = np.array([1.0, -2.0, 0.5])
    np.testing.assert_array_equal(U.sign_flip(d), [-1.0, 2.0, -0.5])
    np.testing.assert_array_equal(U.model_replacement(d, 4), [4.0, -8.0, 2.0])
    np.testing.assert_array_equal(d, [1.0, -2.0, 0.5])


@pytest.mark.parametrize("scale", [0, -1.0, float("inf"), True, "3"])
def test_model_replacement_refuses_bad_scale(scale):
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        U.model_replacement(np.ones(2), scale)


def test_ipm_points_against_the_benign_mean():
    mean = np.array([0.5, -1.0, 2.0])
    out = U.ipm(mean, 10)
    np.testing.assert_array_equal(out, [-5.0, 10.0, -20.0])
    assert np.dot(out, mean) < 0  # -10 * ||mean||^2 = -52.5
    assert np.dot(out, mean) == pytest.approx(-52.5)
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        U.ipm(mean, 0)


def test_update_must_be_flat_and_finite():
    with pytest.raises(ValueError, match="1-D vector.*flatten"):
        U.sign_flip(np.ones((2, 2)))
    with pytest.raises(ValueError, match="NaN or inf"):
        U.sign_flip(np.array([1.0, np.nan]))


# --- LIE ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n,m,expected",
    [
        (8, 3, 0.6744897501960817),  # s = floor(5) - 3 = 2, Phi^-1(6/8 = 0.75)
        (10, 2, 0.2533471031357998),  # s = floor(6) - 2 = 4, Phi^-1(6/10 = 0.6)
        (10, 3, 0.5244005127080407),  # s = 6 - 3 = 3, Phi^-1(0.7)
        (2, 1, 0.0),  # s = 2 - 1 = 1, Phi^-1(1/2) = 0: the mean itself
        (4, 3, 0.6744897501960817),  # s = 3 - 3 = 0 -> clamped to 1, Phi^-1(3/4)
    ],
)
def test_lie_z_max_by_hand(n, m, expected):
    assert U.lie_z_max(n, m) == pytest.approx(expected, abs=1e-12)


def test_lie_z_max_majority_clamp_equals_one_supporter():
    # n = 7: m = 4 gives s = 4 - 4 = 0 -> 1, same as m = 3 (s = 1): Phi^-1(6/7)
    assert U.lie_z_max(7, 4) == U.lie_z_max(7, 3) == pytest.approx(1.0675705238781414)
    assert all(math.isfinite(U.lie_z_max(7, m)) for m in range(1, 7))


@pytest.mark.parametrize("n,m", [(1, 1), (5, 0), (5, 5), (5, 6), (5.0, 2), (5, True)])
def test_lie_z_max_refuses(n, m):
    with pytest.raises(ValueError, match=r"n \(participants|m \(attackers"):
        U.lie_z_max(n, m)


def test_lie_on_three_vectors_by_hand():
    # coordinates: [1, 2, 3] -> mu 2, sample std 1 (population sqrt(2/3)); [4, 4, 4] -> mu 4, std 0;
    # [0, 0, 3] -> mu 1, sample std sqrt(3) (population sqrt(2))
    known = [[1.0, 4.0, 0.0], [2.0, 4.0, 0.0], [3.0, 4.0, 3.0]]
    # the default is the sample std (ddof=1), as in Baruch et al.'s code and byzfl
    np.testing.assert_allclose(U.lie(known, 1.5), [0.5, 4.0, 1 - 1.5 * math.sqrt(3)])
    np.testing.assert_allclose(U.lie(known, 1.5, ddof=0), [2 - 1.5 * math.sqrt(2 / 3), 4.0, 1 - 1.5 * math.sqrt(2)])


def test_lie_with_two_pooled_attackers_is_1_41_times_larger_by_default_than_with_the_population_std():
    known = [[0.0], [2.0]]  # mean 1; sample std sqrt(2), population std 1
    assert 1.0 - U.lie(known, 1.0)[0] == pytest.approx(math.sqrt(2))
    assert 1.0 - U.lie(known, 1.0, ddof=0)[0] == pytest.approx(1.0)


def test_lie_one_known_update_is_that_update():
    np.testing.assert_array_equal(U.lie([[1.0, -2.0]], 3.0), [1.0, -2.0])  # no spread to move along
    np.testing.assert_array_equal(U.lie([[1.0, -2.0]], 3.0, ddof=0), [1.0, -2.0])


@pytest.mark.parametrize(
    "z,ddof,match",
    [(-0.5, 0, "z must be a finite number >= 0"), (float("nan"), 0, "z must"), (1.0, 2, "ddof must be 0")],
)
def test_lie_refuses(z, ddof, match):
    with pytest.raises(ValueError, match=match):
        U.lie(KNOWN_1D, z, ddof)


# --- Min-Max / Min-Sum -------------------------------------------------------------------------


def test_min_max_by_hand():
    crafted, gamma = U.min_max(KNOWN_1D, tol=TOL)
    assert 1 / math.sqrt(2) - TOL <= gamma <= 1 / math.sqrt(2)
    np.testing.assert_allclose(crafted, [1 - gamma * math.sqrt(2)])
    assert abs(crafted[0]) < 2 * TOL
    assert max_distance_holds(crafted, KNOWN_1D)
    assert not max_distance_holds(1 - (gamma + 2 * TOL) * math.sqrt(2), KNOWN_1D)


def test_min_sum_by_hand_goes_further_than_min_max():
    crafted, gamma = U.min_sum(KNOWN_1D, tol=TOL)
    assert math.sqrt(2) - TOL <= gamma <= math.sqrt(2)
    np.testing.assert_allclose(crafted, [-1.0], atol=2 * TOL)
    assert sum_distance_holds(crafted, KNOWN_1D)
    assert not sum_distance_holds(1 - (gamma + 2 * TOL) * math.sqrt(2), KNOWN_1D)


def test_unit_and_sign_perturbations_by_hand():
    # 1-D mean 1: unit and sign both give p = -1, crafted 1 - gamma.
    # Min-Max: largest distance gamma + 2 <= 3 -> gamma 1; Min-Sum: 6 + 3 gamma^2 <= 18 -> gamma 2
    assert U.min_max(KNOWN_1D, "unit", tol=TOL)[1] == pytest.approx(1.0, abs=TOL)
    assert U.min_sum(KNOWN_1D, "sign", tol=TOL)[1] == pytest.approx(2.0, abs=TOL)
    with pytest.raises(ValueError, match="unknown perturbation 'cos'.*std, unit, sign"):
        U.min_max(KNOWN_1D, "cos")


def test_min_max_square_by_hand():
    # corners of the square [0,2]^2: mean [1,1], std [1,1], p = [-1,-1], crafted [1-g, 1-g];
    # farthest known is [2,2] at sqrt(2)(1+g) <= diagonal 2 sqrt(2) -> g = 1, crafted [0, 0]
    square = np.array([[0, 0], [2, 0], [0, 2], [2, 2]], dtype=float)
    crafted, gamma = U.min_max(square, tol=TOL)
    assert gamma == pytest.approx(1.0, abs=TOL) and gamma <= 1.0
    np.testing.assert_allclose(crafted, [0.0, 0.0], atol=TOL)


@pytest.mark.parametrize("search,holds", [(U.min_max, max_distance_holds), (U.min_sum, sum_distance_holds)])
def test_constraint_holds_at_gamma_and_fails_just_above_on_random_updates(search, holds):
    known = np.random.default_rng(3).normal(size=(6, 5))
    for kind in U.PERTURBATIONS:
        crafted, gamma = search(known, kind, tol=TOL)
        p = U.perturbation_vector(known, kind)
        assert gamma > 0 and holds(crafted, known)
        assert not holds(known.mean(axis=0) + (gamma + 2 * TOL) * p, known)


def test_min_sum_matches_its_closed_form():
    # sum_i ||mean + g p - d_i||^2 = S0 + n g^2 ||p||^2, so g* = sqrt((bound - S0) / (n ||p||^2))
    known = np.random.default_rng(5).normal(size=(7, 4))
    mean, p = known.mean(axis=0), U.perturbation_vector(known)
    s0 = np.sum((known - mean) ** 2)
    bound = max(np.sum((known - k) ** 2) for k in known)
    expected = math.sqrt((bound - s0) / (7 * np.dot(p, p)))
    assert U.min_sum(known, tol=TOL)[1] == pytest.approx(expected, abs=TOL)


def test_gamma_beyond_twice_gamma_init_is_found():
    # gamma* = 1/sqrt(2) is above 2 * gamma_init = 0.2: the doubling phase must lift the range
    assert U.min_max(KNOWN_1D, gamma_init=0.1, tol=TOL)[1] == pytest.approx(1 / math.sqrt(2), abs=TOL)


@pytest.mark.parametrize("search", [U.min_max, U.min_sum])
def test_one_known_update_or_zero_spread_gives_the_mean(search):
    for known in ([[1.0, 2.0]], [[1.0, 2.0], [1.0, 2.0]]):
        for kind in U.PERTURBATIONS:
            crafted, gamma = search(known, kind)
            np.testing.assert_array_equal(crafted, [1.0, 2.0])
            assert gamma == 0.0


def test_zero_perturbation_gives_the_mean():
    # mean 0 -> unit and sign perturbations are zero even though the updates differ
    crafted, gamma = U.min_max([[1.0], [-1.0]], "sign")
    assert gamma == 0.0 and crafted.tolist() == [0.0]


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"tol": 0}, "tol must be"),
        ({"gamma_init": -1}, "gamma_init must"),
        ({"gamma_init": float("nan")}, "gamma_init must"),
    ],
)
def test_min_max_refuses_bad_search_settings(kw, match):
    with pytest.raises(ValueError, match=match):
        U.min_max([[1.0]], **kw)


# --- dispatcher --------------------------------------------------------------------------------


def craft(*args, **params):
    """The crafted update alone (``crafted_update`` also returns the settings in force)."""
    return U.crafted_update(*args, **params)[0]


def test_crafted_update_defaults():
    own = np.array([1.0, -1.0])
    known = np.array([[1.0, -1.0], [3.0, 1.0]])  # mean [2, 0], sample std [sqrt 2, sqrt 2] (population [1, 1])
    np.testing.assert_array_equal(craft("lf", own, None, 10, 3), own)
    np.testing.assert_array_equal(craft("sf", own, None, 10, 3), -own)
    np.testing.assert_array_equal(craft("mr", own, None, 10, 3), 10 * own)
    np.testing.assert_array_equal(craft("mr", own, None, 10, 3, scale=2.0), 2 * own)
    np.testing.assert_array_equal(craft("ipm", own, known, 10, 3), [-20.0, 0.0])
    z = U.lie_z_max(10, 3)
    np.testing.assert_allclose(craft("lie", own, known, 10, 3), [2 - z * math.sqrt(2), -z * math.sqrt(2)])
    np.testing.assert_allclose(craft("lie", own, known, 10, 3, z=1.0, ddof=0), [1.0, -1.0])
    np.testing.assert_array_equal(craft("minmax", own, known, 10, 3), U.min_max(known)[0])
    np.testing.assert_array_equal(craft("minsum", own, known, 10, 3, perturbation="sign"), U.min_sum(known, "sign")[0])


def test_crafted_update_lf_returns_a_copy():
    own = np.array([1.0, 2.0])
    out = craft("lf", own, None, 5, 1)
    out[0] = 9.0
    assert own[0] == 1.0


@pytest.mark.parametrize(
    "kind,known,n,m,params,match",
    [
        ("krum", None, 5, 1, {}, "unknown attack 'krum'.*lf, sf, mr, lie, minmax, minsum, ipm"),
        ("adaptive", None, 5, 1, {}, "acceptance test"),
        ("mr", None, 5, 1, {"z": 1.0}, "takes no parameter z; it takes scale"),
        ("sf", None, 5, 1, {"scale": 2}, "takes no parameter scale; it takes none"),
        ("lie", None, 5, 1, {}, "needs known_updates"),
        ("lie", [[1.0, 2.0, 3.0]], 5, 1, {}, "3 values but own_update has 2"),
        ("lie", [[1.0, 2.0]], 5, 5, {}, r"m \(attackers\) must be an integer in \[1, 4\]"),
        ("sf", None, 5, 0, {}, r"m \(attackers\)"),
        ("sf", None, 1, 1, {}, r"n \(participants"),
        ("ipm", [[1.0, 2.0]], 5, 1, {"epsilon": -1}, "epsilon must"),
        ("minmax", [[1.0, 2.0]], 5, 1, {"perturbation": "x"}, "unknown perturbation"),
    ],
)
def test_crafted_update_refuses(kind, known, n, m, params, match):
    with pytest.raises(ValueError, match=match):
        craft(kind, np.array([1.0, 2.0]), known, n, m, **params)


def test_constants():
    assert U.KNOWLEDGE == ("partial", "full")

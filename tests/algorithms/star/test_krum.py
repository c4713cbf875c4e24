"""Krum and multi-Krum on a hand-worked case: five benign 2-D updates near the origin, two
attackers far away.

Points: b0=[0,0] b1=[1,0] b2=[0,1] b3=[1,1] b4=[2,0] a5=[10,10] a6=[11,10]; n = 7, f = 2,
so each score sums the n - f - 2 = 3 smallest squared distances to the others:
  b0: to b1 1, b2 1, b3 2, b4 4              -> 1+1+2 = 4
  b1: to b0 1, b3 1, b4 1, b2 2              -> 1+1+1 = 3
  b2: to b0 1, b3 1, b1 2, b4 5              -> 1+1+2 = 4
  b3: to b1 1, b2 1, b0 2, b4 2              -> 1+1+2 = 4
  b4: to b1 1, b3 2, b0 4, b2 5              -> 1+2+4 = 7
  a5: to a6 1, b3 81+81=162, b4 64+100=164   -> 327
  a6: to a5 1, b3 100+81=181, b4 81+100=181  -> 363
"""

import numpy as np
import pytest

from lightyear.algorithms.star.krum import check_krum_settings, default_f, krum, krum_scores, krum_select

POINTS = [[0, 0], [1, 0], [0, 1], [1, 1], [2, 0], [10, 10], [11, 10]]


def vectors():
    return [np.array(p, dtype=np.float64) for p in POINTS]


def models():
    return [{"w": np.array(p, dtype=np.float32), "n": np.array(i, dtype=np.int64)} for i, p in enumerate(POINTS)]


def test_scores_by_hand():
    np.testing.assert_array_equal(krum_scores(vectors(), f=2), [4, 3, 4, 4, 7, 327, 363])


def test_krum_picks_the_benign_update_with_lowest_score():
    assert krum_select(vectors(), f=2) == [1]
    mean, selected = krum(models(), f=2)
    assert selected == [1]
    np.testing.assert_array_equal(mean["w"], [1.0, 0.0])


def test_multi_krum_ties_by_index_and_mean_by_hand():
    # scores 3 (b1), then 4, 4, 4 (b0, b2, b3 in index order)
    assert krum_select(vectors(), f=2, m=3) == [1, 0, 2]
    mean, selected = krum(models(), f=2, m=5)  # m = n - f
    assert selected == [1, 0, 2, 3, 4]  # both attackers left out
    # ([0,0] + [1,0] + [0,1] + [1,1] + [2,0]) / 5 = [4/5, 2/5]
    np.testing.assert_allclose(mean["w"], [0.8, 0.4], rtol=1e-6)
    assert mean["w"].dtype == np.float32
    assert mean["n"] == 1  # counters come from the lowest-score model (b1)


def test_default_f_is_largest_f_the_paper_allows():
    assert [default_f(n) for n in (1, 2, 3, 4, 5, 6, 7, 10)] == [0, 0, 0, 0, 1, 1, 2, 3]
    for n in range(3, 12):
        f = default_f(n)
        assert n > 2 * f + 2 and not n > 2 * (f + 1) + 2
    assert krum_select(vectors()) == [1]  # f defaults to default_f(7) = 2


def test_authors_f_half_of_n_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"n > 2f \+ 2.*n=7, f=3.*f <= 2"):
        krum_select(vectors(), f=7 // 2)


@pytest.mark.parametrize(
    "n,f,m,match",
    [(2, 0, 1, "at least 3 sites"), (5, -1, 1, "integer >= 0"), (5, 1, 0, r"m .* \[1, 5\]"), (5, 1, 6, r"\[1, 5\]")],
)
def test_bad_settings_are_refused(n, f, m, match):
    with pytest.raises(ValueError, match=match):
        check_krum_settings(n, f, m)


def test_non_finite_update_is_refused():
    bad = vectors()
    bad[3] = np.array([np.nan, 0.0])
    with pytest.raises(ValueError, match="NaN or inf"):
        krum_select(bad, f=2)

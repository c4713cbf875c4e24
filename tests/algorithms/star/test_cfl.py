"""Clustered-FL bipartition on hand-worked cases."""

import numpy as np
import pytest

from lightyear.algorithms.star.cfl import cfl, cfl_bipartition, complete_linkage_bipartition


def v(*xs):
    return np.array(xs, dtype=np.float64)


# Three benign updates and a sign-flipped group of two (-b, -c).
# d = 1 - cos: ab 0.2, ac 0.4, bc 0.04, de 0.04 | ad 1.8, ae 1.6, bd 2, be 1.96, cd 1.96, ce 2
# complete linkage: merge bc (0.04, first of the tied pair), then de (0.04),
# then a with bc (max(0.2, 0.4) = 0.4 < a-de max(1.8, 1.6) = 1.8 < bc-de 2) -> {a,b,c} | {d,e}
UPDATES = {"a": v(1, 0), "b": v(0.8, 0.6), "c": v(0.6, 0.8), "d": v(-0.8, -0.6), "e": v(-0.6, -0.8)}


def test_sign_flipped_group_is_the_minority():
    assert cfl_bipartition(UPDATES) == (["a", "b", "c"], ["d", "e"])


def test_scale_of_the_attack_does_not_matter():
    scaled = {**UPDATES, "d": 50 * UPDATES["d"], "e": 0.01 * UPDATES["e"]}
    assert cfl_bipartition(scaled) == (["a", "b", "c"], ["d", "e"])


def test_cfl_averages_the_majority_models():
    ref = {"w": np.array([1.0, 1.0], dtype=np.float32), "n": np.array(9)}
    models = {s: {"w": (ref["w"] + u).astype(np.float32), "n": np.array(i)} for i, (s, u) in enumerate(UPDATES.items())}
    mean, majority, minority = cfl(models, ref)
    assert (majority, minority) == (["a", "b", "c"], ["d", "e"])
    # [1, 1] + mean(a, b, c) = [1 + 2.4/3, 1 + 1.4/3] = [1.8, 1.466667]
    np.testing.assert_allclose(mean["w"], [1.8, 1 + 1.4 / 3], rtol=1e-6)
    assert mean["n"] == 0  # counters from the first majority site


def test_equal_sizes_keep_the_cluster_of_the_first_site():
    # {b, c} (along +x) vs {a, d} (along -x), distances 0 within, 2 across: 2 vs 2 -> a's cluster
    split = cfl_bipartition({"a": v(-1, 0), "b": v(1, 0), "c": v(2, 0), "d": v(-3, 0)})
    assert split == (["a", "d"], ["b", "c"])
    assert cfl_bipartition({"x": v(1, 0), "y": v(-1, 0)}) == (["x"], ["y"])  # 2 sites: one dropped


def test_linkage_is_complete_not_single():
    # chain 0 -1- 1 -1.1- 2 -1.2- 3, with 0-2 2, 1-3 2.1, 0-3 3.
    # complete: {0,1} at 1; then {0,1}-2 = max(2, 1.1) = 2 > 2-3 1.2 -> {2,3}: split {0,1} | {2,3}
    # (single linkage would join 2 to {0,1} at 1.1 and split {0,1,2} | {3})
    d = np.array([[0, 1, 2, 3], [1, 0, 1.1, 2.1], [2, 1.1, 0, 1.2], [3, 2.1, 1.2, 0]], dtype=float)
    assert complete_linkage_bipartition(d) == ([0, 1], [2, 3])


def test_degenerate_inputs():
    assert cfl_bipartition({"only": v(1, 2)}) == (["only"], [])
    # zero update: cosine 0 with all, distance 1 to everyone; the aligned pair stays together
    assert cfl_bipartition({"a": v(1, 0), "b": v(2, 0), "z": v(0, 0)}) == (["a", "b"], ["z"])
    with pytest.raises(ValueError, match="NaN or inf"):
        cfl_bipartition({"a": v(np.nan, 0), "b": v(1, 0)})
    with pytest.raises(ValueError, match="symmetric"):
        complete_linkage_bipartition(np.array([[0, 1.0], [2.0, 0]]))

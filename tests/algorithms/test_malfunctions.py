"""Malfunctions on hand-worked cases: what a faulty site sends, and reproducibility."""

import numpy as np
import pytest

from lightyear.algorithms import malfunctions as M


def weights():
    return {"w": np.array([1.0, -2.0, 0.5], dtype=np.float32), "n": np.array(4, dtype=np.int64)}


def test_sign_flip_eq5():
    out = M.sign_flip(weights(), alpha=2.0)
    np.testing.assert_allclose(out["w"], [-2.0, 4.0, -1.0])
    assert out["n"] == 4


def test_sign_flip_needs_positive_alpha():
    with pytest.raises(ValueError, match="alpha > 0"):
        M.sign_flip(weights(), alpha=0.0)


def test_additive_noise_eq4_matches_seeded_draw():
    out = M.additive_noise(weights(), sigma=0.1, rng=np.random.default_rng(7))
    expected = weights()["w"] + np.random.default_rng(7).normal(0.0, 0.1, size=3)
    np.testing.assert_allclose(out["w"], expected.astype(np.float32), rtol=1e-6)
    assert out["w"].dtype == np.float32


def test_relative_noise_scales_with_each_weight():
    w = {"w": np.array([0.0, 1.0, -3.0])}
    out = M.relative_additive_noise(w, scale=50.0, rng=np.random.default_rng(1))
    z = np.random.default_rng(1).standard_normal(3)
    np.testing.assert_allclose(out["w"], w["w"] + z * 0.5 * w["w"])
    assert out["w"][0] == 0.0  # a zero weight stays zero


def test_random_weights_come_from_the_factory():
    fresh = {"w": np.array([9.0, 9.0, 9.0], dtype=np.float32), "n": np.array(0)}
    out = M.random_weights(weights(), lambda seed: fresh, seed=3)
    np.testing.assert_allclose(out["w"], fresh["w"])


def test_input_is_never_modified():
    w = weights()
    spec = M.MalfunctionSpec(kind="sfa", site="site-3")
    spec.apply(w, 0)
    np.testing.assert_allclose(w["w"], [1.0, -2.0, 0.5])


def test_dynamic_is_reproducible_and_mixes_kinds():
    def make():
        return M.MalfunctionSpec(kind="dynamic", seed=5, site="site-8", fresh_init=lambda s: weights())

    a, b = make(), make()
    kinds = [a.kind_for_round(r) for r in range(30)]
    assert kinds == [b.kind_for_round(r) for r in range(30)]
    assert set(kinds) == {"ana_relative", "sfa", "random"}
    other_site = M.MalfunctionSpec(kind="dynamic", seed=5, site="site-7")
    assert kinds != [other_site.kind_for_round(r) for r in range(30)]
    out1, k1 = a.apply(weights(), 4)
    out2, k2 = b.apply(weights(), 4)
    assert k1 == k2
    np.testing.assert_array_equal(out1["w"], out2["w"])


def test_unknown_kind_names_the_choices():
    with pytest.raises(ValueError, match="unknown malfunction 'flip'.*sfa"):
        M.MalfunctionSpec(kind="flip")

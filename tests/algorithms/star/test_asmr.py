"""ASMR detection on hand-worked cases."""

import numpy as np
import pytest

from lightyear.algorithms.star.asmr import asmr, asmr_detect, check_min_gap, outlier_factors


def v(*xs):
    return np.array(xs, dtype=np.float64)


# Three benign unit vectors and a sign-flipped copy of b (what an SFA client sends: -w).
# cos: ab 0.8, ac 0.6, bc 0.96, ad -0.8, bd -1, cd -0.96
# d = 1 - cos: ab 0.2, ac 0.4, bc 0.04, ad 1.8, bd 2, cd 1.96
# sum of distances: a 2.4, b 2.24, c 2.4, d 5.76 -> rd = 3 / sum: 1.25, 1.339286, 1.25, 0.520833
# mean rd = 4.360119 / 4 = 1.090030 -> of = rd / 1.090030 = 1.146758, 1.228669, 1.146758, 0.477816
BENIGN = {"a": v(1, 0), "b": v(0.8, 0.6), "c": v(0.6, 0.8)}
OF = {"a": 1.146758, "b": 1.228669, "c": 1.146758, "d": 0.477816}


def test_outlier_factors_by_hand():
    of = outlier_factors({**BENIGN, "d": v(-0.8, -0.6)})
    assert of == pytest.approx(OF, abs=1e-6)
    assert np.mean(list(of.values())) == pytest.approx(1.0)


def test_sign_flipped_client_is_flagged():
    # sorted of: d 0.478 | a 1.147, c 1.147, b 1.229 -> gaps 0.669, 0, 0.082: split after d
    out = asmr_detect({**BENIGN, "d": v(-0.8, -0.6)})
    assert out.flagged == ["d"] and out.benign == ["a", "b", "c"]


def test_scale_does_not_matter():
    # full weight vectors are L2-normalised first: scaling a site changes nothing
    out = asmr_detect({"a": v(5, 0), "b": v(0.08, 0.06), "c": v(60, 80), "d": v(-8, -6)})
    assert out.outlier_factor == pytest.approx(OF, abs=1e-6) and out.flagged == ["d"]


def test_always_flags_someone_without_attacker_unless_min_gap():
    # benign only: sum of distances a 0.6, b 0.24, c 0.44 -> rd = 2/sum: 3.333, 8.333, 4.545
    # mean 5.404 -> of 0.617, 1.542, 0.841; gaps 0.224 (a|c), 0.701 (c|b) -> flags a and c
    out = asmr_detect(BENIGN)
    assert out.flagged == ["a", "c"] and out.benign == ["b"]
    assert out.outlier_factor == pytest.approx({"a": 0.61682, "b": 1.54206, "c": 0.84112}, abs=1e-5)
    # the toolkit's min_gap: largest gap 0.701 <= 0.75 -> nobody flagged; 0.7 < 0.701 -> split
    assert asmr_detect(BENIGN, min_gap=0.75).flagged == []
    assert asmr_detect(BENIGN, min_gap=0.7).flagged == ["a", "c"]


def test_identical_vectors_give_no_nan_and_no_flag():
    out = asmr_detect({"a": v(1, 2), "b": v(2, 4), "c": v(0.5, 1)})
    assert out.flagged == [] and out.outlier_factor == {"a": 1.0, "b": 1.0, "c": 1.0}


def test_identical_majority_with_one_opposite():
    # d(a,b) = d(a,c) = d(b,c) = 0, d(x, e) = 2: mean distances 2/3, 2/3, 2/3, 2
    # rd 1.5, 1.5, 1.5, 0.5; mean 1.25 -> of 1.2, 1.2, 1.2, 0.4 -> e flagged
    out = asmr_detect({"a": v(1, 0), "b": v(2, 0), "c": v(3, 0), "e": v(-1, 0)})
    assert out.outlier_factor == pytest.approx({"a": 1.2, "b": 1.2, "c": 1.2, "e": 0.4})
    assert out.flagged == ["e"]


def test_single_site_and_two_sites_are_never_flagged():
    assert asmr_detect({"a": v(1, 0)}).flagged == []
    assert asmr_detect({"a": v(1, 0), "b": v(-1, 0)}).flagged == []  # symmetric: equal of, gap 0


def test_asmr_averages_the_benign_models_uniformly():
    models = {
        s: {"w": w.astype(np.float32), "n": np.array(i)}
        for i, (s, w) in enumerate({**BENIGN, "d": v(-0.8, -0.6)}.items())
    }
    mean, out = asmr(models)
    # (1 + 0.8 + 0.6) / 3 = 0.8, (0 + 0.6 + 0.8) / 3 = 0.466667
    np.testing.assert_allclose(mean["w"], [0.8, 1.4 / 3], rtol=1e-6)
    assert out.flagged == ["d"] and mean["n"] == 0


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="min_gap"):
        check_min_gap(-0.1)
    with pytest.raises(ValueError, match="NaN or inf"):
        asmr_detect({"a": v(1, np.inf), "b": v(1, 0)})

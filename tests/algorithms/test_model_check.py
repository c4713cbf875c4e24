"""A received model is rejected for every kind of malformation, with a reason."""

import numpy as np

from lightyear.algorithms.model_check import model_problems

REF = {"a": np.zeros((2, 3), dtype=np.float32), "b": np.zeros(4, dtype=np.float32), "n": np.array(1)}


def good():
    return {k: v.copy() for k, v in REF.items()}


def test_valid_model_has_no_problem():
    assert model_problems(good(), REF) == []


def test_missing_and_extra_keys():
    m = good()
    del m["a"]
    m["zzz"] = np.zeros(1)
    problems = model_problems(m, REF)
    assert any("missing keys [a]" in p for p in problems)
    assert any("unexpected keys [zzz]" in p for p in problems)


def test_wrong_shape():
    m = good()
    m["b"] = np.zeros(5, dtype=np.float32)
    assert model_problems(m, REF) == ["b: shape (5,) != expected (4,)"]


def test_nan_and_inf():
    m = good()
    m["a"][0, 0] = np.nan
    m["b"][1] = np.inf
    problems = model_problems(m, REF)
    assert any(p.startswith("a: 1 values not finite") for p in problems)
    assert any(p.startswith("b: 1 values not finite") for p in problems)


def test_not_a_mapping_or_not_numeric():
    assert "expected a mapping" in model_problems([1, 2], REF)[0]
    m = good()
    m["a"] = np.array([["x"] * 3] * 2)
    assert "non-numeric" in model_problems(m, REF)[0]


def test_mixed_key_types_are_a_problem_not_a_crash():
    # sorted() over {0, "x"} raises TypeError; a hostile peer must only get itself rejected
    problems = model_problems({0: np.zeros(1), "a": np.zeros((2, 3))}, REF)
    assert problems and "parameter names must be strings" in problems[0]


def test_values_that_overflow_the_receivers_dtype_are_rejected():
    m = good()
    m["a"] = np.full((2, 3), 1e300, dtype=np.float64)  # finite in float64, inf once cast to float32
    assert np.all(np.isfinite(m["a"]))
    problems = model_problems(m, REF)
    assert len(problems) == 1 and problems[0].startswith("a: 6 values not finite in float32")


def test_magnitude_bound_is_configurable():
    m = good()
    m["b"][2] = -5e3
    assert model_problems(m, REF, max_abs=1e3) == ["b: values up to 5e+03 exceed max_abs_weight=1000"]
    assert model_problems(m, REF, max_abs=None) == []
    assert model_problems(m, REF) == []  # the default bound, 1e6, is far above trained weights


def test_lists_objects_and_complex_values_are_malformed():
    m = good()
    m["b"] = [0.0, 0.0, 0.0, 0.0]
    assert "expected an array" in model_problems(m, REF)[0]
    m = good()
    m["b"] = np.zeros(4, dtype=np.complex64)
    assert "complex" in model_problems(m, REF)[0]

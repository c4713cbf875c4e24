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
    assert "a: 1 non-finite values (NaN or Inf)" in problems
    assert "b: 1 non-finite values (NaN or Inf)" in problems


def test_not_a_mapping_or_not_numeric():
    assert "expected a mapping" in model_problems([1, 2], REF)[0]
    m = good()
    m["a"] = np.array([["x"] * 3] * 2)
    assert "non-numeric" in model_problems(m, REF)[0]

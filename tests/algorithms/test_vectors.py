"""Models as vectors, and the cosine/distance helpers, on hand-worked cases."""

import numpy as np
import pytest

from lightyear.algorithms.vectors import (
    cosine_similarity,
    cosine_similarity_matrix,
    flatten,
    squared_distance_matrix,
    stack,
    unflatten,
)


def model():
    # keys deliberately out of order: flatten must use sorted order ("a.bias", "b.weight")
    return {
        "b.weight": np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32),
        "bn.num_batches_tracked": np.array(7, dtype=np.int64),
        "a.bias": np.array([-1.0], dtype=np.float16),
    }


def test_flatten_uses_sorted_floating_keys_in_float64():
    vec = flatten(model())
    np.testing.assert_array_equal(vec, [-1.0, 1.0, 2.0, 3.0, 4.0])
    assert vec.dtype == np.float64


def test_flatten_with_keys_selects_and_sorts():
    np.testing.assert_array_equal(flatten(model(), keys=["b.weight"]), [1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="integer entry"):
        flatten(model(), keys=["bn.num_batches_tracked"])
    with pytest.raises(ValueError, match="not in the model"):
        flatten(model(), keys=["missing"])


def test_unflatten_round_trip_keeps_dtypes_and_counters():
    template = model()
    out = unflatten(np.array([5.0, 6.0, 7.0, 8.0, 9.0]), template)
    np.testing.assert_array_equal(out["a.bias"], [5.0])
    np.testing.assert_array_equal(out["b.weight"], [[6.0, 7.0], [8.0, 9.0]])
    assert out["a.bias"].dtype == np.float16 and out["b.weight"].dtype == np.float32
    assert out["bn.num_batches_tracked"] == 7 and out["bn.num_batches_tracked"].dtype == np.int64
    back = unflatten(flatten(template), template)
    for key in template:
        np.testing.assert_array_equal(back[key], template[key])


def test_unflatten_with_keys_copies_the_other_floats():
    out = unflatten(np.array([0.0, 0.0, 0.0, 0.0]), model(), keys=["b.weight"])
    np.testing.assert_array_equal(out["b.weight"], np.zeros((2, 2)))
    np.testing.assert_array_equal(out["a.bias"], [-1.0])


def test_unflatten_refuses_a_wrong_length():
    with pytest.raises(ValueError, match="vector has 4 values"):
        unflatten(np.zeros(4), model())


def test_non_finite_values_are_refused():
    bad = model()
    bad["b.weight"][0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        flatten(bad)
    with pytest.raises(ValueError, match="NaN or inf"):
        cosine_similarity_matrix([np.array([1.0, np.inf]), np.array([1.0, 0.0])])


def test_cosine_matrix_by_hand():
    # a=[3,4], b=[4,3], c=[-3,-4]: cos(a,b) = (12+12)/(5*5) = 0.96, cos(a,c) = -1, cos(b,c) = -0.96
    sim = cosine_similarity_matrix([np.array([3.0, 4.0]), np.array([4.0, 3.0]), np.array([-3.0, -4.0])])
    np.testing.assert_allclose(sim, [[1.0, 0.96, -1.0], [0.96, 1.0, -0.96], [-1.0, -0.96, 1.0]])


def test_zero_vector_has_cosine_zero_everywhere():
    sim = cosine_similarity_matrix({"z": np.zeros(2), "a": np.array([1.0, 0.0])})  # sorted: a, z
    np.testing.assert_array_equal(sim, [[1.0, 0.0], [0.0, 0.0]])
    assert cosine_similarity(np.zeros(3), np.zeros(3)) == 0.0
    assert cosine_similarity(np.array([1.0, 1.0]), np.array([-2.0, -2.0])) == pytest.approx(-1.0)


def test_squared_distances_by_hand():
    # |[0,0]-[3,4]|^2 = 25, |[0,0]-[1,0]|^2 = 1, |[3,4]-[1,0]|^2 = 4+16 = 20
    d = squared_distance_matrix([np.array([0.0, 0.0]), np.array([3.0, 4.0]), np.array([1.0, 0.0])])
    np.testing.assert_array_equal(d, [[0.0, 25.0, 1.0], [25.0, 0.0, 20.0], [1.0, 20.0, 0.0]])


def test_stack_refuses_mixed_lengths_and_empty():
    with pytest.raises(ValueError, match="different lengths"):
        stack([np.zeros(2), np.zeros(3)])
    with pytest.raises(ValueError, match="empty"):
        stack([])

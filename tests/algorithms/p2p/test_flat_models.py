"""Aggregates around an own model as flat vectors, on models small enough to work out by hand."""

import numpy as np
import pytest

from lightyear.algorithms.p2p.flat_models import FlatModels

OWN = {"w": np.array([3.0, 4.0], np.float32), "b": np.array([1.0], np.float32), "n": np.array(2, np.int64)}
PEERS = {
    "far": {"w": np.array([9.0, 12.0], np.float32), "b": np.array([1.0], np.float32), "n": np.array(7, np.int64)},
    "near": {"w": np.array([3.0, 6.0], np.float32), "b": np.array([3.0], np.float32), "n": np.array(7, np.int64)},
}


def test_the_sum_and_the_midpoint_growths_come_from_one_difference_a_peer():
    flat = FlatModels(OWN, PEERS)
    total, growths = flat.summed_with_growths(["far", "near"], 0.5)
    # far - own = (6, 8 | 0), near - own = (0, 2 | 2): their sum (6, 10 | 2)
    np.testing.assert_array_equal(total, [6.0, 10.0, 2.0])
    # halfway to far: w (6, 8), norm 10 against 5: growth 1; b stays 1. Halfway to near: w (3, 5), norm
    # sqrt(34) = 5.831 against 5: growth 0.166; b 2 against 1: growth 1, the larger
    assert growths == pytest.approx({"far": 1.0, "near": 1.0})
    assert flat.summed_with_growths(["near"], 0.25)[1]["near"] == pytest.approx(0.5)  # b 1.5 against 1
    # theta + 0.5 * total, the whole aggregate: the integer entry keeps the own value
    whole = flat.model(flat.around(total, 0.5))
    np.testing.assert_array_equal(whole["w"], [6.0, 9.0])
    np.testing.assert_array_equal(whole["b"], [2.0])
    assert whole["n"] == 2


def test_the_sum_is_the_one_aggregate_builds_to_the_bit():
    rng = np.random.default_rng(0)
    own = {"a": rng.normal(size=(64, 33)).astype(np.float32), "b": rng.normal(size=7).astype(np.float32)}
    peers = {f"p{i}": {k: v + rng.normal(0, 0.1, v.shape).astype(np.float32) for k, v in own.items()} for i in range(5)}
    flat = FlatModels(own, peers)
    total, growths = flat.summed_with_growths(list(peers), 0.5)
    assert np.array_equal(flat.around(total, 0.17), flat.aggregate(list(peers), 0.17))
    for peer in peers:
        assert growths[peer] == flat.growth(flat.aggregate([peer], 0.5))

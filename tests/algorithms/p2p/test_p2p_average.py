"""Decentralised FedAvg on hand-worked cases."""

import numpy as np
import pytest

from lightyear.algorithms.p2p.p2p_average import p2p_average


def model(w, b=0.0, count=3):
    return {
        "w": np.array(w, dtype=np.float32),
        "b": np.array([b], dtype=np.float32),
        "n": np.array(count, dtype=np.int64),
    }


def test_uniform_mean_includes_own_model():
    own = model([0.0, 3.0], 3.0)
    received = [model([3.0, 0.0], 0.0, 7), model([6.0, 6.0], 6.0, 9)]
    # w: ([0,3] + [3,0] + [6,6]) / 3 = [3, 3]; b: (3 + 0 + 6) / 3 = 3
    out = p2p_average(own, received)
    np.testing.assert_allclose(out["w"], [3.0, 3.0])
    np.testing.assert_allclose(out["b"], [3.0])
    assert out["n"] == 3  # integer counter keeps the own value
    assert out["w"].dtype == np.float32


def test_nothing_received_keeps_own_model_as_copy():
    own = model([1.0, 2.0])
    out = p2p_average(own, [])
    np.testing.assert_allclose(out["w"], [1.0, 2.0])
    assert out["w"] is not own["w"]


def test_non_finite_model_is_refused():
    bad = model([np.nan, 0.0])
    with pytest.raises(ValueError, match=r"received\[0\].*not finite"):
        p2p_average(model([0.0, 0.0]), [bad])


def test_wrong_shape_is_refused():
    with pytest.raises(ValueError, match="shape"):
        p2p_average(model([0.0, 0.0]), [model([0.0, 0.0, 0.0])])

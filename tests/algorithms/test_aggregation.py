"""Aggregation rules on hand-worked cases."""

import numpy as np
import pytest

from lightyear.algorithms.aggregation import weighted_average
from lightyear.algorithms.p2p.decayed_update import check_gamma, decayed_mean_update


def model(w, b=0.0, count=3):
    return {
        "w": np.array(w, dtype=np.float32),
        "b": np.array([b], dtype=np.float32),
        "n": np.array(count, dtype=np.int64),
    }


def test_eq18_by_hand():
    own = model([0.0, 2.0])
    peers = [model([2.0, 2.0], 1.0, 7), model([4.0, 0.0], 3.0, 9)]
    # mean(theta_j - theta) = ([2,0]+[4,-2])/2 = [3,-1]; gamma^t = 0.5^2 = 0.25 -> [0.75, 1.75]
    out = decayed_mean_update(own, peers, gamma=0.5, t=2)
    np.testing.assert_allclose(out["w"], [0.75, 1.75])
    np.testing.assert_allclose(out["b"], [0.25 * 2.0])
    assert out["n"] == 3  # integer counters keep the own value
    assert out["w"].dtype == np.float32


def test_gamma_one_is_fedavg_over_selected():
    own = model([10.0, -10.0])
    peers = [model([1.0, 2.0]), model([3.0, 4.0]), model([5.0, 0.0])]
    out = decayed_mean_update(own, peers, gamma=1.0, t=5)
    np.testing.assert_allclose(out["w"], weighted_average(peers)["w"])
    np.testing.assert_allclose(out["w"], [3.0, 2.0])


def test_first_aggregation_has_full_step():
    own = model([0.0, 0.0])
    out = decayed_mean_update(own, [model([1.0, 1.0])], gamma=0.1, t=0)
    np.testing.assert_allclose(out["w"], [1.0, 1.0])


def test_empty_selection_keeps_own_model():
    own = model([1.0, 2.0])
    out = decayed_mean_update(own, [], gamma=0.95, t=3)
    np.testing.assert_allclose(out["w"], own["w"])
    assert out["w"] is not own["w"]


@pytest.mark.parametrize("gamma", [0.0, -1.0, 1.01, float("inf")])
def test_bad_gamma_is_refused(gamma):
    with pytest.raises(ValueError, match=r"gamma must be a number in \(0, 1\]"):
        check_gamma(gamma)


def test_weighted_average_by_hand():
    out = weighted_average([model([0.0, 0.0]), model([4.0, 8.0])], [3, 1])
    np.testing.assert_allclose(out["w"], [1.0, 2.0])


def test_weighted_average_rejects_bad_weights():
    with pytest.raises(ValueError, match="non-negative"):
        weighted_average([model([0.0, 0.0])], [0])


def test_weighted_average_refuses_non_finite_weights_and_models_and_survives_huge_weights():
    for bad in ([float("nan"), 1.0], [float("inf"), 1.0]):
        with pytest.raises(ValueError, match="finite"):
            weighted_average([model([0.0, 0.0]), model([4.0, 8.0])], bad)
    # two equal weights at the top of the float range: their sum overflows, their mean does not
    out = weighted_average([model([0.0, 0.0]), model([4.0, 8.0])], [1e308, 1e308])
    np.testing.assert_allclose(out["w"], [2.0, 4.0])
    with pytest.raises(ValueError, match="'w' is not finite"):
        weighted_average([model([np.nan, 0.0]), model([4.0, 8.0])])


def test_eq18_refuses_non_finite_and_mis_shaped_models():
    with pytest.raises(ValueError, match="not finite"):
        decayed_mean_update(model([0.0, 2.0]), [model([np.nan, 2.0])], gamma=0.9, t=0)
    with pytest.raises(ValueError, match="shape"):
        decayed_mean_update(model([0.0, 2.0]), [model([1.0])], gamma=0.9, t=0)  # no broadcasting

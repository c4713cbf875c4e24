"""Function-preserving reparametrisations on a network small enough to follow by hand (no torch).

The network: x (1 input) -> h = relu(W1 x + b1), 2 hidden units -> y = W2 h.
W1 = [[1], [2]], b1 = [0.5, -1], W2 = [[3, 4]]. At x = 1: h = relu([1.5, 1]) = [1.5, 1], y = 3 * 1.5 + 4 * 1 = 8.5.
"""

import numpy as np
import pytest

from lightyear.algorithms.attacks.reparametrise import (
    PERMUTE,
    RESCALE,
    RESCALE_PERMUTE,
    Slot,
    UnitGroup,
    check_factor,
    check_groups,
    draw,
    reparametrise,
    reparametrised,
)

NET = {
    "w1": np.array([[1.0], [2.0]], dtype=np.float32),
    "b1": np.array([0.5, -1.0], dtype=np.float32),
    "w2": np.array([[3.0, 4.0]], dtype=np.float32),
    "steps": np.array(7, dtype=np.int64),
}
HIDDEN = UnitGroup("hidden", 2, (Slot("w1", 0, 1), Slot("b1", 0, 1), Slot("w2", 1, -1)))


def forward(net, x):
    h = np.maximum(net["w1"].astype(np.float64) @ np.atleast_1d(x) + net["b1"], 0.0)
    return float((net["w2"] @ h)[0])


def test_scaling_and_swapping_the_two_units_by_hand_keeps_the_output():
    # unit 0 scaled by 2, unit 1 by 0.5, then swapped (new unit k = old unit order[k]):
    # W1 = [[2 * 0.5], [1 * 2]] = [[1], [2]], b1 = [-1 * 0.5, 0.5 * 2] = [-0.5, 1], W2 = [[4 / 0.5, 3 / 2]] = [[8, 1.5]]
    out = reparametrise(NET, [HIDDEN], [(np.array([2.0, 0.5]), np.array([1, 0]))])
    np.testing.assert_allclose(out["w1"], [[1.0], [2.0]])
    np.testing.assert_allclose(out["b1"], [-0.5, 1.0])
    np.testing.assert_allclose(out["w2"], [[8.0, 1.5]])
    assert forward(out, 1.0) == pytest.approx(8.5)  # h = relu([0.5, 3]) = [0.5, 3]: 8 * 0.5 + 1.5 * 3
    for x in (-3.0, -0.2, 0.7, 5.0):
        assert forward(out, x) == pytest.approx(forward(NET, x))
    assert out["w1"].dtype == np.float32 and out["steps"] == 7  # dtypes kept, counters untouched
    np.testing.assert_array_equal(NET["w1"], [[1.0], [2.0]])  # the input is not modified


def test_averaging_the_copy_with_the_original_is_another_function():
    copy = reparametrise(NET, [HIDDEN], [(np.array([100.0, 0.01]), np.arange(2))])
    assert forward(copy, 1.0) == pytest.approx(8.5)
    mean = {k: (NET[k].astype(np.float64) + copy[k]) / 2 for k in ("w1", "b1", "w2")}
    # each unit's input weight and bias are averaged with 100x (unit 0) and 0.01x (unit 1) of themselves,
    # so the units' values become (1 + 100) / 2 * 1.5 = 75.75 and (1 + 0.01) / 2 * 1 = 0.505; their readers
    # (3 + 0.03) / 2 = 1.515 and (4 + 400) / 2 = 202: y = 1.515 * 75.75 + 202 * 0.505 = 216.8, not 8.5
    assert forward(mean, 1.0) == pytest.approx(1.515 * 75.75 + 202.0 * 0.505, rel=1e-4)


def test_a_packed_entry_and_an_offset_select_the_units_they_name():
    # a (3, 2, 2) entry viewed as 3 parts of a 2x2 matrix: part 1's rows are the units; a reader of
    # 4 channels whose units are channels 1 and 2
    net = {"packed": np.arange(12, dtype=np.float64).reshape(6, 2), "reader": np.ones((1, 4))}
    group = UnitGroup("g", 2, (Slot("packed", 0, 1, view=(3, 2, 2), part=1), Slot("reader", 1, -1, offset=1)))
    out = reparametrise(net, [group], [(np.array([10.0, 1.0]), np.array([1, 0]))])
    np.testing.assert_array_equal(out["packed"][:2], net["packed"][:2])  # parts 0 and 2 untouched
    np.testing.assert_array_equal(out["packed"][4:], net["packed"][4:])
    np.testing.assert_array_equal(out["packed"][2:4], [[6.0, 7.0], [40.0, 50.0]])  # rows 2, 3 = old 3 (x1), old 2 (x10)
    np.testing.assert_array_equal(out["reader"], [[1.0, 1.0, 0.1, 1.0]])


def test_draw_gives_factor_or_its_inverse_and_permutations_within_blocks():
    group = UnitGroup("g", 6, (Slot("w", 0, 1),), block=3)
    rng = np.random.default_rng(0)
    ((scales, order),) = draw([group], RESCALE, 100.0, rng)
    assert set(scales) <= {100.0, 0.01} and len(set(scales)) == 2 and list(order) == list(range(6))
    ((scales, order),) = draw([group], PERMUTE, 100.0, rng)
    assert set(scales) == {1.0} and sorted(order[:3]) == [0, 1, 2] and sorted(order[3:]) == [3, 4, 5]
    fixed = UnitGroup("f", 6, (Slot("w", 0, 1),), scalable=False, block=1)
    ((scales, order),) = draw([fixed], RESCALE_PERMUTE, 100.0, rng)
    assert set(scales) == {1.0} and list(order) == list(range(6))  # neither scalable nor permutable: unchanged


def test_reparametrised_reports_what_it_did_and_is_reproducible():
    one, fields = reparametrised(NET, [HIDDEN], RESCALE_PERMUTE, 10.0, np.random.default_rng(5))
    two, _ = reparametrised(NET, [HIDDEN], RESCALE_PERMUTE, 10.0, np.random.default_rng(5))
    assert fields == {"attack_transform": "rescale_permute", "attack_factor": 10.0, "attack_units": 2}
    for key in NET:
        np.testing.assert_array_equal(one[key], two[key])
    assert forward(one, 0.3) == pytest.approx(forward(NET, 0.3), rel=1e-5)


@pytest.mark.parametrize("factor", [0, -1.0, float("inf"), float("nan"), True, "100"])
def test_a_factor_that_is_not_a_finite_number_above_0_is_refused(factor):
    with pytest.raises(ValueError, match="attack_factor must be a finite number > 0"):
        check_factor(factor)


def test_groups_that_do_not_fit_the_model_are_refused_naming_the_entry():
    with pytest.raises(ValueError, match="no entry 'w3'"):
        check_groups(NET, [UnitGroup("g", 2, (Slot("w3", 0, 1),))])
    with pytest.raises(ValueError, match="entry w2 .* has no 3 units"):
        check_groups(NET, [UnitGroup("g", 3, (Slot("w2", 1, -1),))])
    with pytest.raises(ValueError, match="block 4 does not divide"):
        check_groups(NET, [UnitGroup("g", 2, (Slot("w1", 0, 1),), block=4)])
    with pytest.raises(ValueError, match="unknown reparametrisation"):
        draw([HIDDEN], "mirror", 2.0, np.random.default_rng(0))

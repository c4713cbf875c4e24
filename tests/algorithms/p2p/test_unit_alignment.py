"""Unit alignment before averaging: hand-worked cases, blocks, degenerate units, and a real network."""

import numpy as np
import pytest

from lightyear.algorithms.attacks.reparametrise import Slot, UnitGroup, reparametrise, reparametrised
from lightyear.algorithms.p2p.unit_alignment import UnitAligner, aligned, match_units

# a two-layer ReLU net: x (2) -> h = relu(W1 x + b1) (3 units) -> y = W2 h (1 output); the units'
# producers (W1's row and b1) are orthogonal: (1, 0 | 0), (0, 1 | 0), (0, 0 | 1)
HIDDEN = UnitGroup("hidden", 3, (Slot("w1", 0, 1), Slot("b1", 0, 1), Slot("w2", 1, -1)))
OWN = {
    "w1": np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], dtype=np.float32),
    "b1": np.array([0.0, 0.0, 1.0], dtype=np.float32),
    "w2": np.array([[1.0, 2.0, 3.0]], dtype=np.float32),
}


def forward(weights, x):
    return weights["w2"] @ np.maximum(weights["w1"] @ x + weights["b1"][:, None], 0.0)


def test_a_permuted_copy_of_the_own_model_is_put_back_in_the_own_order():
    # the copy: new unit k is old unit order[k] = 2, 0, 1
    copy = reparametrise(OWN, [HIDDEN], [(np.ones(3), np.array([2, 0, 1]))])
    np.testing.assert_array_equal(copy["b1"], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(copy["w2"], [[3.0, 1.0, 2.0]])
    # the copy's unit 1 is own unit 0 (cosine 1), its unit 2 own unit 1, its unit 0 own unit 2; staying
    # put is worth 0 + margin 0.5 a unit, moving 1: all move
    [order], _ = UnitAligner(OWN, [HIDDEN]).orders(copy)
    np.testing.assert_array_equal(order, [1, 2, 0])
    back, moved = aligned(OWN, copy, [HIDDEN])
    assert moved == 3
    for key in OWN:
        np.testing.assert_array_equal(back[key], OWN[key])
        assert back[key].dtype == np.float32


def test_a_rescaled_and_permuted_copy_is_put_in_the_own_order_and_keeps_its_scales():
    scales = np.array([2.0, 0.5, 10.0])  # of the old units 0, 1, 2
    copy = reparametrise(OWN, [HIDDEN], [(scales, np.array([2, 0, 1]))])
    back, moved = aligned(OWN, copy, [HIDDEN])
    assert moved == 3  # cosine similarity does not see a unit's scale
    np.testing.assert_allclose(back["w1"], [[2.0, 0.0], [0.0, 0.5], [0.0, 0.0]])
    np.testing.assert_allclose(back["b1"], [0.0, 0.0, 10.0])
    np.testing.assert_allclose(back["w2"], [[0.5, 4.0, 0.3]], rtol=1e-6)


def test_the_aligned_model_computes_what_the_received_one_computes():
    rng = np.random.default_rng(0)
    other = {k: rng.normal(size=v.shape).astype(np.float32) for k, v in OWN.items()}
    x = rng.normal(size=(2, 50))
    back, _ = aligned(OWN, other, [HIDDEN], margin=0.0)
    np.testing.assert_allclose(forward(back, x), forward(other, x), rtol=1e-5, atol=1e-5)


def test_an_identical_model_is_left_as_it_is():
    back, moved = aligned(OWN, OWN, [HIDDEN])
    assert moved == 0
    for key in OWN:
        np.testing.assert_array_equal(back[key], OWN[key])


def test_units_move_only_where_the_matching_gains_more_than_the_margin():
    # swapping gains 0.5 + 0.5 - 0.3 - 0.3 = 0.4 over staying: more than 2 x 0.1, less than 2 x 0.3
    similarity = np.array([[0.3, 0.5], [0.5, 0.3]])
    np.testing.assert_array_equal(match_units(similarity, None, margin=0.1), [1, 0])
    np.testing.assert_array_equal(match_units(similarity, None, margin=0.3), [0, 1])


def test_the_matching_maximises_the_total_similarity_within_each_block():
    similarity = np.array(
        [
            [0.9, 1.0, 0.0, 0.0],
            [0.8, 0.0, 0.0, 0.0],
            [0.0, 0.0, 0.1, 0.2],
            [0.0, 0.0, 0.3, 0.0],
        ]
    )
    # greedy would give received 0 -> own 1 and received 1 -> own 0 (1.0 + 0.8); the assignment
    # 0 -> 1, 1 -> 0 is also the optimum of the first block (1.8 > 0.9); second block: 2 -> 3, 3 -> 2
    np.testing.assert_array_equal(match_units(similarity, None), [1, 0, 3, 2])
    across = np.array([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    np.testing.assert_array_equal(match_units(across, None), [2, 3, 0, 1])
    # within blocks of 2, units may not leave their block: the identity is the best left
    np.testing.assert_array_equal(match_units(across, 2), [0, 1, 2, 3])


def test_a_dead_unit_matches_nothing_and_nothing_turns_non_finite():
    dead = {**OWN, "w1": OWN["w1"] * np.array([[1.0], [1.0], [0.0]], dtype=np.float32)}
    dead["b1"] = np.zeros(3, dtype=np.float32)  # unit 2 produces nothing
    back, moved = aligned(OWN, dead, [HIDDEN])
    assert moved == 0 and all(np.all(np.isfinite(v)) for v in back.values())
    back, _ = aligned(dead, OWN, [HIDDEN])  # the own model's unit has no direction either
    assert all(np.all(np.isfinite(v)) for v in back.values())


def test_groups_that_do_not_fit_the_model_are_refused():
    with pytest.raises(ValueError, match="no entry 'w3'"):
        aligned(OWN, OWN, [UnitGroup("x", 3, (Slot("w3", 0, 1),))])


def test_a_permuted_copy_of_a_digits_cnn_is_put_back_exactly():
    from lightyear.models import build_model, model_symmetries
    from lightyear.training.weights import get_weights

    own = get_weights(build_model("cnn", 10, 1, seed=0))
    groups = model_symmetries("cnn", own)
    for seed in range(3):
        copy, fields = reparametrised(own, groups, "permute", 1.0, np.random.default_rng(seed))
        back, moved = aligned(own, copy, groups)
        assert moved == fields["attack_units"] > 500
        for key in own:
            np.testing.assert_array_equal(back[key], own[key])

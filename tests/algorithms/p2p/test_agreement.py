"""The agreement score (Eqs. 12-17) on cases worked out by hand."""

import numpy as np
import pytest

from lightyear.algorithms.p2p.agreement import (
    agreement,
    check_tau,
    select_peers,
    summarize_predictions,
)

LABELS = np.array([0, 1, 1, 0])
OWN = np.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4], [0.2, 0.8]])  # acc 0.5, conf .9 .7 .6 .8
PEER = np.array([[0.6, 0.4], [0.4, 0.6], [0.3, 0.7], [0.7, 0.3]])  # acc 1.0, conf .6 .6 .7 .7


def test_agreement_components_by_hand():
    own = summarize_predictions(OWN, LABELS, n_bins=2)
    peer = summarize_predictions(PEER, LABELS, n_bins=2)
    # Eq. 13: 1 - |0.5 - 1.0| = 0.5
    # Eq. 14: ECE own (2 bins) = |0.5 - 0.75| = 0.25; peer all in upper bin: |1.0 - 0.65| = 0.35 -> 1 - 0.1 = 0.9
    # Eq. 15: 1 - mean(|.9-.6|, |.7-.6|, |.6-.7|, |.8-.7|) = 1 - 0.15 = 0.85
    # Eq. 12: (0.5 + 0.9 + 0.85) / 3 = 0.75
    a = agreement(own, peer)
    assert a.performance == pytest.approx(0.5)
    assert a.ece == pytest.approx(0.9)
    assert a.third == pytest.approx(0.85)
    assert a.score == pytest.approx(0.75)


def test_agreement_with_itself_is_one():
    own = summarize_predictions(OWN, LABELS)
    assert agreement(own, own).score == pytest.approx(1.0)


def test_sharpness_term_by_hand():
    # entropies normalised by log 2: own sample 1 uniform (1.0), peer sample 1 certain (0.0); sample 2 both certain
    own = summarize_predictions(np.array([[0.5, 0.5], [1.0, 0.0]]), np.array([0, 0]))
    peer = summarize_predictions(np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([0, 0]))
    a = agreement(own, peer, third_term="sharpness")
    assert a.third == pytest.approx(1 - (1.0 + 0.0) / 2)


def test_non_finite_outputs_agree_with_nothing():
    # a model whose outputs are NaN is never selected, whatever tau: no uniform substitute that could score high
    own = summarize_predictions(OWN, LABELS)
    broken = summarize_predictions(np.full((4, 2), np.nan), LABELS)
    assert not broken.finite
    a = agreement(own, broken)
    assert np.isnan(a.score) and np.isnan(a.performance)
    assert select_peers({"site-2": a.score}, tau=0.0) == []
    seg = summarize_predictions(np.full((1, 2, 2, 2), np.nan), np.zeros((1, 2, 2), dtype=int))
    assert seg.task == "segmentation" and not seg.finite


def test_sign_flipped_batchnorm_model_is_never_selected():
    """Sign flipping a BatchNorm network makes running_var negative: finite weights, NaN outputs."""
    import torch
    from torch import nn

    from lightyear.algorithms.malfunctions import sign_flip
    from lightyear.training.weights import get_weights, set_weights

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    x, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
    net.train()
    for _ in range(5):
        net(x)  # running statistics move away from their initial values
    net.eval()

    def summary(module):
        with torch.no_grad():
            return summarize_predictions(torch.softmax(module(x), dim=1).numpy(), y.numpy())

    flipped = sign_flip(get_weights(net))
    assert all(np.all(np.isfinite(v)) for v in flipped.values())
    assert np.any(flipped["1.running_var"] < 0)
    peer = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3)).eval()
    set_weights(peer, flipped)
    own, bad = summary(net), summary(peer)
    assert own.finite and not bad.finite
    score = agreement(own, bad).score
    assert select_peers({"site-2": score}, tau=0.0) == []


def test_segmentation_uses_dice():
    masks = np.array([[[1, 1], [0, 0]]])
    fg = np.array([[0.9, 0.8], [0.7, 0.1]])
    own = summarize_predictions(np.stack([1 - fg, fg])[None], masks)
    perfect = np.stack([1 - masks[0], masks[0]]).astype(float)[None]
    peer = summarize_predictions(perfect, masks)
    assert own.task == "segmentation"
    # Eq. 16: Dice own 0.8, peer 1.0 -> 0.8
    assert agreement(own, peer).performance == pytest.approx(0.8)


def test_select_peers_threshold_is_inclusive():
    scores = {"site-2": 0.75, "site-3": 0.7499, "site-4": 0.9, "site-5": float("nan")}
    assert select_peers(scores, 0.75) == ["site-2", "site-4"]
    assert select_peers(scores, 0.0) == ["site-2", "site-3", "site-4"]


@pytest.mark.parametrize("tau", [-0.1, 1.5, float("nan"), "0.7", True])
def test_bad_tau_is_refused_with_the_range(tau):
    with pytest.raises(ValueError, match=r"tau must be a number in \[0, 1\]"):
        check_tau(tau)


def test_summaries_of_different_sets_do_not_compare():
    a = summarize_predictions(OWN, LABELS)
    b = summarize_predictions(OWN[:3], LABELS[:3])
    with pytest.raises(ValueError, match="different validation sets"):
        agreement(a, b)


def test_skill_is_the_distance_from_chance_towards_perfect():
    from lightyear.algorithms.p2p.agreement import skill

    # 4 samples, 2 classes: chance is 1/2; accuracy 3/4 -> (0.75 - 0.5) / (1 - 0.5) = 0.5
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.7, 0.3]])
    s = summarize_predictions(probs, np.array([0, 1, 0, 1]))
    assert s.chance == 0.5 and s.performance == 0.75
    assert skill(s) == pytest.approx(0.5)
    # 10 classes, accuracy 0.1 = chance -> 0; accuracy 0 -> -1/9
    uniform_wrong = np.eye(10)[[1, 2, 3, 4, 5, 6, 7, 8, 9, 0]]
    assert skill(summarize_predictions(uniform_wrong, np.arange(10))) == pytest.approx(-1 / 9)


def test_skill_floor_keeps_weak_peers_out_and_zero_is_the_paper_rule():
    scores = {"site-2": 0.8, "site-3": 0.9, "site-4": 0.7}
    skills = {"site-2": 0.6, "site-3": 0.1, "site-4": 0.9}
    assert select_peers(scores, 0.75) == ["site-2", "site-3"]
    assert select_peers(scores, 0.75, skills, skill_floor=0.0) == ["site-2", "site-3"]
    assert select_peers(scores, 0.75, skills, skill_floor=0.5) == ["site-2"]  # site-3 agrees but is near chance
    assert select_peers(scores, 0.75, {"site-2": float("nan")}, skill_floor=0.5) == []
    with pytest.raises(ValueError, match="skill_floor"):
        select_peers(scores, 0.75, skills, skill_floor=1.0)


def test_same_function_takes_equal_outputs_for_one_function_and_nothing_else():
    from lightyear.algorithms.p2p.agreement import same_function

    own = summarize_predictions(OWN, LABELS)
    assert same_function(own, summarize_predictions(OWN.copy(), LABELS))
    # float32 rounding of a reparametrised copy: 1e-6 per probability, far inside the tolerance
    assert same_function(own, summarize_predictions(OWN + np.array([1e-6, -1e-6]), LABELS))
    # one sample's max probability 0.9 -> 0.8998: the same classes, but another function
    moved = OWN.copy()
    moved[0] = [0.8998, 0.1002]
    assert not same_function(own, summarize_predictions(moved, LABELS))
    assert same_function(own, summarize_predictions(moved, LABELS), tolerance=1e-3)
    # the classes swapped: every max probability and entropy equal, every prediction changed
    swapped = OWN[:, ::-1]
    assert not same_function(own, summarize_predictions(swapped, LABELS))
    # a model whose outputs are not finite computes nothing the site can compare
    broken = summarize_predictions(np.full((4, 2), np.nan), LABELS)
    assert not same_function(own, broken) and not same_function(broken, broken)


def test_same_function_on_segmentation_compares_every_pixel_and_refuses_other_sets():
    from lightyear.algorithms.p2p.agreement import same_function

    masks = np.array([[[1, 1], [0, 0]]])
    fg = np.array([[0.9, 0.8], [0.7, 0.1]])
    own = summarize_predictions(np.stack([1 - fg, fg])[None], masks)
    assert same_function(own, summarize_predictions(np.stack([1 - fg, fg])[None], masks))
    other = fg.copy()
    other[1, 1] = 0.6  # one pixel changes class
    assert not same_function(own, summarize_predictions(np.stack([1 - other, other])[None], masks))
    with pytest.raises(ValueError, match="different validation sets"):
        same_function(summarize_predictions(OWN, LABELS), summarize_predictions(OWN[:3], LABELS[:3]))

"""The agreement score (Eqs. 12-17) on cases worked out by hand."""

import numpy as np
import pytest

from lightyear.algorithms.agreement import (
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


def test_logits_would_give_another_score():
    # the score is defined on softmax probabilities: feeding logits changes confidences and is refused by shape rules only
    # when they are not 2-D, so the executor always applies softmax; here we check non-finite outputs score as uniform
    own = summarize_predictions(OWN, LABELS)
    broken = summarize_predictions(np.full((4, 2), np.nan), LABELS)
    assert broken.confidence.tolist() == [0.5] * 4
    assert agreement(own, broken).score < 0.9


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

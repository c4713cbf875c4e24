"""The LIGHTYEAR agreement score and the peer selection it drives (pure NumPy, no FLARE).

A site i scores a peer's model h_j against its own reference model h_i on its own
validation set V_i. Both models are summarised once by :func:`summarize_predictions`
(softmax probabilities, never logits), then :func:`agreement` compares two summaries.

References: "Don't Reach for the Stars: Rethinking Topology for Resilient Federated
Learning" (long version), Eqs. 12-17; the short version's entropy ("sharpness") term, its Eq. 12.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lightyear.algorithms import metrics
from lightyear.checks import number_in

CONFIDENCE = "confidence"
SHARPNESS = "sharpness"
THIRD_TERMS = (CONFIDENCE, SHARPNESS)


@dataclass(frozen=True)
class PredictionSummary:
    """What the agreement score needs to know of one model on one validation set.

    ``performance`` is accuracy (classification) or Dice (segmentation); ``ece`` the top-label
    expected calibration error (pixel-level for segmentation); ``confidence`` and ``entropy``
    the per-sample (per-pixel) max probability and normalised entropy, ``predicted`` the class each
    sample (pixel) is given (None when the summary was made without it). ``finite`` is False when
    the model's outputs had NaN or Inf (a sign-flipped BatchNorm network has negative running
    variances and such outputs while its weights are finite): such a model agrees with nothing.
    """

    performance: float
    ece: float
    confidence: np.ndarray
    entropy: np.ndarray
    task: str = "classification"
    finite: bool = True
    chance: float = 0.0
    predicted: np.ndarray | None = None


@dataclass(frozen=True)
class AgreementScore:
    """A_ij and its three components (Eq. 12)."""

    score: float
    performance: float
    ece: float
    third: float


def summarize_predictions(
    probs: np.ndarray,
    labels: np.ndarray,
    n_bins: int = 15,
    normalize_entropy: bool = True,
) -> PredictionSummary:
    """Summarise a model's softmax outputs on a validation set.

    ``probs`` of shape ``(N, K)`` is a classification output; ``(N, C, H, W)`` a segmentation
    output, summarised at pixel level with Dice as the performance (Eq. 16).
    """
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels)
    if probs.ndim not in (2, 4):
        raise ValueError(f"expected probabilities (N, K) or (N, C, H, W), got shape {probs.shape}")
    task = "segmentation" if probs.ndim == 4 else "classification"
    if not np.all(np.isfinite(probs)):
        empty = np.zeros(0)
        return PredictionSummary(
            float("nan"), float("nan"), empty, empty, task=task, finite=False, chance=_chance(probs)
        )
    if probs.ndim == 4:
        flat, flat_labels = metrics.flatten_pixels(probs, labels)
        return PredictionSummary(
            performance=metrics.dice(probs, labels),
            ece=metrics.expected_calibration_error(flat, flat_labels, n_bins),
            confidence=metrics.confidence(flat),
            entropy=metrics.entropy(flat, normalize=normalize_entropy),
            task="segmentation",
            predicted=flat.argmax(axis=1),
        )
    return PredictionSummary(
        performance=metrics.accuracy(probs, labels),
        ece=metrics.expected_calibration_error(probs, labels, n_bins),
        confidence=metrics.confidence(probs),
        entropy=metrics.entropy(probs, normalize=normalize_entropy),
        task="classification",
        chance=_chance(probs),
        predicted=probs.argmax(axis=1),
    )


def _chance(probs: np.ndarray) -> float:
    """Accuracy of a uniform guess, 1/K, for classification; 0 for segmentation (no skill floor)."""
    return 1.0 / probs.shape[1] if probs.ndim == 2 else 0.0


def skill(summary: PredictionSummary) -> float:
    """How far a model's accuracy lies from chance towards perfect: (Acc - 1/K) / (1 - 1/K).

    0 for a uniform guess, 1 for a perfect model, negative below chance (a sign-flipped network
    that predicts the least likely class). For segmentation it is the Dice score itself. NaN for
    non-finite outputs. Not part of the paper: it backs the cold-start guard of
    :func:`select_peers`.
    """
    if not summary.finite:
        return float("nan")
    if summary.chance >= 1.0:
        return 1.0
    return (summary.performance - summary.chance) / (1.0 - summary.chance)


def performance_agreement(own: PredictionSummary, peer: PredictionSummary) -> float:
    """A^Acc_ij = 1 - |Acc(h_i; V_i) - Acc(h_j; V_i)| (Eq. 13), or A^Dice_ij with Dice (Eq. 16)."""
    return 1.0 - abs(own.performance - peer.performance)


def calibration_agreement(own: PredictionSummary, peer: PredictionSummary) -> float:
    """A^ECE_ij = 1 - |ECE(h_i; V_i) - ECE(h_j; V_i)| (Eq. 14)."""
    return 1.0 - abs(own.ece - peer.ece)


def confidence_agreement(own: PredictionSummary, peer: PredictionSummary) -> float:
    """A^Conf_ij = 1 - 1/|V_i| sum_x |P_i(x) - P_j(x)|, P(x) = max softmax (Eq. 15)."""
    _check_same_samples(own.confidence, peer.confidence)
    return 1.0 - float(np.mean(np.abs(own.confidence - peer.confidence)))


def sharpness_agreement(own: PredictionSummary, peer: PredictionSummary) -> float:
    """A^Sharp_ij = 1 - 1/|V_i| sum_x |H(p_i(x)) - H(p_j(x))| (short paper, Eq. 12).

    The entropies are those stored in the summaries: normalised by log K unless the summaries
    were made with ``normalize_entropy=False`` (the short paper's raw form, which can go below 0
    for more than e classes).
    """
    _check_same_samples(own.entropy, peer.entropy)
    return 1.0 - float(np.mean(np.abs(own.entropy - peer.entropy)))


def agreement(own: PredictionSummary, peer: PredictionSummary, third_term: str = CONFIDENCE) -> AgreementScore:
    """A_ij = (A^Acc_ij + A^ECE_ij + A^Conf_ij) / 3 (Eq. 12).

    ``third_term`` is ``"confidence"`` (Eq. 15, the long paper) or ``"sharpness"`` (the short
    paper's entropy term). Accuracy is replaced by Dice for segmentation summaries (Eq. 16).
    If either model's outputs were not finite the score and its terms are NaN, which
    :func:`select_peers` never selects.
    """
    if third_term not in THIRD_TERMS:
        raise ValueError(f"third_term must be one of {THIRD_TERMS}, got {third_term!r}")
    if own.task != peer.task:
        raise ValueError(f"cannot compare a {own.task} summary with a {peer.task} summary")
    if not (own.finite and peer.finite):
        nan = float("nan")
        return AgreementScore(score=nan, performance=nan, ece=nan, third=nan)
    perf = performance_agreement(own, peer)
    ece = calibration_agreement(own, peer)
    third = confidence_agreement(own, peer) if third_term == CONFIDENCE else sharpness_agreement(own, peer)
    return AgreementScore(score=(perf + ece + third) / 3.0, performance=perf, ece=ece, third=third)


SAME_FUNCTION_TOLERANCE = 1e-4
"""How far two models' per-sample max probability and entropy may differ for :func:`same_function`
to take them for one function: float32 rounding moves a reparametrised network's outputs by far less
(2e-7 for the digits CNN, permuted or rescaled by 100 or 1000); two models trained on different data
differ by orders of magnitude more."""


def same_function(own: PredictionSummary, peer: PredictionSummary, tolerance: float = SAME_FUNCTION_TOLERANCE) -> bool:
    """Whether ``peer`` computes what ``own`` computes on the validation set both summarise: the same
    predicted class for every sample (pixel), and per-sample max probability and entropy within
    ``tolerance``. Not part of the paper: it backs the validated aggregation's rule that a peer
    computing the site's own function adds nothing to it (``validated_update``'s module docstring).
    False when either summary lacks its predictions or its outputs were not finite."""
    if not (own.finite and peer.finite) or own.predicted is None or peer.predicted is None:
        return False
    _check_same_samples(own.confidence, peer.confidence)
    return bool(
        np.array_equal(own.predicted, peer.predicted)
        and np.all(np.abs(own.confidence - peer.confidence) <= tolerance)
        and np.all(np.abs(own.entropy - peer.entropy) <= tolerance)
    )


def select_peers(
    scores: dict[str, float], tau: float, skills: dict[str, float] | None = None, skill_floor: float = 0.0
) -> list[str]:
    """S_i = { j in N(i) : A(h_i, h_j; V_i) >= tau } (Eq. 17), in sorted peer order.

    Cold-start guard (this toolkit's addition; ``skill_floor = 0`` is the paper's rule): with
    ``skill_floor > 0`` a peer is selected only if also its :func:`skill` on the own validation
    set is at least ``skill_floor``. Early in a run every site is close to chance, and two
    near-chance models agree on calibration and confidence whatever their accuracy: a
    sign-flipped model then scores above tau and a full first step (gamma^0 = 1) ruins the
    benign site for good. A model no better than chance has nothing to teach, so the guard
    costs a benign site nothing but the rounds in which its peers are still that weak.
    """
    check_tau(tau)
    check_skill_floor(skill_floor)
    chosen = []
    for name, score in scores.items():
        if not (np.isfinite(score) and score >= tau):
            continue
        if skill_floor > 0:
            peer_skill = (skills or {}).get(name, float("nan"))
            if not (np.isfinite(peer_skill) and peer_skill >= skill_floor):
                continue
        chosen.append(name)
    return sorted(chosen)


def check_skill_floor(skill_floor) -> float:
    """``skill_floor`` must be a number in [0, 1) (0 = the paper's selection rule)."""
    note = "0 = the paper's rule, no cold-start guard"
    return number_in("skill_floor", skill_floor, 0.0, 1.0, high_open=True, note=note)


def check_tau(tau: float) -> float:
    """Raise a ValueError naming the fix if tau is not a number in [0, 1]."""
    note = "the agreement score lies in [0, 1]; the paper uses 0.75 for classification and 0.6 for segmentation"
    return number_in("tau", tau, 0.0, 1.0, note=note)


def _check_same_samples(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape:
        raise ValueError(f"summaries come from different validation sets: {a.shape} vs {b.shape}")

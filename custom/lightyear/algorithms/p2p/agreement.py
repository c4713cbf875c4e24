"""The LIGHTYEAR agreement score and the peer selection it drives (pure NumPy, no FLARE).

Site i scores a peer's model h_j against its own h_i on its validation set V_i from summaries of their softmax
outputs. References: "Don't Reach for the Stars: Rethinking Topology for Resilient Federated Learning" (long
version), Eqs. 12-17; the short version's entropy ("sharpness") term, its Eq. 12.
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
    """What the agreement score needs to know of one model on one validation set. ``performance``: accuracy, or Dice
    for segmentation; ``ece``: top-label ECE (pixel-level for segmentation); ``confidence``, ``entropy``,
    ``predicted``: per sample (pixel) the max probability, normalised entropy and class (``predicted`` None if not
    kept). ``finite`` is False when the outputs had NaN or Inf (e.g. a sign-flipped BatchNorm network): such a model
    agrees with nothing."""

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
    probs: np.ndarray, labels: np.ndarray, n_bins: int = 15, normalize_entropy: bool = True
) -> PredictionSummary:
    """Summarise softmax outputs ``(N, K)`` (classification) or ``(N, C, H, W)`` (segmentation, at pixel level with
    Dice as the performance, Eq. 16)."""
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
    """(Acc - 1/K) / (1 - 1/K): 0 at chance, 1 for a perfect model, negative below chance; Dice itself for
    segmentation; NaN for non-finite outputs. Not in the paper: the cold-start guard of :func:`select_peers`."""
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
    """A^Sharp_ij = 1 - 1/|V_i| sum_x |H(p_i(x)) - H(p_j(x))| (short paper, Eq. 12), on the summaries' entropies
    (normalised unless made with ``normalize_entropy=False``)."""
    _check_same_samples(own.entropy, peer.entropy)
    return 1.0 - float(np.mean(np.abs(own.entropy - peer.entropy)))


def agreement(own: PredictionSummary, peer: PredictionSummary, third_term: str = CONFIDENCE) -> AgreementScore:
    """A_ij = (A^Acc_ij + A^ECE_ij + A^Conf_ij) / 3 (Eq. 12). ``third_term``: ``"confidence"`` (Eq. 15) or
    ``"sharpness"`` (the short paper's entropy term); Dice replaces accuracy for segmentation (Eq. 16). NaN, never
    selected, if either model's outputs were not finite."""
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
"""How far two models' per-sample max probability and entropy may differ for :func:`same_function`: well above
float32 rounding of a reparametrised network, well below the gap between models trained on different data."""


def same_function(own: PredictionSummary, peer: PredictionSummary, tolerance: float = SAME_FUNCTION_TOLERANCE) -> bool:
    """Whether ``peer`` computes ``own``'s function on the validation set: the same predicted class everywhere and
    per-sample max probability and entropy within ``tolerance``; False without predictions or finite outputs. Not in
    the paper: it backs point 5 of :mod:`~lightyear.algorithms.p2p.validated_update`'s guarantee."""
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
    """S_i = { j in N(i) : A(h_i, h_j; V_i) >= tau } (Eq. 17), in sorted peer order. Cold-start guard (not the paper's;
    ``skill_floor = 0`` is its rule): a peer is also selected only if its :func:`skill` is at least ``skill_floor``.
    Near-chance models agree on calibration and confidence whatever their accuracy, so a sign-flipped model could pass
    tau and ruin a site with the first full step (gamma^0 = 1)."""
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

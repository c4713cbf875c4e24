"""What LIGHTYEAR's validated aggregation measures of a model, and the one test it applies (pure, no FLARE).

A site's validation set is small, so nothing is judged on a fixed tolerance: every comparison is paired, sample by
sample, and asks whether the candidate is significantly worse than the reference at the one-sided level
``confidence``. With per-sample differences d_i (candidate minus reference), mean d and sample std s over n, it
fails when d - z s / sqrt(n) > margin, z = Phi^-1(confidence) (a one-sided paired z-test; the margin is 0 except
against the anchor), a tolerance that shrinks as the set grows or the models agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from lightyear.algorithms import metrics
from lightyear.algorithms.p2p.agreement import PredictionSummary, summarize_predictions
from lightyear.checks import non_negative, number_in

DEFAULT_CONFIDENCE = 0.95
DEFAULT_MAX_NORM_GROWTH = 0.5
DEFAULT_DRIFT_BUDGET = 0.1
DEFAULT_MAX_PEER_SHARE = 0.5


@dataclass(frozen=True)
class Assessment:
    """One model on the own validation set, from one forward pass: its agreement ``summary``, per-sample ``losses``
    (:func:`~lightyear.algorithms.metrics.sample_losses`) and ``errors``
    (:func:`~lightyear.algorithms.metrics.sample_errors`), and the ``metrics`` ``evaluate("val")`` gives."""

    summary: PredictionSummary
    losses: np.ndarray
    errors: np.ndarray
    metrics: dict

    @property
    def finite(self) -> bool:
        """Whether the model's outputs were finite (a model with NaN or Inf outputs is never adopted)."""
        return bool(self.summary.finite and np.all(np.isfinite(self.losses)))

    @property
    def performance(self) -> float:
        """Validation accuracy, or Dice for segmentation."""
        return metrics.headline(self.metrics)

    @property
    def loss(self) -> float:
        return float(self.metrics["loss"])


def assess_predictions(
    probs: np.ndarray, labels: np.ndarray, loss: float, ece_bins: int = 15, normalize_entropy: bool = True
) -> Assessment:
    """The :class:`Assessment` of softmax outputs ``probs``; ``loss`` the trainer's mean loss. Non-finite outputs give
    NaN per-sample losses and errors."""
    summary = summarize_predictions(probs, labels, ece_bins, normalize_entropy)
    found = metrics.metrics_from_predictions(probs, labels, loss, ece_bins)
    if not summary.finite:
        nan = np.full(len(probs), np.nan)
        return Assessment(summary, nan, nan, found)
    return Assessment(summary, metrics.sample_losses(probs, labels), metrics.sample_errors(probs, labels), found)


def excess(candidate: np.ndarray, reference: np.ndarray, z: float) -> float:
    """mean - z * std / sqrt(n) of the paired ``candidate - reference`` (std with n - 1; 0 for one sample): positive
    when the candidate is significantly larger; NaN for a non-finite value; -inf for no sample."""
    diff = np.asarray(candidate, dtype=np.float64) - np.asarray(reference, dtype=np.float64)
    if diff.shape != np.shape(reference) or diff.ndim != 1:
        raise ValueError(
            f"paired samples must be two vectors of one length, got {np.shape(candidate)}, {np.shape(reference)}"
        )
    if not diff.size:
        return -math.inf
    if not np.all(np.isfinite(diff)):
        return math.nan
    spread = float(np.std(diff, ddof=1)) if diff.size > 1 else 0.0
    return float(np.mean(diff)) - z * spread / math.sqrt(diff.size)


@dataclass(frozen=True)
class Bounds:
    """The settings of the validated aggregation (its guarantee: :mod:`~lightyear.algorithms.p2p.validated_update`).
    ``confidence``: the one-sided level of every paired test, in [0.5, 1); ``max_norm_growth``: how much larger than
    the own model's an entry's L2 norm may be, in an adopted model and halfway to a peer; ``drift_budget``: how far, in
    nats of mean validation cross-entropy, peers may move the site above its anchor; ``max_peer_share``: the largest
    weight of one received model in an aggregate."""

    confidence: float = DEFAULT_CONFIDENCE
    max_norm_growth: float = DEFAULT_MAX_NORM_GROWTH
    drift_budget: float = DEFAULT_DRIFT_BUDGET
    max_peer_share: float = DEFAULT_MAX_PEER_SHARE

    def __post_init__(self):
        note = "the one-sided level of the paired tests; 0.95 refuses a candidate worse with 95 % confidence"
        number_in("confidence", self.confidence, 0.5, 1.0, high_open=True, note=note)
        note = "0.5: no entry of an adopted model, or of the model halfway to a peer, above 1.5 times the own norm"
        non_negative("max_norm_growth", self.max_norm_growth, note=note)
        note = "0.1: peers move the site at most 0.1 nats of validation loss above the lowest it has held"
        non_negative("drift_budget", self.drift_budget, note=note)
        note = "the largest weight of one received model in an aggregate; 1 allows taking a single peer's model whole"
        number_in("max_peer_share", self.max_peer_share, 0.0, 1.0, low_open=True, note=note)

    @property
    def z(self) -> float:
        """Phi^-1(confidence): the standard normal quantile of the one-sided level."""
        return NormalDist().inv_cdf(self.confidence)

    def fault(self, candidate: Assessment, own: Assessment, held: Held | None = None) -> str:
        """Why ``candidate`` may not be adopted, ``""`` if it may: ``"not finite"``; ``"loss"`` / ``"error"`` when
        significantly above the round's start (``held.start``, else the own model: stricter); ``"drift"`` when its mean
        loss is above the own model's and its losses significantly more than ``drift_budget`` above ``held.anchor``."""
        if not candidate.finite:
            return "not finite"
        z = self.z
        start = own if held is None or held.start is None else held.start
        if excess(candidate.losses, start.losses, z) > 0.0:
            return "loss"
        if excess(candidate.errors, start.errors, z) > 0.0:
            return "error"
        anchor = None if held is None else held.anchor
        above_own = float(np.mean(candidate.losses)) > float(np.mean(own.losses))
        if anchor is not None and above_own and excess(candidate.losses, anchor.losses, z) > self.drift_budget:
            return "drift"
        return ""


@dataclass(frozen=True)
class Measured:
    """A model the site held, as its validation set measured it: per-sample losses and errors."""

    losses: np.ndarray
    errors: np.ndarray

    @classmethod
    def of(cls, found: Assessment) -> Measured:
        return cls(np.asarray(found.losses, dtype=np.float64), np.asarray(found.errors, dtype=np.float64))


@dataclass(frozen=True)
class Held:
    """What the site carries from round to round: the model it started this round from (``start``) and
    the lowest-loss model it has held (``anchor``), each as :class:`Measured`; None where unknown."""

    start: Measured | None = None
    anchor: Measured | None = None

    def after(self, own: Assessment, adopted: Assessment) -> Held:
        """The next round's: it starts from ``adopted``; the anchor is the lowest mean loss among the anchor and the
        round's own and adopted models (finite ones only)."""
        finite = [Measured.of(a) for a in (own, adopted) if a.finite]
        return Held(Measured.of(adopted) if adopted.finite else self.start, lowest(self.anchor, *finite))


def lowest(*options: Measured | None) -> Measured | None:
    """The option with the lowest mean loss (None where there is none)."""
    present = [m for m in options if m is not None]
    return min(present, key=lambda m: float(np.mean(m.losses))) if present else None


DEFAULT_BOUNDS = Bounds()
"""Every setting at its default."""

"""The bounds of LIGHTYEAR's validated aggregation, checked (pure, no FLARE).

:mod:`lightyear.algorithms.p2p.validated_update` states the guarantee these settings give; this
module holds them, their defaults (the one place for each) and the two tests that compare one
evaluation with them: :meth:`Bounds.passes` for an aggregate the site may adopt,
:meth:`Bounds.halfway_fault` for the model halfway to a selected peer's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lightyear.checks import boolean, non_negative, number_in

DEFAULT_DELTA = 0.02
DEFAULT_MAX_LOSS_GROWTH = 0.1
DEFAULT_MAX_NORM_GROWTH = 0.1
DEFAULT_MAX_PEER_SHARE = 0.5
DEFAULT_MIDPOINT_TEST = True
DEFAULT_MIDPOINT_LOSS_GROWTH = 0.5
DEFAULT_MIDPOINT_NORM_GROWTH = 1.0
DEFAULT_MIDPOINT_BARRIER = 0.4
MIDPOINT = 0.5
"""Where on the line from the own model to a peer's the midpoint test looks: halfway."""
LOSS_SLACK = 0.01
"""Absolute slack of the loss bound, so that an own loss near 0 does not refuse every aggregate."""

Evaluation = tuple[float, float]
"""(performance, loss) of a model on the own validation set; NaN for non-finite outputs."""


def check_delta(delta) -> float:
    """``validation_delta``: a number in [0, 1], the largest drop of validation accuracy or Dice allowed."""
    note = "the largest drop of validation accuracy or Dice below the own model an adopted aggregate may show"
    return number_in("validation_delta", delta, 0.0, 1.0, note=note)


def check_max_loss_growth(growth) -> float:
    """``max_loss_growth``: a finite number >= 0, the relative growth of the validation loss allowed."""
    return non_negative(
        "max_loss_growth",
        growth,
        note="0.1: an adopted aggregate's validation loss stays within 1.1 times the own model's",
    )


def check_max_norm_growth(growth) -> float:
    """``max_norm_growth``: a finite number >= 0, how much larger than the own model's an entry's norm may grow."""
    return non_negative(
        "max_norm_growth",
        growth,
        note="0.1: no entry of an adopted aggregate has an L2 norm above 1.1 times the own model's",
    )


def check_max_peer_share(share) -> float:
    """``max_peer_share``: a number in (0, 1], the largest weight one received model has in an aggregate."""
    note = "the largest weight of one received model in an aggregate; 1 allows taking a single peer's model whole"
    return number_in("max_peer_share", share, 0.0, 1.0, low_open=True, note=note)


@dataclass(frozen=True)
class Bounds:
    """The settings of the guarantee (:mod:`~lightyear.algorithms.p2p.validated_update`), checked."""

    delta: float = DEFAULT_DELTA
    max_loss_growth: float = DEFAULT_MAX_LOSS_GROWTH
    max_norm_growth: float = DEFAULT_MAX_NORM_GROWTH
    max_peer_share: float = DEFAULT_MAX_PEER_SHARE
    midpoint_test: bool = DEFAULT_MIDPOINT_TEST
    midpoint_loss_growth: float = DEFAULT_MIDPOINT_LOSS_GROWTH
    midpoint_norm_growth: float = DEFAULT_MIDPOINT_NORM_GROWTH
    midpoint_barrier: float = DEFAULT_MIDPOINT_BARRIER

    def __post_init__(self):
        check_delta(self.delta)
        check_max_loss_growth(self.max_loss_growth)
        check_max_norm_growth(self.max_norm_growth)
        check_max_peer_share(self.max_peer_share)
        boolean("midpoint_test", self.midpoint_test, note="true tests the model halfway to each selected peer")
        note = "0.5: halfway to a peer the validation loss stays within 1.5 times the larger of the two ends'"
        non_negative("midpoint_loss_growth", self.midpoint_loss_growth, note=note)
        note = "1: halfway to a peer no entry's L2 norm exceeds twice the own model's"
        non_negative("midpoint_norm_growth", self.midpoint_norm_growth, note=note)
        note = "0.4: halfway to a peer the validation loss exceeds the mean of the two ends' by at most 0.4"
        non_negative("midpoint_barrier", self.midpoint_barrier, note=note)

    def halfway_fault(self, found: Evaluation, own: Evaluation, peer: Evaluation) -> str:
        """Which bound the model halfway to a peer, evaluated ``found``, fails: ``"loss"`` when its outputs
        or either end's loss are not finite or its loss exceeds ``(1 + midpoint_loss_growth)`` times the
        larger of the own and the peer's losses plus ``LOSS_SLACK``; ``"barrier"`` when it exceeds their
        mean by more than ``midpoint_barrier``; ``""`` when it passes both."""
        got, lost = (float(v) for v in found)
        ends = (float(own[1]), float(peer[1]))
        if not (math.isfinite(got) and math.isfinite(lost) and all(math.isfinite(v) for v in ends)):
            return "loss"
        if lost > (1.0 + self.midpoint_loss_growth) * max(ends) + LOSS_SLACK:
            return "loss"
        return "barrier" if barrier(lost, *ends) > self.midpoint_barrier else ""

    def passes(self, found: Evaluation, performance: float, loss: float) -> bool:
        """Whether ``found`` (performance, loss) is finite, scores at least ``performance - delta`` and has a
        loss of at most ``(1 + max_loss_growth) * loss + LOSS_SLACK`` (False when a reference is NaN)."""
        got, lost = (float(v) for v in found)
        ceiling = (1.0 + self.max_loss_growth) * loss + LOSS_SLACK
        return math.isfinite(got) and math.isfinite(lost) and got >= performance - self.delta and lost <= ceiling


def barrier(halfway_loss: float, own_loss: float, peer_loss: float) -> float:
    """The loss barrier at the midpoint: the loss halfway between two models minus the mean of their
    losses, i.e. how far the loss rises halfway above the straight line between the two ends' losses
    (the loss barrier of Entezari et al., "The Role of Permutation Invariance in Linear Mode
    Connectivity of Neural Networks", ICLR 2022, taken at alpha = 1/2 instead of its supremum over
    alpha; Frankle et al., ICML 2020, measure the same on the error)."""
    return float(halfway_loss) - (float(own_loss) + float(peer_loss)) / 2.0


DEFAULT_BOUNDS = Bounds()
"""Every bound at its default."""

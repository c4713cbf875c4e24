"""Assessments of a model on a validation set, given by hand (per-sample losses and errors)."""

import numpy as np

from lightyear.algorithms.p2p.agreement import PredictionSummary
from lightyear.algorithms.p2p.validation_bounds import Assessment

GOOD = [0.2, 0.2, 0.2, 0.2]
"""Four samples, each with a loss of 0.2."""


def assessment(losses, errors=None, predicted=None) -> Assessment:
    """An assessment with these per-sample losses and errors (default: none wrong); NaN losses make its
    outputs non-finite; ``predicted``: the classes it predicts, for ``same_function``."""
    losses = np.asarray(losses, dtype=np.float64)
    errors = np.zeros_like(losses) if errors is None else np.asarray(errors, dtype=np.float64)
    summary = PredictionSummary(
        performance=1.0 - float(np.mean(errors)),
        ece=0.0,
        confidence=np.ones_like(losses),
        entropy=np.zeros_like(losses),
        finite=bool(np.all(np.isfinite(losses))),
        predicted=predicted,
    )
    return Assessment(summary, losses, errors, {"acc": 1.0 - float(np.mean(errors)), "loss": float(np.mean(losses))})

"""ASMR detection (Konstantin, Fuchs, Mukhopadhyay, "ASMR: Angular Support for Malfunctioning Client Resilience in
Federated Learning", MIDL 2024), pure NumPy.

For the full weight vectors of a round: cosine distance d(i, j) = 1 - cos(w_i, w_j), reachability density
rd_i = 1 / mean_{j != i} d(i, j), outlier factor of_i = rd_i / mean(rd); the sites below the largest gap in sorted
outlier factors are flagged, the others averaged uniformly. The published rule always flags someone when a gap is
positive, even without any malfunction; ``min_gap`` (this toolkit's, default 0 = the paper) splits only above it.
All distances zero: nobody is flagged; ties split at the lowest gap. Unlike the LIGHTYEAR authors' smoothed copy
(rd = 1 / (mean + 1)), this follows the paper.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lightyear.algorithms.aggregation import weighted_average
from lightyear.algorithms.vectors import cosine_similarity_matrix, flatten, stack
from lightyear.checks import non_negative

ZERO_DISTANCE = 1e-12
"""Mean cosine distances at or below this count as zero (all vectors aligned)."""


def check_min_gap(min_gap: float) -> float:
    """min_gap must be a finite number >= 0 (0 = the published rule)."""
    return non_negative("min_gap", min_gap, note="0 = the published ASMR rule")


@dataclass
class AsmrOutcome:
    """benign: sites kept (sorted); flagged: sites below the largest gap (sorted); outlier_factor: site -> of_i."""

    benign: list[str]
    flagged: list[str]
    outlier_factor: dict[str, float]


def outlier_factors(vectors: Mapping[str, np.ndarray]) -> dict[str, float]:
    """of_i = rd_i / mean(rd) with rd_i = 1 / mean_{j != i} (1 - cos(w_i, w_j)) (steps 1-4 above)."""
    names = sorted(vectors)
    x = stack(vectors, name="vectors")
    n = len(names)
    if n == 1:
        return {names[0]: 1.0}
    dist = np.clip(1.0 - cosine_similarity_matrix(x), 0.0, 2.0)
    np.fill_diagonal(dist, 0.0)
    mean_dist = dist.sum(axis=1) / (n - 1)
    if np.all(mean_dist <= ZERO_DISTANCE):
        return dict.fromkeys(names, 1.0)
    rd = 1.0 / np.maximum(mean_dist, ZERO_DISTANCE)
    of = rd / rd.mean()
    return {s: float(v) for s, v in zip(names, of)}


def asmr_detect(vectors: Mapping[str, np.ndarray], min_gap: float = 0.0) -> AsmrOutcome:
    """Flag the sites below the largest gap in sorted outlier factors if it exceeds ``min_gap``; ``vectors``: each
    site's flattened full weights (the paper uses models, not updates)."""
    min_gap = check_min_gap(min_gap)
    of = outlier_factors(vectors)
    order = sorted(of, key=lambda s: (of[s], s))
    flagged: list[str] = []
    if len(order) > 1:
        gaps = np.diff([of[s] for s in order])
        cut = int(np.argmax(gaps))  # first (lowest) of equal largest gaps
        if gaps[cut] > min_gap:
            flagged = sorted(order[: cut + 1])
    benign = sorted(s for s in of if s not in flagged)
    return AsmrOutcome(benign=benign, flagged=flagged, outlier_factor=of)


def asmr(
    models: Mapping[str, Mapping[str, np.ndarray]], min_gap: float = 0.0
) -> tuple[dict[str, np.ndarray], AsmrOutcome]:
    """ASMR on whole models: the uniform mean of the benign ones (counters from the first, sorted) and the outcome."""
    if not models:
        raise ValueError("asmr needs at least one model")
    outcome = asmr_detect({s: flatten(m) for s, m in models.items()}, min_gap)
    return weighted_average([models[s] for s in outcome.benign]), outcome

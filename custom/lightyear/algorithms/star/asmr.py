"""ASMR detection (Konstantin, Fuchs, Mukhopadhyay, "ASMR: Angular Support for Malfunctioning
Client Resilience in Federated Learning", MIDL 2024), pure NumPy.

For the full weight vectors w_i of the n sites of a round (the paper's method: a
local-outlier-factor on angles, with every other site as neighbour):

1. normalise each to unit L2 norm, u_i = w_i / ||w_i||;
2. cosine distance d(i, j) = 1 - <u_i, u_j>, in [0, 2];
3. reachability density rd_i = 1 / mean_{j != i} d(i, j);
4. outlier factor of_i = rd_i / mean_k rd_k (so the mean outlier factor is 1);
5. sort the sites by of and split at the largest gap between consecutive values: the sites
   below the gap (sparse, far from the rest) are flagged as malfunctioning; the others are
   averaged uniformly.

The rule has no hyperparameter, and so **it flags someone whenever any gap is positive, even
in a round with no malfunctioning site at all** (n distinct benign updates always have
different outlier factors). ``min_gap`` is this toolkit's addition: a split is made only if the
largest gap exceeds it (gaps are in units of the mean outlier factor, 1). ``min_gap = 0``
(default) is the published rule.

Degenerate inputs, made explicit: if every pairwise distance is zero (all vectors point the
same way), every outlier factor is 1 and nobody is flagged; a zero vector has cosine 0 with
everything (distance 1), as everywhere in this toolkit; a single site is never flagged.
Ties for the largest gap split at the lowest one (flagging the fewest sites).

The LIGHTYEAR authors' copy of the detector smoothed the formulas (rd = 1 / (mean + 1),
of = rd / (mean + 1)); this module follows the paper.
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
    """min_gap must be a finite number >= 0 (0 = the published rule, always split at the largest gap)."""
    return non_negative("min_gap", min_gap, note="0 = the published ASMR rule")


@dataclass
class AsmrOutcome:
    """benign: sites kept (sorted); flagged: sites below the largest gap (sorted);
    outlier_factor: site -> of_i (mean 1 over the round's sites)."""

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
    """Flag the sites below the largest gap in sorted outlier factors, if that gap exceeds ``min_gap``.

    ``vectors`` maps each site to its flattened full weight vector (the paper uses the models,
    not updates). See the module docstring for the rule and its always-flags behaviour.
    """
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
    """ASMR on whole models: the uniform mean of the benign models, and the detection outcome.

    Integer entries (counters) come from the first benign site in sorted order.
    """
    if not models:
        raise ValueError("asmr needs at least one model")
    outcome = asmr_detect({s: flatten(m) for s, m in models.items()}, min_gap)
    return weighted_average([models[s] for s in outcome.benign]), outcome

"""Self-centred clipping of the neighbours' models, with optional removal first (pure NumPy, no FLARE).

- SCCLIP: He, Karimireddy, Jaggi, "Byzantine-Robust Decentralized Learning via ClippedGossip", arXiv 2202.01545:
  x_i <- x_i + sum_j W_ij CLIP(x_j - x_i, tau_i), CLIP(z, tau) = z * min(1, tau / ||z||), with W_ij = 1 / |N_i|
  over the neighbours whose models arrived and each difference clipped as one vector over all floating entries.
- Remove-then-clip (``remove > 0``): Yang and Ghaderi, "Byzantine-Robust Decentralized Learning via Remove-then-Clip
  Aggregation", AAAI 2024: the ``remove`` farthest neighbours are dropped first (their weight budget, with uniform
  weights a number of neighbours).

``radius=None`` takes tau as the second-largest distance among the neighbours kept (the LIGHTYEAR authors'
choice: only the farthest is pulled in; a lone neighbour gets tau = 0 and moves nothing). Unlike the authors' code,
the differences x_j - x_i are clipped, not the parameters, as both papers do. Integer entries keep the own value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from lightyear.algorithms.model_check import check_models
from lightyear.algorithms.vectors import Weights, flatten, float_keys, unflatten
from lightyear.checks import int_in, non_negative


@dataclass(frozen=True)
class ClipRecord:
    """What self-centred clipping did with one neighbour's model: its ``distance`` ||theta_j - theta_i||, whether
    ``removed`` first or ``clipped`` to the radius, and the ``scale`` min(1, tau / distance) of its difference (0.0
    when removed)."""

    distance: float
    removed: bool
    clipped: bool
    scale: float


class ScclipResult(NamedTuple):
    """The new model, the radius tau used, and a ClipRecord per neighbour (by name)."""

    model: dict[str, np.ndarray]
    radius: float
    records: dict[str, ClipRecord]


def clip(z: np.ndarray, tau: float) -> np.ndarray:
    """CLIP(z, tau) = z * min(1, tau / ||z||), z one vector (ClippedGossip, arXiv 2202.01545); a zero z unchanged."""
    norm = float(np.linalg.norm(z))
    if norm <= tau or norm == 0.0:
        return z
    return z * (tau / norm)


def adaptive_radius(distances: Sequence[float]) -> float:
    """The second-largest of ``distances`` (LIGHTYEAR authors' choice of tau); 0.0 with fewer than two."""
    if len(distances) < 2:
        return 0.0
    return float(sorted(distances)[-2])


def farthest(distances: Mapping[str, float], remove: int) -> list[str]:
    """The ``remove`` peers with the largest distances (ties broken by name), sorted by name."""
    order = sorted(distances, key=lambda p: (-distances[p], p))
    return sorted(order[:remove])


def check_scclip_settings(radius, remove) -> None:
    """Raise a ValueError naming the setting unless ``radius`` is None or a finite number >= 0 and ``remove`` an
    integer >= 0."""
    if radius is not None:
        non_negative("radius", radius, note="or None: adaptive, the second-largest distance")
    int_in("remove", remove, 0, note="how many farthest neighbours to drop")


def scclip_update(
    own: Weights, received: Mapping[str, Weights], radius: float | None = None, remove: int = 0
) -> ScclipResult:
    """theta_i <- theta_i + (1 / |K|) sum_{j in K} CLIP(theta_j - theta_i, tau) (ClippedGossip, W_ij = 1 / |K|). K: the
    received neighbours less the ``remove`` farthest (remove-then-clip, Yang and Ghaderi, AAAI 2024); tau: ``radius``,
    else the second-largest distance within K (0 for one). An empty K keeps a copy of the own model. Raises a
    ValueError for a bad setting or a malformed or non-finite model."""
    check_scclip_settings(radius, remove)
    check_models(own, received)
    keys = float_keys(own)
    mine = flatten(own, keys)
    diffs = {peer: flatten(received[peer], keys) - mine for peer in sorted(received)}
    distances = {peer: float(np.linalg.norm(d)) for peer, d in diffs.items()}
    removed = set(farthest(distances, remove))
    kept = [p for p in diffs if p not in removed]
    tau = float(radius) if radius is not None else adaptive_radius([distances[p] for p in kept])
    records = {p: ClipRecord(distances[p], True, False, 0.0) for p in removed}
    step = np.zeros_like(mine)
    for peer in kept:
        d = distances[peer]
        scale = 1.0 if d <= tau or d == 0.0 else tau / d
        records[peer] = ClipRecord(d, False, scale < 1.0, scale)
        step += clip(diffs[peer], tau)
    if kept:
        mine = mine + step / len(kept)
    return ScclipResult(unflatten(mine, own, keys), tau, dict(sorted(records.items())))

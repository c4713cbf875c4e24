"""Self-centred clipping of the neighbours' models, with optional removal first (pure NumPy, no FLARE).

Two papers, one function:

- Self-centred clipping (SCCLIP): He, Karimireddy, Jaggi, "Byzantine-Robust Decentralized
  Learning via ClippedGossip", arXiv 2202.01545. The gossip step
  x_i <- x_i + sum_j W_ij CLIP(x_j - x_i, tau_i), CLIP(z, tau) = z * min(1, tau / ||z||),
  is used here with uniform weights W_ij = 1 / |N_i| over the neighbours whose models arrived.
  Each difference is clipped as one vector over all floating entries of the model, so a far
  neighbour can pull the own model by at most tau / |N_i|.
- Remove-then-clip (``remove > 0``): Yang and Ghaderi, "Byzantine-Robust Decentralized Learning via
  Remove-then-Clip Aggregation", AAAI 2024, which the LIGHTYEAR paper cites for SCCLIP. The
  farthest neighbours (by ||x_j - x_i||) are dropped first, then the rest are clipped as above and
  the mean runs over the kept ones. Their budget is a total weight to remove; with uniform
  weights that is a number of neighbours, the ``remove`` argument.

Radius: ``radius=None`` (default) takes tau as the second-largest distance ||x_j - x_i|| among the
neighbours that take part (those not removed), the LIGHTYEAR authors' choice: only the farthest
one is pulled in, to the runner-up's distance. With a single neighbour there is no runner-up and
tau = 0: that neighbour moves nothing and the site keeps its own model (a lone neighbour cannot be
told apart from a faulty one). Pass a fixed ``radius`` to let a lone neighbour in. A fixed
``radius`` >= 0 is used as given. The authors' code clipped the parameters x_j themselves, not the
differences x_j - x_i; that is not what either paper does and is not reproduced.

Models that are malformed or hold NaN or Inf raise a ValueError: they are rejected, never zeroed.
Integer entries keep the own value.
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
    """What self-centred clipping did with one neighbour's model.

    distance: ||theta_j - theta_i|| over all floating entries. removed: dropped before clipping
    (remove-then-clip). clipped: its difference was shortened to the radius. scale: the factor
    min(1, tau / distance) applied to its difference (0.0 when removed).
    """

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
    """CLIP(z, tau) = z * min(1, tau / ||z||), z one vector (ClippedGossip, arXiv 2202.01545).

    A zero vector is returned unchanged.
    """
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
    """Raise a ValueError naming the setting unless ``radius`` is None or a finite number >= 0
    and ``remove`` an integer >= 0."""
    if radius is not None:
        non_negative("radius", radius, note="or None: adaptive, the second-largest distance")
    int_in("remove", remove, 0, note="how many farthest neighbours to drop")


def scclip_update(
    own: Weights, received: Mapping[str, Weights], radius: float | None = None, remove: int = 0
) -> ScclipResult:
    """theta_i <- theta_i + (1 / |K|) sum_{j in K} CLIP(theta_j - theta_i, tau).

    K is every received neighbour, minus the ``remove`` farthest when ``remove > 0``
    (remove-then-clip, Yang and Ghaderi, AAAI 2024); CLIP and the update follow ClippedGossip
    (arXiv 2202.01545) with W_ij = 1 / |K|. tau is ``radius`` if given, else the second-largest
    distance within K (0 when K has one member). If K is empty (nothing received, or everything
    removed) the own model is returned unchanged (a copy).

    Returns ``ScclipResult(model, radius, records)``. Raises a ValueError for a bad setting or a
    malformed or non-finite model.
    """
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

"""Self-centred clipping's site (SCCLIP), optionally remove-then-clip.

Each round a site moves its freshly trained model by the mean of its neighbours' clipped
differences, theta_i + (1/|K|) sum_{j in K} CLIP(theta_j - theta_i, tau)
(:func:`lightyear.algorithms.p2p.scclip.scclip_update`). Which paper each option follows:

- the update and CLIP: self-centred clipping of He, Karimireddy and Jaggi, "Byzantine-Robust
  Decentralized Learning via ClippedGossip" (arXiv 2202.01545), with uniform weights;
- ``radius=None`` (default): tau is the second-largest distance ||theta_j - theta_i|| of the
  round, the LIGHTYEAR authors' adaptive choice (applied to differences, as the paper does, not to
  the parameters as their code did); a number: a fixed tau, as in ClippedGossip's analysis;
- ``remove > 0``: the ``remove`` farthest neighbours are dropped first, the remove-then-clip rule
  of Yang and Ghaderi (AAAI 2024), which the LIGHTYEAR paper cites for SCCLIP.

Every round's record gives tau and, per in-neighbour, its distance, its clipping factor and
whether it was removed.
"""

from __future__ import annotations

import time

from lightyear.algorithms.detection import Labelling, filled, names
from lightyear.algorithms.p2p.scclip import check_scclip_settings, scclip_update
from lightyear.flare.declarations import P2P, Detection, Method
from lightyear.p2p.site.executor import Aggregation, P2PExecutor


class ScclipExecutor(P2PExecutor):
    SETTING_NAMES = {"radius": "scclip_radius", "remove": "scclip_remove"}
    """Constructor argument -> the job setting that gives it (``--set scclip_radius=...``)."""

    def __init__(self, radius: float | None = None, remove: int = 0, **kwargs):
        """Args:
        radius: None for the adaptive tau (second-largest distance of the round) or a fixed tau >= 0.
        remove: how many farthest neighbours to drop before clipping (0: plain self-centred clipping).
        Other arguments: see :class:`~lightyear.p2p.site.executor.P2PExecutor`.
        """
        check_scclip_settings(radius, remove)
        self.radius = None if radius is None else float(radius)
        self.remove = remove
        super().__init__(**kwargs)

    def aggregate(self, round_num: int, own: dict, received: dict[str, dict], inbox=None) -> Aggregation:
        start = time.perf_counter()
        result = scclip_update(own, received, radius=self.radius, remove=self.remove)
        kept = [p for p, r in result.records.items() if not r.removed]
        fields = {
            "selected": kept,
            "n_selected": len(kept),
            "radius": result.radius,
            "removed": [p for p, r in result.records.items() if r.removed],
            "clipped": [p for p, r in result.records.items() if r.clipped],
        }
        for peer in self.in_neighbours:
            record = result.records.get(peer)
            fields[f"{peer}_distance"] = record.distance if record else ""
            fields[f"{peer}_scale"] = record.scale if record else ""
        return Aggregation(weights=result.model, fields=fields, score_s=time.perf_counter() - start)


def scclip_labels(row: dict, peers) -> Labelling:
    """SCCLIP's detections: a peer clipped (scale < 1) or removed, or a rejected one."""
    rejected = names(row.get("rejected"))
    evaluated = filled(row, peers, "_distance") | rejected
    return Labelling(evaluated, names(row["clipped"]) | names(row["removed"]) | rejected)


METHOD = Method(
    "scclip",
    P2P,
    "self-centred clipping of the differences to the own model (ClippedGossip, He et al.); "
    "optional remove-then-clip (Yang and Ghaderi, AAAI 2024)",
    site=ScclipExecutor,
    detection=Detection(
        scclip_labels,
        ("round", "clipped", "removed", "rejected"),
        "_distance",
        "clipped (scale < 1) or removed, or rejected",
    ),
)

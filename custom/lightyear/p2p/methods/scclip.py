"""Self-centred clipping's site: theta_i + (1/|K|) sum_{j in K} CLIP(theta_j - theta_i, tau) (SCCLIP: He, Karimireddy
and Jaggi, ClippedGossip, arXiv 2202.01545), optionally remove-then-clip (Yang and Ghaderi, AAAI 2024); tau and the
choices: :mod:`lightyear.algorithms.p2p.scclip`."""

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
        """``radius``: None (adaptive tau) or a fixed tau >= 0; ``remove``: farthest neighbours dropped first."""
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

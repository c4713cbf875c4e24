"""What a peer-to-peer method's ``aggregate`` returns to the site's round
(:meth:`~lightyear.p2p.site.executor.P2PExecutor.aggregate`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Aggregation:
    """The new weights, record fields, scoring seconds, refused peers and, if known, the weights' validation scores."""

    weights: dict
    fields: dict = field(default_factory=dict)
    score_s: float = 0.0
    rejected: dict = field(default_factory=dict)
    val_metrics: dict | None = None

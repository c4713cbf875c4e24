"""What a peer-to-peer method's ``aggregate`` returns to the site's round
(:meth:`~lightyear.p2p.site.executor.P2PExecutor.aggregate`)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Aggregation:
    """What an aggregation rule returns: the new weights, record fields, seconds spent scoring,
    peers it refused while scoring (peer -> reason), and, when the rule evaluated exactly these
    weights on the validation set already, their metrics (``evaluate("val")``'s), which the round
    then records instead of evaluating them again."""

    weights: dict
    fields: dict = field(default_factory=dict)
    score_s: float = 0.0
    rejected: dict = field(default_factory=dict)
    val_metrics: dict | None = None

"""Decentralised FedAvg's site, the baseline with no defence: the equal-weight mean of the own and each received model
(:func:`lightyear.algorithms.p2p.p2p_average.p2p_average`; FedAvg of McMahan et al. 2017 on each neighbourhood)."""

from __future__ import annotations

from lightyear.algorithms.p2p.p2p_average import p2p_average
from lightyear.flare.declarations import P2P, Method
from lightyear.p2p.site.executor import Aggregation, P2PExecutor


class P2PFedAvgExecutor(P2PExecutor):
    """Takes :class:`~lightyear.p2p.site.executor.P2PExecutor`'s arguments only (no settings of its own)."""

    def aggregate(self, round_num: int, own: dict, received: dict[str, dict], inbox=None) -> Aggregation:
        peers = sorted(received)
        weights = p2p_average(own, [received[p] for p in peers])
        return Aggregation(weights=weights, fields={"selected": peers, "n_selected": len(peers)})


METHOD = Method(
    "p2p_fedavg",
    P2P,
    "decentralised FedAvg: equal-weight mean of the own model and every received one, no defence",
    site=P2PFedAvgExecutor,
)
"""It excludes no sender, so it has no detection figures."""

"""Decentralised FedAvg's site: the plain peer-to-peer baseline, with no defence.

Each round a site averages its freshly trained model with every valid model its in-neighbours
sent, with equal weights (:func:`lightyear.algorithms.p2p.p2p_average.p2p_average`: FedAvg of McMahan
et al. 2017 run by each site on its neighbourhood). Whatever a peer sends and passes the
exchange's format checks is averaged in.
"""

from __future__ import annotations

from lightyear.algorithms.p2p.p2p_average import p2p_average
from lightyear.flare.declarations import P2P, Method
from lightyear.p2p.site.executor import Aggregation, P2PExecutor


class P2PFedAvgExecutor(P2PExecutor):
    def __init__(self, **kwargs):
        """Args: see :class:`~lightyear.p2p.site.executor.P2PExecutor` (this rule has no settings of its own)."""
        super().__init__(**kwargs)

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
"""P2P FedAvg as the toolkit knows it: it excludes no sender, so it has no detection figures."""

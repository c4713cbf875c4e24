"""The Byzantine-robust use of Clustered FL as a star aggregator (Sattler, Mueller, Samek, "Clustered Federated
Learning: Model-Agnostic Distributed Multitask Optimization Under Privacy Constraints", IEEE TNNLS 2020): the updates
are split in two by complete linkage on their cosine distances (the paper's bipartition); the larger cluster is
averaged, the smaller left out, every round (:func:`lightyear.algorithms.star.cfl.cfl`).
"""

from __future__ import annotations

from lightyear.algorithms.detection import STAR_RECORD, excluded_labels
from lightyear.algorithms.star.cfl import cfl
from lightyear.flare.declarations import STAR, Detection, Method
from lightyear.star.aggregator import StarAggregator


class CflAggregator(StarAggregator):
    def aggregate(self, global_weights, results, round_num, fl_ctx):
        mean, majority, minority = cfl({s: r["weights"] for s, r in results.items()}, global_weights)
        self.log_info(fl_ctx, f"round {round_num}: CFL kept the cluster {majority}, left out {minority}")
        return self.decide(mean, majority, minority)


METHOD = Method(
    "cfl",
    STAR,
    "bipartition of the updates by cosine similarity; the larger cluster averaged",
    rule=CflAggregator,
    detection=Detection(excluded_labels, STAR_RECORD, "", "in the smaller cluster, or rejected by the server"),
)

"""ASMR as a star aggregator (Konstantin, Fuchs, Mukhopadhyay, "ASMR: Angular Support for Malfunctioning Client
Resilience in Federated Learning", MIDL 2024): each round the sites' weight vectors get an angular outlier factor;
those below the largest gap in the sorted factors are flagged, the rest averaged
(:func:`lightyear.algorithms.star.asmr.asmr`).
"""

from __future__ import annotations

from lightyear.algorithms.detection import STAR_RECORD, excluded_labels
from lightyear.algorithms.star.asmr import asmr, check_min_gap
from lightyear.flare.declarations import STAR, Detection, Method
from lightyear.star.aggregator import StarAggregator


class AsmrAggregator(StarAggregator):
    def __init__(self, min_gap: float = 0.0):
        """Args: min_gap: split only where the largest gap between sorted outlier factors (mean 1) exceeds this; 0
        (the published rule) flags someone whenever the factors differ, > 0 is this toolkit's addition."""
        super().__init__()
        self.min_gap = check_min_gap(min_gap)

    def aggregate(self, global_weights, results, round_num, fl_ctx):
        mean, outcome = asmr({s: r["weights"] for s, r in results.items()}, self.min_gap)
        self.log_info(fl_ctx, f"round {round_num}: ASMR flagged {outcome.flagged}, averaged {outcome.benign}")
        return self.decide(mean, outcome.benign, outcome.flagged, outlier_factor=outcome.outlier_factor)


METHOD = Method(
    "asmr",
    STAR,
    "angular outlier factors split at the largest gap; the rest averaged",
    rule=AsmrAggregator,
    detection=Detection(
        excluded_labels,
        STAR_RECORD,
        "",
        "flagged (below the largest gap of the outlier factors), or rejected by the server",
    ),
)

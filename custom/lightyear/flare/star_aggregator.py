"""Server-side aggregation rules of the star topology, as FLARE components.

A star aggregator gets every result of a round at once (robust rules such as Krum need them
all) and returns the new global model. The rules themselves are in
:mod:`lightyear.algorithms.aggregation`.
"""

from __future__ import annotations

from nvflare.apis.fl_component import FLComponent
from nvflare.apis.fl_context import FLContext

from lightyear.algorithms.aggregation import weighted_average


class StarAggregator(FLComponent):
    """Base of the server-side rules: ``aggregate(global, results, round) -> new global``."""

    def aggregate(self, global_weights: dict, results: dict[str, dict], round_num: int, fl_ctx: FLContext) -> dict:
        """``results`` maps site -> {"weights": dict, "num_samples": float}, every result checked
        (keys, shapes, finite values) and cast to the global model's dtypes."""
        raise NotImplementedError

    def state(self) -> dict:
        """JSON-serialisable state kept across rounds (reputations, blocked sites...), saved by
        the controller after every round; {} for a stateless rule."""
        return {}

    def task_extras(self, round_num: int) -> dict:
        """Extra entries of the round's task data (e.g. a method's settings for the sites)."""
        return {}


class FedAvgAggregator(StarAggregator):
    """FedAvg: the sample-weighted mean of the sites' models (McMahan et al. 2017)."""

    def __init__(self, weigh_by_samples: bool = True):
        super().__init__()
        self.weigh_by_samples = bool(weigh_by_samples)

    def aggregate(self, global_weights, results, round_num, fl_ctx):
        sites = sorted(results)
        weights = [float(results[s]["num_samples"]) if self.weigh_by_samples else 1.0 for s in sites]
        return weighted_average([results[s]["weights"] for s in sites], weights)

"""Server-side aggregation rules of the star topology, as FLARE components: each gets every result of a round at
once and returns the new global model (the rules' components: ``lightyear.star.rules``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from nvflare.apis.fl_component import FLComponent
from nvflare.apis.fl_context import FLContext

from lightyear.algorithms.aggregation import weighted_average
from lightyear.checks import boolean


@dataclass
class RuleDecision:
    """A round's new global weights and, for a rule that chooses (else None), the sites kept and left out, and why."""

    weights: dict
    kept: list | None = None
    excluded: list | None = None
    details: dict = field(default_factory=dict)


class StarAggregator(FLComponent):
    """Base of the server-side rules: ``aggregate(global, results, round) -> RuleDecision``. The controller keeps
    the decisions in its history; a rule keeps only what it needs itself (reputations, pools) in :meth:`state`."""

    @staticmethod
    def decide(new_global: dict, kept, excluded, **details) -> RuleDecision:
        """The decision of a rule that chose: ``new_global`` from ``kept``, ``excluded`` left out."""
        return RuleDecision(new_global, sorted(kept), sorted(excluded), details)

    def check_sites(self, num_sites: int) -> str:
        """A message naming the problem if the rule cannot run with ``num_sites`` sites, else ""."""
        return ""

    def site_models(self, sites: list[str], global_weights: dict, round_num: int, fl_ctx: FLContext) -> dict | None:
        """The model each site is sent this round (round ``rounds``: the final evaluation), or None to broadcast the
        global model. A site missing from the dict gets no training task (and the global model to evaluate)."""
        return None

    def aggregate(
        self, global_weights: dict, results: dict[str, dict], round_num: int, fl_ctx: FLContext
    ) -> RuleDecision:
        """``results``: site -> {"weights", "num_samples"}, each checked and cast to the global model's dtypes."""
        raise NotImplementedError

    def state(self) -> dict:
        """JSON-serialisable state kept across rounds (reputations...), saved beside the history each round."""
        return {}

    def state_arrays(self) -> dict:
        """Array state kept across rounds (e.g. model pools), saved as ``aggregator_state.npz``; {} if none."""
        return {}

    def removed_sites(self) -> list[str]:
        """The sites the rule has shut out for good (removed, blocked), sorted."""
        return []

    def task_extras(self, round_num: int) -> dict:
        """Extra entries of the round's task data (e.g. a method's settings for the sites)."""
        return {}


class FedAvgAggregator(StarAggregator):
    """FedAvg: the sample-weighted mean of the sites' models (McMahan et al. 2017)."""

    def __init__(self, weigh_by_samples: bool = True):
        super().__init__()
        self.weigh_by_samples = boolean("weigh_by_samples", weigh_by_samples)

    def aggregate(self, global_weights, results, round_num, fl_ctx):
        sites = sorted(results)
        weights = [float(results[s]["num_samples"]) if self.weigh_by_samples else 1.0 for s in sites]
        return RuleDecision(weighted_average([results[s]["weights"] for s in sites], weights))

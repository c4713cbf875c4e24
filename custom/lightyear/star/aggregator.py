"""Server-side aggregation rules of the star topology, as FLARE components.

A star aggregator gets every result of a round at once (robust rules such as Krum need them
all) and returns the new global model. The rules themselves are plain functions in
:mod:`lightyear.algorithms`; each rule's component is in its own module (``lightyear.star.rules``:
``krum``, ``afa``, ``asmr``, ``cfl``, ``fedcap``). FedProx and Ditto aggregate with
:class:`FedAvgAggregator`: their difference is on the sites.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nvflare.apis.fl_component import FLComponent
from nvflare.apis.fl_context import FLContext

from lightyear.algorithms.aggregation import weighted_average
from lightyear.checks import boolean


@dataclass
class RuleDecision:
    """What a rule decided in a round: the new global weights and, for a rule that chooses, the
    sites it kept and left out (sorted) with the details of why (None for a rule that keeps every
    result, such as FedAvg). The controller keeps every decision in its history."""

    weights: dict
    kept: list | None = None
    excluded: list | None = None
    details: dict = field(default_factory=dict)


class StarAggregator(FLComponent):
    """Base of the server-side rules: ``aggregate(global, results, round) -> RuleDecision``.

    The controller (:class:`~lightyear.star.controller.StarController`) keeps each round's decision
    in its ``history`` (``aggregator_state.json``) with the results its checks refused and, in an
    attack job, what the simulated adversary crafted; a rule keeps only what it needs itself
    (reputations, pools) in :meth:`state`.
    """

    @staticmethod
    def decide(new_global: dict, kept, excluded, **details) -> RuleDecision:
        """The decision of a rule that chose: ``new_global`` from ``kept``, ``excluded`` left out."""
        return RuleDecision(new_global, sorted(kept), sorted(excluded), details)

    def check_sites(self, num_sites: int) -> str:
        """A message naming the problem if the rule cannot run with ``num_sites`` sites, else ""."""
        return ""

    def site_models(self, sites: list[str], global_weights: dict, round_num: int, fl_ctx: FLContext) -> dict | None:
        """The model each site is sent this round (round ``rounds`` is the final evaluation), or
        None to send every site the global model in one broadcast. A site missing from the dict
        gets no training task (and the global model for the final evaluation)."""
        return None

    def aggregate(
        self, global_weights: dict, results: dict[str, dict], round_num: int, fl_ctx: FLContext
    ) -> RuleDecision:
        """``results`` maps site -> {"weights": dict, "num_samples": float}, every result checked
        (keys, shapes, finite values) and cast to the global model's dtypes."""
        raise NotImplementedError

    def state(self) -> dict:
        """JSON-serialisable state kept across rounds (reputations, blocked sites...), saved by the
        controller beside its history after every aggregated round."""
        return {}

    def state_arrays(self) -> dict:
        """Array state kept across rounds (e.g. model pools), saved as ``aggregator_state.npz``; {} if none."""
        return {}

    def removed_sites(self) -> list[str]:
        """The sites the rule has shut out for good (removed, blocked), sorted; [] for a rule that
        decides afresh each round."""
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

"""Server-side aggregation rules of the star topology, as FLARE components.

A star aggregator gets every result of a round at once (robust rules such as Krum need them
all) and returns the new global model. The rules themselves are plain functions in
:mod:`lightyear.algorithms`; each rule's component is in its own module
(``krum_aggregator``, ``afa_aggregator``, ``asmr_aggregator``, ``cfl_aggregator``,
``fedcap_aggregator``). FedProx and Ditto aggregate with :class:`FedAvgAggregator`: their
difference is on the sites.
"""

from __future__ import annotations

from nvflare.apis.fl_component import FLComponent
from nvflare.apis.fl_context import FLContext

from lightyear.algorithms.aggregation import weighted_average
from lightyear.flare.declarations import STAR, Method


class StarAggregator(FLComponent):
    """Base of the server-side rules: ``aggregate(global, results, round) -> new global``.

    Its ``history`` lists, per aggregated round, which sites the rule kept and which it left out
    (and why), and is part of :meth:`state`, so ``aggregator_state.json`` shows every decision.
    Each entry also lists under ``rejected`` the sites whose results the controller's model
    checks refused that round (set in :attr:`rejected` before :meth:`aggregate`): the rule never
    saw them, but they arrived, so the detection metrics count them as evaluated and left out
    (:mod:`lightyear.experiments.detection`). In an attack job each entry also holds under
    ``attack`` what the simulated adversary crafted that round (set in :attr:`attack`; see
    :mod:`lightyear.star.adversary`).
    """

    def __init__(self):
        super().__init__()
        self.history: list[dict] = []
        self.rejected: list[str] = []
        self.attack: dict | None = None

    def record(self, round_num: int, kept, excluded, **details) -> dict:
        """Append one round's decision (and the round's :attr:`rejected` results) to ``history`` and return it."""
        entry = {"round": int(round_num), "kept": sorted(kept), "excluded": sorted(excluded), "rejected": sorted(self.rejected), **details}
        if self.attack is not None:
            entry["attack"] = self.attack
        self.history.append(entry)
        return entry

    def check_sites(self, num_sites: int) -> str:
        """A message naming the problem if the rule cannot run with ``num_sites`` sites, else ""."""
        return ""

    def site_models(self, sites: list[str], global_weights: dict, round_num: int, fl_ctx: FLContext) -> dict | None:
        """The model each site is sent this round (round ``rounds`` is the final evaluation), or
        None to send every site the global model in one broadcast. A site missing from the dict
        gets no training task (and the global model for the final evaluation)."""
        return None

    def aggregate(self, global_weights: dict, results: dict[str, dict], round_num: int, fl_ctx: FLContext) -> dict:
        """``results`` maps site -> {"weights": dict, "num_samples": float}, every result checked
        (keys, shapes, finite values) and cast to the global model's dtypes."""
        raise NotImplementedError

    def state(self) -> dict:
        """JSON-serialisable state kept across rounds (reputations, blocked sites...) and the
        decisions so far, saved by the controller after every aggregated round."""
        return {"history": self.history} if self.history else {}

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
        if not isinstance(weigh_by_samples, bool):
            raise ValueError(f"weigh_by_samples must be true or false, got {weigh_by_samples!r}")
        self.weigh_by_samples = weigh_by_samples

    def aggregate(self, global_weights, results, round_num, fl_ctx):
        sites = sorted(results)
        weights = [float(results[s]["num_samples"]) if self.weigh_by_samples else 1.0 for s in sites]
        return weighted_average([results[s]["weights"] for s in sites], weights)


METHOD = Method("fedavg", STAR, "sample-weighted mean on the server", site="lightyear.star.executor.StarExecutor",
                rule="lightyear.star.aggregator.FedAvgAggregator")
"""Star FedAvg (McMahan et al. 2017): it excludes no sender, so it has no detection figures."""

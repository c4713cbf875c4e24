"""Adaptive Federated Averaging as a star aggregator (Munoz-Gonzalez, Co, Lupu, "Byzantine-Robust Federated Machine
Learning through Adaptive Model Averaging", arXiv:1909.05125, 2019), Algorithm 1
(:func:`lightyear.algorithms.star.afa.afa_round`): the unblocked sites' updates are averaged with weights
n_k * E[p_k], sites with a cosine similarity beyond median -/+ xi * std removed and the pass repeated with
xi + delta_xi; a site with P(p_k < 0.5) > ``block_threshold`` under its Beta reputation is blocked for good (it still
gets the broadcast, its result ignored). Defaults are the authors'.
"""

from __future__ import annotations

from lightyear.algorithms.detection import STAR_RECORD, excluded_labels
from lightyear.algorithms.star.afa import (
    BLOCK_THRESHOLD,
    DELTA_XI,
    PRIOR,
    XI0,
    AfaReputation,
    afa_round,
    check_block_threshold,
    check_xi,
)
from lightyear.algorithms.vectors import flatten, unflatten
from lightyear.flare.declarations import STAR, Detection, Method
from lightyear.star.aggregator import StarAggregator


class AfaAggregator(StarAggregator):
    def __init__(
        self,
        xi0: float = XI0,
        delta_xi: float = DELTA_XI,
        alpha0: float = PRIOR,
        beta0: float = PRIOR,
        block_threshold: float = BLOCK_THRESHOLD,
    ):
        """Args: xi0: first removal threshold, in standard deviations of the similarities; delta_xi: added after
        every pass that removed someone; alpha0, beta0: Beta prior of each reputation; block_threshold: a site is
        blocked once P(p < 0.5) exceeds this."""
        super().__init__()
        self.xi0, self.delta_xi = check_xi(xi0, delta_xi)
        self.block_threshold = check_block_threshold(block_threshold)
        self.reputation = AfaReputation(alpha0=alpha0, beta0=beta0)

    def aggregate(self, global_weights, results, round_num, fl_ctx):
        reference = flatten(global_weights)
        updates = {s: flatten(r["weights"]) - reference for s, r in results.items()}
        counts = {s: r["num_samples"] for s, r in results.items()}
        ignored = sorted(s for s in results if s in self.reputation.blocked)
        outcome = afa_round(updates, counts, self.reputation, self.xi0, self.delta_xi, self.block_threshold)
        decision = self.decide(
            unflatten(reference + outcome.aggregate, global_weights),
            outcome.good,
            outcome.bad + ignored,
            removed=outcome.bad,
            ignored_blocked=ignored,
            newly_blocked=outcome.newly_blocked,
            weights=outcome.weights,
            similarity=outcome.similarity,
        )
        self.log_info(
            fl_ctx, f"round {round_num}: AFA kept {outcome.good}, removed {outcome.bad}, ignored blocked {ignored}"
        )
        for site in outcome.newly_blocked:
            self.log_warning(
                fl_ctx,
                f"round {round_num}: AFA blocked {site} for good "
                f"(P(reputation < 0.5) = {self.reputation.prob_bad(site):.3f})",
            )
        return decision

    def state(self) -> dict:
        return {"reputation": self.reputation.to_dict()}

    def removed_sites(self) -> list[str]:
        return sorted(self.reputation.blocked)


METHOD = Method(
    "afa",
    STAR,
    "removes updates dissimilar to the aggregate; Beta reputations block sites for good",
    rule=AfaAggregator,
    detection=Detection(
        excluded_labels, STAR_RECORD, "", "removed by the similarity test or blocked, or rejected by the server"
    ),
)

"""LIGHTYEAR's site: the thin FLARE component over :func:`~lightyear.algorithms.p2p.lightyear_rule.decide` ("Don't
Reach for the Stars", Eqs. 12-18). It records each decision, carries the validated aggregation's state across rounds
and restarts, and offers the rule as an adaptive attacker's oracle."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from lightyear.algorithms.detection import Labelling, filled, names
from lightyear.algorithms.p2p.agreement import skill
from lightyear.algorithms.p2p.lightyear_rule import VALIDATED, Decision, Rule, decide
from lightyear.algorithms.p2p.validation_bounds import (
    DEFAULT_CONFIDENCE,
    DEFAULT_DRIFT_BUDGET,
    DEFAULT_MAX_NORM_GROWTH,
    DEFAULT_MAX_PEER_SHARE,
    Bounds,
    Held,
    Measured,
)
from lightyear.flare.declarations import ORACLE, P2P, Detection, Method, Settings
from lightyear.p2p.site.executor import Aggregation, P2PExecutor

RETIRED = (
    "validation_delta",
    "max_loss_growth",
    "midpoint_test",
    "midpoint_loss_growth",
    "midpoint_norm_growth",
    "midpoint_barrier",
    "align_units",
)
"""Former settings of the validated aggregation: a job that still names one is refused."""
ATTACKER_COPY = "crafted-"
"""Names of the crafted copies in a predicted round (no site is named so)."""


class LightyearExecutor(P2PExecutor):
    def __init__(
        self,
        tau: float = 0.75,
        gamma: float = 0.95,
        third_term: str = "confidence",
        normalize_entropy: bool = True,
        skill_floor: float = 0.0,
        aggregation: str = VALIDATED,
        confidence: float = DEFAULT_CONFIDENCE,
        max_norm_growth: float = DEFAULT_MAX_NORM_GROWTH,
        drift_budget: float = DEFAULT_DRIFT_BUDGET,
        max_peer_share: float = DEFAULT_MAX_PEER_SHARE,
        **kwargs,
    ):
        """Args (others: ``P2PExecutor``'s):
        tau: selection threshold in [0, 1] (Eq. 17; 0.75 classification, 0.6 segmentation in the paper).
        gamma: decay in (0, 1] of the aggregation step (Eq. 18; 0.95 in the paper; 1 = FedAvg over S).
        third_term: ``confidence`` (Eq. 15) or ``sharpness`` (the short paper's entropy term).
        normalize_entropy: divide the sharpness term's entropies by log K, keeping it in [0, 1].
        skill_floor: cold-start guard in [0, 1): a model of lower skill takes part in no aggregation (0: the paper's).
        aggregation: ``validated`` (adopt only what passes this site's own paired tests) or ``paper`` (Eq. 18).
        confidence, max_norm_growth, drift_budget, max_peer_share: the validated aggregation's bounds.
        """
        retired = sorted(set(kwargs) & set(RETIRED))
        if retired:
            raise ValueError(
                f"{', '.join(retired)}: no longer settings of LIGHTYEAR's validated aggregation, which judges every "
                "candidate with one paired test (confidence, drift_budget, max_norm_growth, max_peer_share; "
                "docs/attacks.md); remove them from the job"
            )
        bounds = Bounds(confidence, max_norm_growth, drift_budget, max_peer_share)
        self.rule = Rule(tau, gamma, third_term, skill_floor, aggregation, bounds)
        self.normalize_entropy = bool(normalize_entropy)
        self.held = Held()
        self.start_passes = 0  # the pass that measured the first round's start, counted in that round's record
        super().__init__(**kwargs)

    def assess(self, weights: dict | None = None):
        """One forward pass of ``weights`` (None: the site's current model) over the own validation set."""
        return self.runtime.assess(weights, normalize_entropy=self.normalize_entropy)

    def local_update(self, round_num: int) -> dict:
        """Trains, after measuring the start model once a run: the validated aggregation's first reference."""
        if self.rule.aggregation == VALIDATED and self.held.start is None and self.round_senders(round_num):
            self.start_passes = 1
            began = self.assess()
            if began.finite:  # else the round is judged against its freshly trained model, the stricter reference
                self.held = dataclasses.replace(self.held, start=Measured.of(began))
        return super().local_update(round_num)

    def aggregate(self, round_num: int, own: dict, received: dict[str, dict], inbox=None) -> Aggregation:
        decision = decide(own, received, round_num, self.assess, self.rule, self.held)
        decision.evaluations += self.start_passes
        self.start_passes = 0
        self.held = decision.held or self.held
        for peer, reason in decision.excluded.items():
            self.logger.info(f"round {round_num}: left out {peer}: {reason}")
        validated = self.rule.aggregation == VALIDATED
        return Aggregation(
            weights=decision.weights,
            fields=decision_fields(decision, self.rule, self.neighbours),
            score_s=decision.score_s,
            rejected=decision.rejected,
            val_metrics=dict(decision.adopted_assessment.metrics) if validated else None,
        )

    def method_state(self) -> tuple[dict, dict]:
        """What the validated aggregation carries across rounds (:class:`Held`), kept across a restart."""
        arrays = {}
        for name in ("start", "anchor"):
            measured = getattr(self.held, name)
            if measured is not None:
                arrays.update({f"{name}_losses": measured.losses, f"{name}_errors": measured.errors})
        return {}, arrays

    def restore_method_state(self, state: dict, arrays: dict) -> None:
        found = {}
        for name in ("start", "anchor"):
            losses, errors = arrays.get(f"{name}_losses"), arrays.get(f"{name}_errors")
            if losses is None and errors is None:
                continue
            if losses is None or errors is None or np.ndim(losses) != 1 or np.shape(losses) != np.shape(errors):
                raise ValueError(f"the checkpoint's LIGHTYEAR {name} must hold per-sample losses and errors alike")
            if not (np.all(np.isfinite(losses)) and np.all(np.isfinite(errors))):
                raise ValueError(f"the checkpoint's LIGHTYEAR {name} holds non-finite values")
            found[name] = Measured(np.asarray(losses, dtype=np.float64), np.asarray(errors, dtype=np.float64))
        self.held = Held(**found)

    def predicted_outcome(self, round_num: int, receiver: dict, others: dict[str, dict], copies: int):
        """The oracle (``P2PExecutor.predicted_outcome``): the rule's own decision on this site's validation set, the
        receiver taken as past its warm-up and without an anchor (the attacker never sees its history)."""
        stable = {id(receiver): self.assess(receiver)}
        stable.update({id(w): self.assess(w) for w in others.values()})
        own_skill = skill(stable[id(receiver)].summary)
        floor = max(0.0, min(self.rule.skill_floor, own_skill)) if math.isfinite(own_skill) else self.rule.skill_floor
        rule = dataclasses.replace(self.rule, skill_floor=floor)
        names_ = [f"{ATTACKER_COPY}{i}" for i in range(max(1, copies))]

        def predict(crafted: dict) -> tuple[bool, dict]:
            known = {**stable, id(crafted): self.assess(crafted)}
            received = {**others, **{n: crafted for n in names_}}
            decision = decide(receiver, received, round_num, self.assess, rule, None, known)
            return any(n in decision.adopted for n in names_), decision.weights

        return predict


def decision_fields(decision: Decision, rule: Rule, neighbours) -> dict:
    """The record fields of a round's decision (``<peer>_excluded``: why the validated aggregation left it out)."""
    fields = {"selected": decision.selected, "n_selected": len(decision.selected), "step": decision.step}
    own_skill = skill(decision.own.summary)
    fields.update({"own_skill": own_skill, "warming_up": int(decision.warming_up), "aggregation": rule.aggregation})
    fields["adopted"] = decision.adopted
    if rule.aggregation == VALIDATED:
        fields.update({"excluded": sorted(decision.excluded), "validation_evals": decision.evaluations})
        fields.update({"own_val_perf": decision.own.performance, "own_val_loss": decision.own.loss})
        adopted = decision.adopted_assessment
        fields.update({"adopted_val_perf": adopted.performance, "adopted_val_loss": adopted.loss})
        anchor = decision.held.anchor if decision.held is not None else None
        fields["anchor_val_loss"] = float(np.mean(anchor.losses)) if anchor is not None and len(anchor.losses) else ""
        fields.update({f"{peer}_excluded": decision.excluded.get(peer, "") for peer in neighbours})
    for peer in neighbours:
        s = decision.scores.get(peer)
        fields[f"{peer}_score"] = s.score if s else ""
        fields[f"{peer}_perf"] = s.performance if s else ""
        fields[f"{peer}_ece"] = s.ece if s else ""
        fields[f"{peer}_{rule.third_term}"] = s.third if s else ""
        fields[f"{peer}_skill"] = decision.skills.get(peer, "")
    return fields


def lightyear_labels(row: dict, peers) -> Labelling:
    """LIGHTYEAR's detections: a peer not selected, not adopted or rejected (in a warm-up round: only rejected)."""
    rejected = names(row.get("rejected"))
    if str(row.get("warming_up", "0")) in ("1", "True"):
        return Labelling(rejected, rejected)
    evaluated = filled(row, peers, "_score") | rejected
    kept = names(row["adopted"]) if "adopted" in row else names(row["selected"])
    return Labelling(evaluated, evaluated - kept)


SETTINGS = Settings(defaults={"skill_floor": 0.5}, tasks={"segmentation": {"tau": 0.6, "skill_floor": 0.0}})
"""The cold-start guard on classification (docs/jobs-and-settings.md); the paper's tau and no guard on segmentation."""

METHOD = Method(
    "lightyear",
    P2P,
    "agreement-scored selection (Eqs. 12-17), round-decayed aggregation (Eq. 18) that adopts only an "
    "aggregate the site validated on its own data",
    site=LightyearExecutor,
    settings=SETTINGS,
    detection=Detection(
        lightyear_labels,
        ("round", "selected", "rejected"),
        "_score",
        "not selected (agreement score < tau or below the skill floor), excluded before or after averaging, "
        "or rejected",
    ),
    adaptive=ORACLE,
)

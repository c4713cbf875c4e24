"""What a LIGHTYEAR site adopts in a round, as one pure function (no FLARE).

:func:`decide` scores every received model against the own one (agreement score, Eqs. 12-16 of "Don't Reach for the
Stars"), selects A_ij >= tau (Eq. 17) and steps gamma^t towards their mean (Eq. 18): as published (``paper``) or
validated (:mod:`~lightyear.algorithms.p2p.validated_update`). The site and an adaptive attacker's prediction both
call it; all measuring goes through the ``assess`` callable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from lightyear.algorithms.aggregation import Weights
from lightyear.algorithms.p2p.agreement import THIRD_TERMS, agreement, check_skill_floor, check_tau, select_peers, skill
from lightyear.algorithms.p2p.decayed_update import check_gamma, decayed_mean_update
from lightyear.algorithms.p2p.validated_update import validated_update
from lightyear.algorithms.p2p.validation_bounds import DEFAULT_BOUNDS, Assessment, Bounds, Held

PAPER, VALIDATED = "paper", "validated"
AGGREGATIONS = (VALIDATED, PAPER)


@dataclass(frozen=True)
class Rule:
    """LIGHTYEAR's settings, checked: ``tau`` (Eq. 17), ``gamma`` (Eq. 18), ``third_term`` (Eq. 15 or
    ``sharpness``), ``skill_floor``, ``aggregation`` and the validated aggregation's ``bounds``."""

    tau: float = 0.75
    gamma: float = 0.95
    third_term: str = "confidence"
    skill_floor: float = 0.0
    aggregation: str = VALIDATED
    bounds: Bounds = DEFAULT_BOUNDS

    def __post_init__(self):
        check_tau(self.tau)
        check_gamma(self.gamma)
        check_skill_floor(self.skill_floor)
        if self.third_term not in THIRD_TERMS:
            raise ValueError(f"third_term must be one of {THIRD_TERMS}, got {self.third_term!r}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(
                f"aggregation must be one of {', '.join(AGGREGATIONS)} (validated: adopt only a validated "
                f"aggregate; paper: Eq. 18 as published), got {self.aggregation!r}"
            )


@dataclass
class Decision:
    """A site's round: the adopted ``weights``, assessments, agreement scores, skills, peers refused while scoring
    (peer -> reason), the selection, whether warming up, the adopted and excluded peers, extra validation passes,
    :class:`~lightyear.algorithms.p2p.validation_bounds.Held` (None for the paper rule) and seconds spent scoring."""

    weights: dict
    own: Assessment
    adopted_assessment: Assessment
    step: float
    assessed: dict = field(default_factory=dict)
    scores: dict = field(default_factory=dict)
    skills: dict = field(default_factory=dict)
    rejected: dict = field(default_factory=dict)
    selected: list = field(default_factory=list)
    warming_up: bool = False
    adopted: list = field(default_factory=list)
    excluded: dict = field(default_factory=dict)
    evaluations: int = 0
    held: Held | None = None
    score_s: float = 0.0


def decide(
    own: Weights,
    received: Mapping[str, Weights],
    t: int,
    assess: Callable[[dict], Assessment],
    rule: Rule,
    held: Held | None = None,
    known: dict | None = None,
) -> Decision:
    """A LIGHTYEAR site's decision in round ``t`` (module docstring). ``assess(weights)``: one forward pass over the
    own validation set; ``held``: what the site carries from earlier rounds (None: nothing yet); ``known``: id(model)
    -> assessment for models the caller keeps alive (read only: an id is only stable while its object lives)."""
    start = time.perf_counter()
    known = known or {}

    def assessed(model: dict) -> Assessment:
        return known[id(model)] if id(model) in known else assess(model)

    own_assessment = assessed(own)
    decision = Decision(
        weights=own,  # replaced below by the rule's result, which is always a new model
        own=own_assessment,
        adopted_assessment=own_assessment,
        step=rule.gamma**t,
    )
    for peer, weights in received.items():
        try:
            found = assessed(weights)
            decision.scores[peer] = agreement(own_assessment.summary, found.summary, rule.third_term)
            decision.skills[peer] = skill(found.summary)
            decision.assessed[peer] = found
        except Exception as exc:  # noqa: BLE001 - a model that breaks scoring is refused, not fatal
            decision.rejected[peer] = f"{type(exc).__name__}: {exc}"
    own_skill = skill(own_assessment.summary)
    decision.warming_up = rule.skill_floor > 0 and not own_skill >= rule.skill_floor
    if not decision.warming_up:
        scores = {p: s.score for p, s in decision.scores.items()}
        decision.selected = select_peers(scores, rule.tau, decision.skills, rule.skill_floor)
    decision.score_s = time.perf_counter() - start
    chosen = {p: received[p] for p in decision.selected}
    if rule.aggregation == PAPER:
        decision.weights = decayed_mean_update(own, list(chosen.values()), rule.gamma, t)
        decision.adopted = list(decision.selected)
        return decision
    order = sorted(chosen, key=lambda p: (-decision.scores[p].score, p))
    update = validated_update(
        own, own_assessment, chosen, decision.assessed, order, rule.gamma, t, assess, rule.bounds, held
    )
    decision.weights, decision.adopted = update.weights, update.adopted
    decision.excluded = update.excluded
    decision.evaluations, decision.adopted_assessment = update.evaluations, update.adopted_assessment
    decision.held = (held or Held()).after(own_assessment, update.adopted_assessment)
    return decision

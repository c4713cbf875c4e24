"""LIGHTYEAR's site: agreement-scored peer selection and round-decayed aggregation.

Each round the site scores every valid neighbour model against its own freshly trained model on
its own validation set (agreement score, Eqs. 12-16), keeps those with A_ij >= tau (Eq. 17) and
moves towards their mean with step gamma^t (Eq. 18, t = 0 at the first aggregation). With no
neighbour selected it keeps its own model.

``aggregation`` chooses how the step is taken: ``validated`` (the default) adopts only an
aggregate the site has validated itself, with the guarantee of
:mod:`lightyear.algorithms.p2p.validated_update`, and leaves out before averaging a selected peer
whose model computes the own model's function on the own validation set
(:func:`~lightyear.algorithms.p2p.agreement.same_function`): such a model adds nothing, and counted
in |S| it would shrink the step of every other selected peer. ``paper`` is Eq. 18 exactly, for reproducing the
paper (a model that predicts like an honest one but sits elsewhere in parameter space then wrecks
the average; ``docs/attacks.md``). ``align_units`` (off by default) first puts every selected
model's hidden units in the own model's order (:mod:`lightyear.algorithms.p2p.unit_alignment`): the
same function, averaged unit with matching unit.
"""

from __future__ import annotations

import math
import time

from lightyear.algorithms.attacks.detection import Labelling, filled, names
from lightyear.algorithms.model_check import model_problems
from lightyear.algorithms.p2p.agreement import (
    THIRD_TERMS,
    agreement,
    check_skill_floor,
    check_tau,
    same_function,
    select_peers,
    skill,
)
from lightyear.algorithms.p2p.decayed_update import check_gamma, decayed_mean_update
from lightyear.algorithms.p2p.validated_update import validated_update
from lightyear.algorithms.p2p.validation_bounds import (
    DEFAULT_DELTA,
    DEFAULT_MAX_LOSS_GROWTH,
    DEFAULT_MAX_NORM_GROWTH,
    DEFAULT_MAX_PEER_SHARE,
    DEFAULT_MIDPOINT_BARRIER,
    DEFAULT_MIDPOINT_LOSS_GROWTH,
    DEFAULT_MIDPOINT_NORM_GROWTH,
    DEFAULT_MIDPOINT_TEST,
    Bounds,
)
from lightyear.checks import boolean
from lightyear.flare.declarations import P2P, Detection, Method
from lightyear.p2p.site.adaptive_attack import PEER_ADAPTIVE
from lightyear.p2p.site.executor import Aggregation, P2PExecutor

PAPER, VALIDATED = "paper", "validated"
ATTACKER_COPY = "crafted-"
"""Names of the crafted copies in a predicted round (no site is named so)."""
OWN_FUNCTION = (
    "computes the own model's function on the own validation set (left out before averaging: it adds "
    "nothing, and counted in |S| it would shrink every other selected peer's step)"
)
"""The reason recorded for a selected peer whose model computes the own model's function (``same_function``)."""
AGGREGATIONS = (VALIDATED, PAPER)


class LightyearExecutor(P2PExecutor):
    def __init__(
        self,
        tau: float = 0.75,
        gamma: float = 0.95,
        third_term: str = "confidence",
        normalize_entropy: bool = True,
        skill_floor: float = 0.0,
        aggregation: str = VALIDATED,
        validation_delta: float = DEFAULT_DELTA,
        max_loss_growth: float = DEFAULT_MAX_LOSS_GROWTH,
        max_norm_growth: float = DEFAULT_MAX_NORM_GROWTH,
        max_peer_share: float = DEFAULT_MAX_PEER_SHARE,
        align_units: bool = False,
        midpoint_test: bool = DEFAULT_MIDPOINT_TEST,
        midpoint_loss_growth: float = DEFAULT_MIDPOINT_LOSS_GROWTH,
        midpoint_norm_growth: float = DEFAULT_MIDPOINT_NORM_GROWTH,
        midpoint_barrier: float = DEFAULT_MIDPOINT_BARRIER,
        **kwargs,
    ):
        """Args:
        tau: selection threshold in [0, 1] (0.75 classification, 0.6 segmentation in the paper).
        gamma: decay in (0, 1] of the aggregation step (0.95 in the paper; 1 = FedAvg over S).
        third_term: ``confidence`` (Eq. 15) or ``sharpness`` (the short paper's entropy term).
        normalize_entropy: divide the sharpness term's entropies by log K, keeping it in [0, 1].
        skill_floor: cold-start guard in [0, 1). A model takes part in an aggregation only if
            its accuracy on this site's validation set lies at least this far from chance
            towards perfect (:func:`~lightyear.algorithms.p2p.agreement.skill`): until the own model
            does, the site trains alone; a peer below it is never selected
            (:func:`~lightyear.algorithms.p2p.agreement.select_peers`). 0 = the paper's rule.
        aggregation: ``validated`` (adopt only an aggregate that passes this site's own validation,
            :mod:`~lightyear.algorithms.p2p.validated_update`) or ``paper`` (Eq. 18 as published).
        validation_delta, max_loss_growth, max_norm_growth, max_peer_share: the bounds of the
            ``validated`` aggregation (:class:`~lightyear.algorithms.p2p.validation_bounds.Bounds`):
            the largest drop of validation accuracy (Dice), relative growth of the validation loss
            and of an entry's norm, and weight of one received model in an aggregate.
        midpoint_test, midpoint_loss_growth, midpoint_norm_growth, midpoint_barrier: leave out before
            averaging a selected peer when the model halfway between the own model and its model has an
            entry whose L2 norm exceeds ``1 + midpoint_norm_growth`` times the own model's, or a
            validation loss above ``1 + midpoint_loss_growth`` times the larger of theirs or more than
            ``midpoint_barrier`` above their mean (the ``validated`` aggregation).
        align_units: align every selected model's hidden units to the own model's before averaging
            (:mod:`~lightyear.algorithms.p2p.unit_alignment`; the network's declared symmetries).
        Other arguments: see :class:`~lightyear.p2p.site.executor.P2PExecutor`.
        """
        self.tau = check_tau(tau)
        self.gamma = check_gamma(gamma)
        if third_term not in THIRD_TERMS:
            raise ValueError(f"third_term must be one of {THIRD_TERMS}, got {third_term!r}")
        self.third_term = third_term
        self.normalize_entropy = bool(normalize_entropy)
        self.skill_floor = check_skill_floor(skill_floor)
        if aggregation not in AGGREGATIONS:
            raise ValueError(
                f"aggregation must be one of {', '.join(AGGREGATIONS)} (validated: adopt only a validated "
                f"aggregate; paper: Eq. 18 as published), got {aggregation!r}"
            )
        self.aggregation = aggregation
        self.bounds = Bounds(
            delta=validation_delta,
            max_loss_growth=max_loss_growth,
            max_norm_growth=max_norm_growth,
            max_peer_share=max_peer_share,
            midpoint_test=midpoint_test,
            midpoint_loss_growth=midpoint_loss_growth,
            midpoint_norm_growth=midpoint_norm_growth,
            midpoint_barrier=midpoint_barrier,
        )
        self.align_units = boolean(
            "align_units", align_units, note="true aligns each selected model's units to the own model's"
        )
        self._symmetries: list | None = None
        super().__init__(**kwargs)

    def unit_aligner(self, own: dict):
        """A :class:`~lightyear.algorithms.p2p.unit_alignment.UnitAligner` to ``own``, with the network's
        symmetries (what it needs of ``own`` is taken once, for every model it then aligns)."""
        from lightyear.algorithms.p2p.unit_alignment import UnitAligner  # SciPy: only when aligning
        from lightyear.models import model_symmetries

        if self._symmetries is None:
            self._symmetries = model_symmetries(self.runtime.model_name, own, self.runtime.model_args)
        return UnitAligner(own, self._symmetries)

    def aligned(self, align, models: dict[str, dict]) -> tuple[dict[str, dict], dict[str, int]]:
        """(``models`` with their units aligned by ``align`` (:meth:`unit_aligner`), units each moved to
        another position); a model whose alignment fails or is not a valid model stays as it came (logged)."""
        own = align.own
        out, moved = {}, {}
        for peer, weights in models.items():
            try:
                candidate, moved[peer] = align(weights)
                problems = model_problems(candidate, own, None)
            except Exception as exc:  # noqa: BLE001 - a model alignment cannot handle is averaged as it came
                problems = [f"{type(exc).__name__}: {exc}"]
            if problems:
                self.logger.warning(f"could not align {peer}'s units ({'; '.join(problems)}): averaged as received")
                candidate, moved[peer] = weights, 0
            out[peer] = candidate
        return out, moved

    def aggregate(self, round_num: int, own: dict, received: dict[str, dict], inbox=None) -> Aggregation:
        start = time.perf_counter()
        own_summary, own_metrics = self.runtime.assess(normalize_entropy=self.normalize_entropy)
        scores, skills, rejected, copies, evaluations = {}, {}, {}, {}, {}
        for peer, weights in received.items():
            try:
                peer_summary, peer_metrics = self.runtime.assess(weights, normalize_entropy=self.normalize_entropy)
                evaluations[peer] = _performance_and_loss(peer_metrics)
                scores[peer] = agreement(own_summary, peer_summary, self.third_term)
                skills[peer] = skill(peer_summary)
                if self.copies_own(own_summary, peer_summary):
                    copies[peer] = OWN_FUNCTION
            except Exception as exc:  # noqa: BLE001 - a model that breaks scoring is refused, not fatal
                rejected[peer] = f"{type(exc).__name__}: {exc}"
        own_skill = skill(own_summary)
        warming_up = self.skill_floor > 0 and not own_skill >= self.skill_floor
        selected = (
            []
            if warming_up
            else select_peers({p: s.score for p, s in scores.items()}, self.tau, skills, self.skill_floor)
        )
        score_s = time.perf_counter() - start

        fields = {"selected": selected, "n_selected": len(selected), "step": self.gamma**round_num}
        fields.update({"own_skill": own_skill, "warming_up": int(warming_up), "aggregation": self.aggregation})
        copies = {p: copies[p] for p in selected if p in copies}  # a copy not selected is simply not selected
        chosen = {p: received[p] for p in selected if p not in copies}
        if self.align_units:
            chosen, moved = self.aligned(self.unit_aligner(own), chosen)
            fields.update({f"{peer}_realigned": moved.get(peer, "") for peer in self.neighbours})
        val_metrics = None
        if self.aggregation == PAPER:
            weights = decayed_mean_update(own, [chosen[p] for p in selected], self.gamma, t=round_num)
            fields["adopted"] = selected
        else:
            order = sorted(chosen, key=lambda p: (-scores[p].score, p))
            # id(candidate) -> its validation metrics, the last evaluated under that id: the adopted
            # candidate lives on in the result, so no later one shares its id, and its metrics are recorded
            measured = {}

            def validation(candidate: dict) -> tuple[float, float]:
                measured[id(candidate)] = self.runtime.evaluate("val", candidate)
                return _performance_and_loss(measured[id(candidate)])

            update = validated_update(
                own,
                chosen,
                order,
                self.gamma,
                round_num,
                validation,
                _performance_and_loss(own_metrics),
                self.bounds,
                evaluations,
            )
            weights = update.weights
            val_metrics = measured.get(id(weights)) if update.adopted else own_metrics
            fields.update(validation_fields(update, self.neighbours, copies))
            for peer, reason in {**copies, **update.excluded}.items():
                self.logger.warning(f"round {round_num}: excluded {peer}: {reason}")
        for peer in self.neighbours:
            s = scores.get(peer)
            fields[f"{peer}_score"] = s.score if s else ""
            fields[f"{peer}_perf"] = s.performance if s else ""
            fields[f"{peer}_ece"] = s.ece if s else ""
            fields[f"{peer}_{self.third_term}"] = s.third if s else ""
            fields[f"{peer}_skill"] = skills.get(peer, "")
        return Aggregation(weights=weights, fields=fields, score_s=score_s, rejected=rejected, val_metrics=val_metrics)

    def copies_own(self, own_summary, peer_summary) -> bool:
        """Whether the validated aggregation leaves the peer out before averaging: its model computes the
        own model's function (:func:`same_function`). The paper rule averages whatever it selects."""
        return self.aggregation == VALIDATED and same_function(own_summary, peer_summary)

    def _validation(self, weights: dict | None) -> tuple[float, float]:
        """(performance, loss) of ``weights`` (None: the site's current model) on the own validation set."""
        return _performance_and_loss(self.runtime.evaluate("val", weights))

    def predicted_outcome(self, round_num: int, receiver: dict, others: dict[str, dict], copies: int):
        """A receiver's round as an adaptive attacker on this rule predicts it (``docs/attacks-p2p.md``).

        ``receiver``: the receiver's model (or the attacker's stand-in for it); ``others``: the other
        models it receives; ``copies``: how many attackers send it the crafted model. Returns
        ``predict(crafted) -> (accepted, adopted)``: whether the receiver's selection (Eq. 17, with
        the skill floor) and, with the validated aggregation, its validation keep the crafted model,
        and the model it would adopt, everything measured on this site's validation set. The
        receiver is taken to be past its warm-up (it trained on its own data), and a model as
        skilled here as the receiver's own to pass the skill floor. Scoring
        ``receiver`` and ``others`` costs one forward pass each, now; every ``predict`` one more, and
        with the validated aggregation the crafted model's midpoint (the others' on the first call only)
        and up to ``2 |S| + 2`` aggregates.
        """
        reference, receiver_metrics = self.runtime.assess(receiver, normalize_entropy=self.normalize_entropy)
        # the receiver is past its warm-up on its own data, and a model as skilled as its own passes the floor there
        floor = min(self.skill_floor, skill(reference)) if self.skill_floor > 0 else 0.0

        def chosen(summary) -> tuple[bool, float]:
            score = agreement(reference, summary, self.third_term).score
            return bool(math.isfinite(score) and score >= self.tau and (floor <= 0 or skill(summary) >= floor)), score

        scores, kept, evaluations = {}, {}, {}
        for peer, weights in others.items():
            summary, found = self.runtime.assess(weights, normalize_entropy=self.normalize_entropy)
            evaluations[peer] = _performance_and_loss(found)
            keep, scores[peer] = chosen(summary)
            if keep and not self.copies_own(reference, summary):
                kept[peer] = weights
        align = self.unit_aligner(receiver) if self.align_units else None
        if align is not None:
            kept = self.aligned(align, kept)[0]
        own = _performance_and_loss(receiver_metrics) if self.aggregation == VALIDATED else None
        names = [f"{ATTACKER_COPY}{i}" for i in range(max(1, copies))]
        halfway = {}  # the kept models' midpoints with the receiver's: the same for every crafted model

        def predict(crafted: dict) -> tuple[bool, dict]:
            summary, found = self.runtime.assess(crafted, normalize_entropy=self.normalize_entropy)
            keep, score = chosen(summary)
            keep = keep and not self.copies_own(reference, summary)  # selected, but not averaged
            if align is not None and keep:
                crafted = self.aligned(align, {names[0]: crafted})[0][names[0]]
            selected = {**kept, **({n: crafted for n in names} if keep else {})}
            if self.aggregation == PAPER:
                return keep, decayed_mean_update(receiver, list(selected.values()), self.gamma, t=round_num)
            ranked = {**scores, **{n: score for n in names}}
            order = sorted(selected, key=lambda p: (-ranked[p], p))
            crafted_evaluation = {n: _performance_and_loss(found) for n in names}
            update = validated_update(
                receiver,
                selected,
                order,
                self.gamma,
                round_num,
                self._validation,
                own,
                self.bounds,
                {**evaluations, **crafted_evaluation},
                halfway,
            )
            halfway.update({p: midpoint for p, midpoint in update.midpoints.items() if p in kept})
            return any(n in update.adopted for n in names), update.weights

        return predict


def _performance_and_loss(found: dict) -> tuple[float, float]:
    """(Dice or accuracy, loss) of an evaluation's metrics."""
    return found["dice" if "dice" in found else "acc"], found["loss"]


def validation_fields(update, neighbours, left_out: dict | None = None) -> dict:
    """The record fields of a validated aggregation: what was adopted, what was excluded (before
    averaging, ``left_out``: peer -> reason, or after it), with each peer's reason in
    ``<peer>_excluded``, the loss barrier halfway to each peer in ``<peer>_barrier`` (empty where it was
    not measured), the own and adopted validation performance and loss, and the forward passes spent."""
    excluded = {**(left_out or {}), **update.excluded}
    fields = {"adopted": update.adopted, "excluded": sorted(excluded), "validation_evals": update.evaluations}
    fields.update({"own_val_perf": update.own[0], "own_val_loss": update.own[1]})
    fields.update({"adopted_val_perf": update.adopted_evaluation[0], "adopted_val_loss": update.adopted_evaluation[1]})
    fields.update({f"{peer}_excluded": excluded.get(peer, "") for peer in neighbours})
    fields.update({f"{peer}_barrier": update.barriers.get(peer, "") for peer in neighbours})
    return fields


def lightyear_labels(row: dict, peers) -> Labelling:
    """LIGHTYEAR's detections: a scored peer not selected (A_ij < tau, or below the skill floor), a
    selected peer excluded before or after averaging (the validated aggregation: not in ``adopted``), or a
    rejected one. In a warm-up round (own model below the skill floor) no peer is judged: only
    rejections count."""
    rejected = names(row.get("rejected"))
    if str(row.get("warming_up", "0")) in ("1", "True"):
        return Labelling(rejected, rejected)
    evaluated = filled(row, peers, "_score") | rejected
    kept = names(row["adopted"]) if "adopted" in row else names(row["selected"])
    return Labelling(evaluated, evaluated - kept)


SITE = "lightyear.p2p.methods.lightyear.LightyearExecutor"
SITE_ARGS = {"tau": "tau", "gamma": "gamma", "third_term": "third_term", "skill_floor": "skill_floor"}
SETTINGS = {"defaults": {"skill_floor": 0.5}, "tasks": {"segmentation": {"tau": 0.6, "skill_floor": 0.0}}}
"""LIGHTYEAR's settings: the cold-start guard on classification (docs/jobs-and-settings.md), the
paper's tau of 0.6 and no guard on segmentation."""

METHOD = Method(
    "lightyear",
    P2P,
    "agreement-scored selection (Eqs. 12-17), round-decayed aggregation (Eq. 18) that adopts only an "
    "aggregate the site validated on its own data",
    site=SITE,
    site_args=SITE_ARGS,
    **SETTINGS,
    detection=Detection(
        lightyear_labels,
        ("round", "selected", "rejected"),
        "_score",
        "not selected (agreement score < tau or below the skill floor), excluded before or after averaging, "
        "or rejected",
    ),
    adaptive=PEER_ADAPTIVE,
    featured=True,
)

PAPER_METHOD = Method(
    "lightyear_paper",
    P2P,
    "the same selection and Eq. 18 exactly as published, for reproducing the paper",
    site=SITE,
    site_args=SITE_ARGS,
    fixed={"aggregation": PAPER},
    **SETTINGS,
    detection=Detection(
        lightyear_labels,
        ("round", "selected", "rejected"),
        "_score",
        "not selected (agreement score < tau or below the skill floor) or rejected",
    ),
    adaptive=PEER_ADAPTIVE,
)

LOCAL_METHOD = Method(
    "local",
    P2P,
    "every site trains alone: the bar any collaboration must clear",
    site=SITE,
    site_args={"tau": "tau", "gamma": "gamma", "third_term": "third_term"},
    controller_fixed={"topology": "none"},
    omit=("sample_neighbours", "ready_timeout", "topology_args", "start_timeout", "secure_messages"),
)
"""Local training: LIGHTYEAR's site with no neighbour (the topology ``none``)."""

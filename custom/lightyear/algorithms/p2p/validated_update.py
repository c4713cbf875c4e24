"""LIGHTYEAR's validated aggregation: adopt only what the site has validated itself (pure, no FLARE).

The agreement score (Eqs. 12-17 of "Don't Reach for the Stars") judges what a peer's model predicts, Eq. 18
averages its parameters, and the average of two models computing one function can be much worse
(``lightyear.algorithms.attacks.reparametrise``). So the site tests what it adopts with one paired test
(:mod:`~lightyear.algorithms.p2p.validation_bounds`): refused if significantly worse at the level ``confidence``.

**Guarantee**, in what the site measures. Every model it adopts in a round

1. gives finite outputs, and per-sample validation cross-entropy and error not significantly above the model the
   round started from (the one adopted the round before; in the first round, the model held before training), so a
   round never leaves the site measurably worse than it began (against the freshly trained model, averaging with
   honest peers of other distributions would fail: a model just fitted to the own data is hard to beat on it);
2. has a mean validation loss no higher than the freshly trained model's, or is not significantly more than
   ``drift_budget`` above the lowest-loss model the site has held (its anchor): peers cannot move the site further
   from its best than the budget, summed over rounds, unless its own training took it there;
3. has no floating entry whose L2 norm exceeds ``1 + max_norm_growth`` times the own model's;
4. gives no received model a weight above ``max_peer_share``: a peer's difference enters with
   ``gamma^t * min(1/|S|, max_peer_share)``;
5. holds a selected peer's difference only if that model does not compute the own model's function
   (:func:`~lightyear.algorithms.p2p.agreement.same_function`) and the model halfway to it meets the norm bound of
   3.; such peers are left out before averaging, not counted in ``|S|``, at no forward pass.

When no candidate passes the site keeps its freshly trained model: points 2-5 hold, point 1 need not (it bounds
what peers bring, not what the site's own training did). With every peer passing, the result is exactly Eq. 18
(for ``|S| >= 1 / max_peer_share``).

Procedure: the Eq. 18 aggregate of ``S`` is tested and adopted if it passes (one pass). Otherwise each peer's
contribution is tested alone; the aggregate of those that passed (weights ``gamma^t * min(1/|K|, max_peer_share)``)
is tested, or, when all passed alone, the aggregate of all with half the step; failing that, the contribution with
the lowest validation loss is adopted alone. At most ``|S| + 2`` forward passes; memory a few model sizes
(:class:`~lightyear.algorithms.p2p.flat_models.FlatModels`). Not bounded: harm the validation set does not show,
and what later training does with an adopted model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lightyear.algorithms.aggregation import Weights
from lightyear.algorithms.p2p.agreement import same_function
from lightyear.algorithms.p2p.flat_models import FlatModels
from lightyear.algorithms.p2p.validation_bounds import DEFAULT_BOUNDS, Assessment, Bounds, Held

MIDPOINT = 0.5
"""Where on the line from the own model to a peer's the norms are measured before averaging: halfway."""
HALF = 0.5
"""The shorter step tried towards the selected peers' mean when each passed alone and all together did not."""
OWN_FUNCTION = "computes the own model's function on the own validation set (left out before averaging)"


@dataclass(frozen=True)
class Candidate:
    """One tested aggregate: its peers, their weight each, the largest growth of an entry's norm, its assessment (None:
    refused on its norms, no pass spent) and why it failed (``""``: it passed)."""

    peers: tuple
    weight: float
    growth: float
    assessment: Assessment | None = None
    fault: str = ""

    @property
    def passed(self) -> bool:
        return self.assessment is not None and not self.fault


@dataclass
class ValidatedUpdate:
    """What :func:`validated_update` adopted and why: the new weights, the peers in them, those left out (peer ->
    reason), every candidate tested in order, the own and adopted assessments, and the forward passes spent."""

    weights: dict
    own: Assessment
    adopted_assessment: Assessment
    adopted: list = field(default_factory=list)
    excluded: dict = field(default_factory=dict)
    candidates: list = field(default_factory=list)
    evaluations: int = 0


def validated_update(
    own: Weights,
    own_assessment: Assessment,
    selected: Mapping[str, Weights],
    assessed: Mapping[str, Assessment],
    order: Sequence[str],
    gamma: float,
    t: int,
    assess: Callable[[dict], Assessment],
    bounds: Bounds = DEFAULT_BOUNDS,
    held: Held | None = None,
) -> ValidatedUpdate:
    """The validated Eq. 18 (module docstring): the aggregate of ``selected`` the site validated. ``assessed``: every
    selected peer's :class:`Assessment`; ``order``: the selected peers, each once, in tie-breaking order;
    ``assess(weights)`` evaluates a candidate; ``held``: the round's start and anchor (None: neither known)."""
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
        raise ValueError(f"round index t must be an integer >= 0, got {t!r}")
    if len(set(order)) != len(order) or sorted(order) != sorted(selected) or not set(order) <= set(assessed):
        raise ValueError(
            f"order must list every selected and assessed peer once: got {list(order)} for {sorted(selected)}"
        )
    weights = {k: np.array(v, copy=True) for k, v in own.items()}
    result = ValidatedUpdate(weights=weights, own=own_assessment, adopted_assessment=own_assessment)
    flat = FlatModels(own, selected)
    screened = []
    for peer in order:
        if same_function(own_assessment.summary, assessed[peer].summary):
            result.excluded[peer] = OWN_FUNCTION
        else:
            screened.append(peer)
    total, growths = flat.summed_with_growths(screened, MIDPOINT)  # one difference a peer for both
    remaining = []
    for peer in screened:
        if growths[peer] > bounds.max_norm_growth:
            result.excluded[peer] = (
                f"the model halfway to it grew an entry's norm by {growths[peer]:.3g} (more than max_norm_growth "
                f"{bounds.max_norm_growth:g}; left out before averaging)"
            )
        else:
            remaining.append(peer)
    if not remaining:
        return result

    def test(
        peers: Sequence[str], weight: float, vector: np.ndarray | None = None
    ) -> tuple[np.ndarray | None, Candidate]:
        """(the candidate's vector if it passed, else None; the candidate): a vector that failed is dropped at once,
        so at most the one under test and one that passed are held."""
        vector = flat.aggregate(peers, weight) if vector is None else vector
        growth = flat.growth(vector)
        if growth > bounds.max_norm_growth:
            candidate = Candidate(tuple(peers), weight, growth, fault="norm")
        else:
            found = assess(flat.model(vector))
            result.evaluations += 1
            candidate = Candidate(tuple(peers), weight, growth, found, bounds.fault(found, own_assessment, held))
        result.candidates.append(candidate)
        return (vector if candidate.passed else None), candidate

    weight = peer_weight(gamma, int(t), len(remaining), bounds.max_peer_share)
    if remaining != screened:  # the midpoint left a peer out: the whole aggregate is summed again without it
        total = None
    vector, whole = test(remaining, weight, None if total is None else flat.around(total, weight))
    total = None  # a whole aggregate that failed is not held through the fallback
    if whole.passed:
        return _adopt(result, flat.model(vector), whole)
    solo = {remaining[0]: whole} if len(remaining) == 1 else {p: test([p], weight)[1] for p in remaining}
    kept = [p for p in remaining if solo[p].passed]
    for peer in remaining:
        if peer not in kept:
            result.excluded[peer] = _reason(solo[peer], own_assessment, bounds)
    if not kept:
        return result
    renormalised = peer_weight(gamma, int(t), len(kept), bounds.max_peer_share)
    together = None
    if len(kept) < len(remaining) and (len(kept) > 1 or renormalised > weight):
        together = test(kept, renormalised)  # the peers that passed alone, with the step Eq. 18 gives them
    elif len(kept) > 1:  # each passed alone, all together not: half the step towards the same mean
        together = test(kept, HALF * weight)
    if together is not None and together[1].passed:
        return _adopt(result, flat.model(together[0]), together[1])
    best = min(kept, key=lambda p: (_loss_rank(solo[p]), p))
    for peer in kept:
        if peer != best:
            result.excluded[peer] = (
                "passed alone, but not in one aggregate with the other peers that did; "
                f"{best}, whose contribution alone had the lowest validation loss, was adopted alone"
            )
    # rebuilt rather than held since its test: the same vector, so no solo candidate is kept in memory
    return _adopt(result, flat.model(flat.aggregate([best], weight)), solo[best])


def peer_weight(gamma: float, t: int, n_peers: int, max_peer_share: float) -> float:
    """gamma^t * min(1/n, max_peer_share): one peer's weight among ``n_peers`` (Eq. 18's gamma^t / |S|, capped)."""
    return gamma**t * min(1.0 / n_peers, max_peer_share)


def _loss_rank(candidate: Candidate) -> float:
    """A candidate's validation loss as a sort key: refused on its norms or not finite sorts last."""
    found = candidate.assessment
    return found.loss if found is not None and math.isfinite(found.loss) else math.inf


def _reason(candidate: Candidate, own: Assessment, bounds: Bounds) -> str:
    if candidate.assessment is None:
        return (
            f"the aggregate with it grew an entry's norm by {candidate.growth:.3g} "
            f"(more than max_norm_growth {bounds.max_norm_growth:g})"
        )
    found = candidate.assessment
    what = {
        "not finite": "gave non-finite outputs",
        "loss": "had a per-sample validation loss significantly above the model the round started from",
        "error": "had per-sample validation errors significantly above the model the round started from",
        "drift": f"was more than drift_budget {bounds.drift_budget:g} above the anchor's validation loss",
    }[candidate.fault]
    return (
        f"the aggregate with it {what} at confidence {bounds.confidence:g}: it scored {found.performance:.4g} "
        f"(loss {found.loss:.4g}) against the own model's {own.performance:.4g} (loss {own.loss:.4g})"
    )


def _adopt(result: ValidatedUpdate, weights: dict, candidate: Candidate) -> ValidatedUpdate:
    result.weights = weights
    result.adopted = list(candidate.peers)
    result.adopted_assessment = candidate.assessment
    return result

"""LIGHTYEAR's hardened aggregation: adopt only an aggregate the site has validated itself (pure, no FLARE).

The agreement score (Eqs. 12-17 of "Don't Reach for the Stars") judges what a peer's model
*predicts*; Eq. 18 averages its *parameters*. Many parameter vectors compute the same function
(positive rescaling and permutation of hidden units, ``lightyear.algorithms.attacks.reparametrise``),
and the average of two of them can be a much worse function than either, or one that predicts as
well but trains badly (every unit scaled up). So this rule tests what it actually adopts.

**Guarantee**, in what the site itself measures. Every model the site adopts in a round

1. scores at least ``own performance - delta`` on the site's own validation set (accuracy, or Dice
   for segmentation) and has a validation loss of at most ``(1 + max_loss_growth) * own loss +
   LOSS_SLACK``, the own model being the site's freshly trained model of the round; a candidate
   whose outputs are not finite is never adopted;
2. has no floating entry whose L2 norm exceeds ``1 + max_norm_growth`` times the own model's (an
   entry that is all zero in the own model has no scale and is not compared);
3. holds at least ``1 - max_peer_share`` of the own model: each peer's difference enters with the
   weight ``gamma^t * min(1/|S|, max_peer_share)``, so no received model is ever adopted as it is
   (a model that passes the agreement test only because it computes an honest model's function is
   tested by what its mixture with the own model does);
4. holds a selected peer's difference only if the model halfway between the own model and the
   peer's (``midpoint_test``) has no floating entry whose L2 norm exceeds ``1 +
   midpoint_norm_growth`` times the own model's, and gives finite outputs and a validation loss of
   at most ``(1 + midpoint_loss_growth)`` times the larger of the two models' losses plus
   ``LOSS_SLACK``, and at most ``midpoint_barrier`` above their mean (the loss barrier,
   :func:`~lightyear.algorithms.p2p.validation_bounds.barrier`): models trained from a common start
   lie on a path whose loss stays near its ends'; a copy moved elsewhere in parameter space (units
   permuted) predicts like its model, yet halfway the two predict worse than either, and a copy
   whose units were rescaled is far larger.
   Such a peer is left out before averaging, not counted in ``|S|`` (the norms cost no pass).

When no candidate passes, the site keeps its own model, which meets 1-4 by definition. With all
peers passing, the adopted model is exactly Eq. 18 (for ``|S| >= 1 / max_peer_share``).

The site hands this rule its selected peers (Eq. 17) less those whose model computes its own
function on its validation set (:func:`lightyear.algorithms.p2p.agreement.same_function`): they add
nothing, and counted in ``|S|`` they would shrink every other peer's weight.

Procedure, with ``S`` the peers handed to it less those whose midpoint failed:

* the Eq. 18 aggregate of ``S`` (weights capped as in 3.) is tested; if it passes it is adopted:
  one extra forward pass over the validation set, the common case;
* otherwise every peer's contribution is tested alone (the own model plus its weighted
  difference), and the peers are added one at a time, those that passed alone first, by the
  validation loss their contribution gave, each kept only if the aggregate of those kept so far and
  it still passes (each peer with the weight it has in the aggregate of ``S``); a peer whose
  addition fails is excluded after averaging, with the measured reason. A model that adds nothing
  but harm (a reparametrised copy of the own model) thus comes after the peers that help, instead
  of using up the bounds before them;
* if some but not all peers were kept, the Eq. 18 aggregate over the kept peers alone (weights
  ``gamma^t * min(1/|K|, max_peer_share)``) is tried too and adopted if it passes, so that a
  benign minority among attackers still gets its full step.

Cost: one forward pass over the own validation set per selected peer (its midpoint), then one per
round when the aggregate of ``S`` passes, at most ``2 |S| + 2`` when it does not (midpoints and
candidates refused on their norms cost none).

Not bounded: harm the validation set does not show (a small validation set measures coarsely),
and what later local training does with an adopted model (it starts from a model that passed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lightyear.algorithms.aggregation import Weights, is_float
from lightyear.algorithms.p2p.decayed_update import check_gamma
from lightyear.algorithms.p2p.validation_bounds import (
    DEFAULT_BOUNDS,
    MIDPOINT,
    Bounds,
    Evaluation,
    barrier,
)


def norm_growth(own: Weights, candidate: Weights) -> float:
    """The largest ||candidate[k]|| / ||own[k]|| - 1 over the floating entries that are not all zero in
    ``own`` (an entry the own model never moved from zero has no scale to compare with); 0 when no
    entry grew."""
    worst = 0.0
    for key, mine in own.items():
        if not is_float(mine):
            continue
        base = float(np.linalg.norm(np.asarray(mine, dtype=np.float64)))
        if base > 0.0:
            worst = max(worst, float(np.linalg.norm(np.asarray(candidate[key], dtype=np.float64))) / base - 1.0)
    return worst


def peer_weight(gamma: float, t: int, n_peers: int, max_peer_share: float) -> float:
    """gamma^t * min(1/n, max_peer_share): one peer's weight in an aggregate over ``n_peers`` peers
    (Eq. 18's gamma^t / |S|, capped)."""
    return gamma**t * min(1.0 / n_peers, max_peer_share)


class _Steps:
    """Candidates theta + weight * sum_j (theta_j - theta) (Eq. 18 with a given per-peer weight) on flat
    vectors of the floating entries, in the own model's float type: each peer's difference is taken
    once, and a candidate costs one pass over the parameters. Integer entries keep the own value."""

    def __init__(self, own: Weights, models: Mapping[str, Weights]):
        self.own, self.models = own, models
        self.keys = [k for k, v in own.items() if is_float(v)]
        self.dtype = np.result_type(*[np.asarray(own[k]).dtype for k in self.keys]) if self.keys else np.float64
        self.base = self.flat(own)
        sizes = [np.asarray(own[k]).size for k in self.keys]
        self.starts = np.cumsum([0] + sizes[:-1]).astype(np.int64)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.own_norms = self.norms(self.base)
        self._diffs: dict[str, np.ndarray] = {}

    def flat(self, model: Weights) -> np.ndarray:
        if not self.keys:
            return np.zeros(0, dtype=self.dtype)
        return np.concatenate([np.asarray(model[k], dtype=self.dtype).ravel() for k in self.keys])

    def norms(self, vector: np.ndarray) -> np.ndarray:
        """The L2 norm of every entry's segment of ``vector``."""
        if not self.keys:
            return np.zeros(0)
        squares = np.square(vector, dtype=np.float64)
        filled = self.sizes > 0  # reduceat would sum an empty entry as the next value alone, or fail at the end
        sums = np.zeros(len(self.keys))
        if filled.any():
            sums[filled] = np.add.reduceat(squares, self.starts[filled])
        return np.sqrt(sums)

    def diff(self, peer: str) -> np.ndarray:
        if peer not in self._diffs:
            self._diffs[peer] = self.flat(self.models[peer]) - self.base
        return self._diffs[peer]

    def zero(self) -> np.ndarray:
        return np.zeros_like(self.base)

    def plus(self, total: np.ndarray, peer: str) -> np.ndarray:
        """``total`` + (theta_peer - theta), as a new running sum."""
        return total + self.diff(peer)

    def growth(self, vector: np.ndarray) -> float:
        """:func:`norm_growth` of the candidate ``vector`` (flat), from the own norms taken once."""
        mine = self.own_norms > 0.0
        if not mine.any():
            return 0.0
        return max(0.0, float(np.max(self.norms(vector)[mine] / self.own_norms[mine])) - 1.0)

    def model(self, vector: np.ndarray) -> dict[str, np.ndarray]:
        """The candidate as a model: views of ``vector`` in the own entries' shapes and dtypes."""
        out = {}
        for key, start, size in zip(self.keys, self.starts, self.sizes):
            mine = np.asarray(self.own[key])
            out[key] = vector[start : start + size].reshape(mine.shape).astype(mine.dtype, copy=False)
        return {k: out[k] if k in out else np.array(v, copy=True) for k, v in self.own.items()}


@dataclass(frozen=True)
class Candidate:
    """One tested aggregate: the peers in it, their weight each, the largest growth of an entry's
    norm, and, when it was evaluated, its validation performance and loss; whether it passed; whether its
    evaluation was that of the same model tested before (no pass spent)."""

    peers: tuple
    weight: float
    growth: float
    performance: float = float("nan")
    loss: float = float("nan")
    passed: bool = False
    evaluated: bool = False
    reused: bool = False


@dataclass
class ValidatedUpdate:
    """What :func:`validated_update` adopted and why: the new weights, the peers whose difference is
    in them, the peers excluded at their midpoint or after averaging (peer -> reason), every candidate
    tested in order,
    the own and adopted models' validation performance and loss, the midpoints it evaluated
    (peer -> validation performance and loss of the model halfway to it), and the loss barrier it
    judged halfway to each peer whose midpoint's norms passed (peer -> the barrier, evaluated or not)."""

    weights: dict
    own: Evaluation
    adopted: list = field(default_factory=list)
    excluded: dict = field(default_factory=dict)
    candidates: list = field(default_factory=list)
    adopted_evaluation: Evaluation = (float("nan"), float("nan"))
    midpoints: dict = field(default_factory=dict)
    barriers: dict = field(default_factory=dict)

    @property
    def evaluations(self) -> int:
        """Forward passes over the validation set spent: one a midpoint, one an aggregate (midpoints and
        candidates refused on their norms cost none, nor does a model evaluated before)."""
        return len(self.midpoints) + sum(1 for c in self.candidates if c.evaluated and not c.reused)


def validated_update(
    own: Weights,
    selected: Mapping[str, Weights],
    order: Sequence[str],
    gamma: float,
    t: int,
    evaluate: Callable[[dict], Evaluation],
    own_evaluation: Evaluation,
    bounds: Bounds = DEFAULT_BOUNDS,
    peer_evaluations: Mapping[str, Evaluation] | None = None,
    known_midpoints: Mapping[str, Evaluation] | None = None,
) -> ValidatedUpdate:
    """The hardened Eq. 18 (module docstring): the aggregate of ``selected`` the site validated.

    ``order``: the selected peers (every key of ``selected`` exactly once), in the order that breaks
    ties between equal validation losses when the whole aggregate fails;
    ``evaluate(weights) -> (performance, loss)`` on the own validation set; ``own_evaluation``: the
    own model's; ``peer_evaluations``: every selected peer's model's, needed by the midpoint test;
    ``known_midpoints``: peer -> the evaluation of its midpoint with this own model, measured before
    (taken as measured, not evaluated again).
    """
    check_gamma(gamma)
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
        raise ValueError(f"round index t must be an integer >= 0, got {t!r}")
    if len(set(order)) != len(order) or sorted(order) != sorted(selected):
        raise ValueError(f"order must list every selected peer once: got {list(order)} for {sorted(selected)}")
    if bounds.midpoint_test and not set(selected) <= set(peer_evaluations or {}):
        raise ValueError("the midpoint test needs peer_evaluations: every selected peer's (performance, loss)")
    own_performance, own_loss = (float(v) for v in own_evaluation)
    result = ValidatedUpdate(
        weights={k: np.array(v, copy=True) for k, v in own.items()}, own=(own_performance, own_loss)
    )
    result.adopted_evaluation = result.own
    if not selected:
        return result

    steps = _Steps(own, selected)
    # (peers, weight) -> (the model own + weight * (their differences summed in that order), its evaluation):
    # the same model arises more than once (one peer: the whole aggregate is its contribution alone; at
    # round 0 a peer's share of 1/2 is its midpoint), and is evaluated once, as one object
    measured: dict[tuple, tuple[dict, Evaluation]] = {}
    if bounds.midpoint_test:
        by_model = {}
        for peer in order:
            halfway = steps.base + MIDPOINT * steps.diff(peer)
            grown = steps.growth(halfway)
            if grown > bounds.midpoint_norm_growth:
                result.excluded[peer] = _outgrown(grown, bounds)
                continue
            if known_midpoints and peer in known_midpoints:
                found = tuple(float(v) for v in known_midpoints[peer])
            elif id(selected[peer]) in by_model:  # one model under several names is evaluated once
                found = by_model[id(selected[peer])]
            else:
                midpoint = steps.model(halfway)
                found = tuple(float(v) for v in evaluate(midpoint))
                result.midpoints[peer] = by_model[id(selected[peer])] = found
                measured[((peer,), MIDPOINT)] = (midpoint, found)
            rise = result.barriers[peer] = barrier(found[1], own_loss, float(peer_evaluations[peer][1]))
            fault = bounds.halfway_fault(found, result.own, peer_evaluations[peer])
            if fault:
                result.excluded[peer] = _barrier(found, result.own, peer_evaluations[peer], fault, rise, bounds)
        order = [p for p in order if p not in result.excluded]
        if not order:
            return result

    def test(peers: Sequence[str], total: np.ndarray, weight: float) -> tuple[dict, Candidate]:
        vector = steps.base + weight * total
        weights = steps.model(vector)
        growth = steps.growth(vector)
        if growth > bounds.max_norm_growth:
            candidate = Candidate(tuple(peers), weight, growth)
        else:
            key = (tuple(peers), weight)
            reused = key in measured
            if not reused:
                measured[key] = (weights, tuple(float(v) for v in evaluate(weights)))
            weights, (performance, loss) = measured[key]
            passed = bounds.passes((performance, loss), own_performance, own_loss)
            candidate = Candidate(
                tuple(peers), weight, growth, performance, loss, passed, evaluated=True, reused=reused
            )
        result.candidates.append(candidate)
        return weights, candidate

    weight = peer_weight(gamma, int(t), len(order), bounds.max_peer_share)
    total = steps.zero()
    for peer in order:
        total += steps.diff(peer)
    weights, whole = test(list(order), total, weight)
    if whole.passed:
        return _adopt(result, weights, whole)
    solo, alone = {}, {}
    for peer in order:  # each peer's contribution alone, with the weight it has in the whole aggregate
        alone[peer] = steps.diff(peer)
        solo[peer] = test([peer], alone[peer], weight)
    order = sorted(order, key=lambda p: (not solo[p][1].passed, _loss_rank(solo[p][1])))
    kept: list[str] = []
    kept_total = steps.zero()
    for peer in order:
        trial_total = steps.plus(kept_total, peer) if kept else alone[peer]
        trial, candidate = test(kept + [peer], trial_total, weight) if kept else solo[peer]
        if candidate.passed:
            kept.append(peer)
            kept_total = trial_total
            _adopt(result, trial, candidate)
        else:
            result.excluded[peer] = _reason(candidate, result.own, bounds)
    renormalised = peer_weight(gamma, int(t), len(kept), bounds.max_peer_share) if kept else weight
    if renormalised > weight:
        trial, candidate = test(kept, kept_total, renormalised)
        if candidate.passed:
            _adopt(result, trial, candidate)
    return result


def _loss_rank(candidate: Candidate) -> float:
    """A candidate's validation loss as a sort key: not evaluated or not finite sorts last (NaN
    compares false with everything, and would leave the order as it came)."""
    return candidate.loss if candidate.evaluated and math.isfinite(candidate.loss) else math.inf


def _reason(candidate: Candidate, own: Evaluation, bounds: Bounds) -> str:
    if not candidate.evaluated:
        return (
            f"the aggregate with it grew an entry's norm by {candidate.growth:.3g} "
            f"(more than max_norm_growth {bounds.max_norm_growth:g})"
        )
    return (
        f"the aggregate with it scored {candidate.performance:.4g} (loss {candidate.loss:.4g}) "
        "on the own validation set "
        f"against the own model's {own[0]:.4g} (loss {own[1]:.4g}): beyond validation_delta {bounds.delta:g} "
        f"or max_loss_growth {bounds.max_loss_growth:g}"
    )


def _barrier(found: Evaluation, own: Evaluation, peer: Evaluation, fault: str, rise: float, bounds: Bounds) -> str:
    measured = (
        f"the model halfway to it scored {found[0]:.4g} (loss {found[1]:.4g}) on the own validation set, against "
        f"{own[0]:.4g} (loss {own[1]:.4g}) for the own model and {peer[0]:.4g} (loss {peer[1]:.4g}) for it: "
    )
    if fault == "loss":
        why = (
            f"a loss above 1 + midpoint_loss_growth ({1 + bounds.midpoint_loss_growth:g}) times the larger of "
            "the two, or not finite"
        )
    else:
        why = f"a loss {rise:.3g} above the mean of the two (more than midpoint_barrier {bounds.midpoint_barrier:g})"
    return measured + why + " (left out before averaging)"


def _outgrown(growth: float, bounds: Bounds) -> str:
    return (
        f"the model halfway to it grew an entry's norm by {growth:.3g} over the own model's (more than "
        f"midpoint_norm_growth {bounds.midpoint_norm_growth:g}; left out before averaging)"
    )


def _adopt(result: ValidatedUpdate, weights: dict, candidate: Candidate) -> ValidatedUpdate:
    result.weights = weights
    result.adopted = list(candidate.peers)
    result.adopted_evaluation = (candidate.performance, candidate.loss)
    return result

"""FedCAP server rules (Li et al., "FedCAP: Robust Federated Learning via Customized Aggregation
and Personalization", the project's paper 002, Section V and Algorithm 1), pure NumPy.

Models are flat vectors here (:func:`~lightyear.algorithms.vectors.flatten`); turn a customised
vector back into a model with ``unflatten(vector, template)`` (integer counters come from the
template). One round t, on the server:

1. :func:`fedcap_customize` (Sec. V-A, Alg. 1 lines 5-10). Round 0, or an empty pool: every site
   gets the global model. Otherwise site k gets w^_k = sum_i p'_ki w~_i over the recovered model
   pool (Eq. 3), with p_ki = cos(d~_k, d~_i) over the calibrated update pool (Eq. 4),
   p'_ki = (1 - phi) * softmax_i(alpha * p_ki) over the others, and p'_kk = phi (Eq. 5 and the
   text after it). The global model is then updated from the pool, w^t = sum_i |D_i| w~_i /
   sum_i |D_i| (Eq. 6): the reference for this round's calibration.
2. The sites train (below) and return w_k^t, or d_k^t = w_k^t - w^_k^t, which the star
   controller turns into w~_k = w^_k + d_k by adding the model it sent (Sec. V-C, Recovery;
   :class:`lightyear.star.controller.StarController`).
3. :func:`fedcap_calibrate_and_detect` (Sec. V-C, Alg. 1 lines 18-19): d~_k = w~_k - w^t
   (Calibration); a site whose ||d~_k||_2 exceeds T_norm is removed **permanently**
   (Detection); the kept sites' w~ and d~ become the pools for round t + 1.

Defaults. The paper grid-searches alpha in {2, 5, 10}, phi in {0.1, 0.2, 0.3} and lambda in
{0.1, 0.5, 1} (Sec. VI-A) and names no single default; it fixes T_norm = 10 in every attack
scenario (Sec. VI-A). Here alpha = 10 (Sec. V-A: a large alpha is suggested under attack;
Sec. VI-D1: larger alpha helps under label skew), phi = 0.1 (Sec. VI-D2: accuracy falls as phi
grows), T_norm = 10. T_norm is an absolute L2 norm, so it depends on the model's size and scale.

Site side (training, not in this module): the site receives w^_k^t and, in each mini-batch,
(a) updates its personalised model v_k on L_k(v) + lambda/2 ||v - w^_k^t||^2 with w^_k^t frozen
as the reference (Eq. 7; ``lightyear.training.regularizers.proximal_term(v, w^_k^t, mu=lambda)``),
v_k persisting across rounds on the site, and (b) updates the customised model, started from
w^_k^t, on L_k alone. It returns the trained customised model (or its difference to w^_k^t) and
evaluates with v_k.

A zero calibrated update has cosine 0 with all others (the toolkit's convention; the authors'
code used -1 when the cosine was undefined). Non-finite values raise ValueError (the authors'
code removed a site whose norm was NaN; here the caller rejects such models before).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from lightyear.algorithms.aggregation import normalised
from lightyear.algorithms.vectors import check_finite, cosine_similarity, stack

ALPHA = 10.0
PHI = 0.1
T_NORM = 10.0


def _number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def check_alpha(alpha: float) -> float:
    """alpha (softmax scale, Eq. 5) must be a finite number >= 0; 0 gives equal weights."""
    if not _number(alpha) or alpha < 0:
        raise ValueError(
            f"alpha (FedCAP softmax scale, Eq. 5) must be a finite number >= 0, got {alpha!r}; "
            "the paper searches {2, 5, 10}"
        )
    return float(alpha)


def check_phi(phi: float) -> float:
    """phi (a site's weight on its own recovered model) must be a number in [0, 1]."""
    if not _number(phi) or not 0.0 <= phi <= 1.0:
        raise ValueError(
            f"phi (FedCAP self weight) must be a number in [0, 1], got {phi!r}; the paper searches {{0.1, 0.2, 0.3}}"
        )
    return float(phi)


def check_t_norm(t_norm: float) -> float:
    """T_norm (detection threshold on ||d~_k||_2) must be a finite number > 0."""
    if not _number(t_norm) or t_norm <= 0:
        raise ValueError(
            f"t_norm (FedCAP detection threshold) must be a finite number > 0, got {t_norm!r}; the paper uses 10"
        )
    return float(t_norm)


def customization_weights(
    update, pool: Mapping[str, np.ndarray], site: str | None, alpha: float = ALPHA, phi: float = PHI
) -> dict[str, float]:
    """The weights p'_k over the pool's sites for the site whose (calibrated) update is ``update``.

    ``pool`` maps sites to calibrated updates d~_i. If ``site`` is in the pool it gets weight
    phi and the others share 1 - phi by softmax(alpha * cos(update, d~_i)) (Eqs. 4-5); if it is
    the pool's only site its weight is 1. A site outside the pool (``site`` None or absent)
    gets the plain softmax over the whole pool. The weights sum to 1.
    """
    alpha, phi = check_alpha(alpha), check_phi(phi)
    others = sorted(s for s in pool if s != site)
    if not others:
        if site in pool:
            return {site: 1.0}
        raise ValueError("the calibrated update pool is empty")
    logits = alpha * np.array([cosine_similarity(update, pool[s]) for s in others])
    soft = np.exp(logits - logits.max())
    soft /= soft.sum()
    share = 1.0 - phi if site in pool else 1.0
    weights = {s: share * float(w) for s, w in zip(others, soft)}
    if site in pool:
        weights[site] = phi
    return weights


@dataclass
class FedCapState:
    """What the FedCAP server keeps across rounds (Alg. 1's pools and the global model).

    global_vector: w^t, the calibration reference (w^0 before the first round);
    recovered / calibrated: the pools {w~_i} and {d~_i} of the last round's kept sites;
    num_samples: |D_i| of those sites (Eq. 6); customized: the w^_k sent this round, kept
    until detection; removed: site -> round it was removed in (permanent); norms: site -> its
    last ||d~||_2; round: rounds completed.
    """

    global_vector: np.ndarray
    recovered: dict[str, np.ndarray] = field(default_factory=dict)
    calibrated: dict[str, np.ndarray] = field(default_factory=dict)
    num_samples: dict[str, float] = field(default_factory=dict)
    customized: dict[str, np.ndarray] = field(default_factory=dict)
    removed: dict[str, int] = field(default_factory=dict)
    norms: dict[str, float] = field(default_factory=dict)
    round: int = 0

    def __post_init__(self):
        self.global_vector = check_finite("global_vector", self.global_vector).ravel().copy()

    def to_dict(self) -> dict:
        """The JSON-serialisable part (the vectors are left out)."""
        return {
            "round": int(self.round),
            "removed": {s: int(self.removed[s]) for s in sorted(self.removed)},
            "norms": {s: float(self.norms[s]) for s in sorted(self.norms)},
            "num_samples": {s: float(self.num_samples[s]) for s in sorted(self.num_samples)},
            "pool": sorted(self.recovered),
            "customized": sorted(self.customized),
        }


@dataclass
class FedCapDetection:
    """kept: sites whose calibrated update passed (sorted), now the pools; removed_now: sites removed
    this round (sorted); ignored: returns from sites removed earlier (sorted); norms: site -> ||d~||_2."""

    kept: list[str]
    removed_now: list[str]
    ignored: list[str]
    norms: dict[str, float]


def fedcap_customize(
    state: FedCapState,
    sites: Iterable[str],
    alpha: float = ALPHA,
    phi: float = PHI,
    fresh_updates: Mapping[str, np.ndarray] | None = None,
    absent: str = "error",
) -> dict[str, np.ndarray]:
    """Customised model vectors w^_k for the round's ``sites``; updates ``state`` (Sec. V-A).

    Removed sites are left out of the result. With an empty pool (round 0) every site gets the
    global vector. Otherwise a pool site is weighted by :func:`customization_weights` with its
    calibrated update; a site outside the pool needs its update against the previous global
    model in ``fresh_updates`` (the paper's newcomer case), or, with ``absent="global"`` (this
    toolkit's fallback), gets the new global model w^t. The global model is then replaced by
    Eq. 6 over the pool, and the result stored in ``state.customized``.
    """
    alpha, phi = check_alpha(alpha), check_phi(phi)
    if absent not in ("error", "global"):
        raise ValueError(f"absent must be 'error' or 'global', got {absent!r}")
    active = sorted(s for s in set(sites) if s not in state.removed)
    fresh = dict(fresh_updates or {})
    out: dict[str, np.ndarray] = {}
    if state.recovered:
        missing = [s for s in active if s not in state.calibrated and s not in fresh]
        if missing and absent == "error":
            raise ValueError(
                f"sites {missing} have no calibrated update from the last round: "
                "pass their update against the global model in fresh_updates, or absent='global'"
            )
        for s in active:
            if s in state.calibrated or s in fresh:
                update = (
                    state.calibrated[s] if s in state.calibrated else check_finite(f"fresh_updates[{s!r}]", fresh[s])
                )
                w = customization_weights(update, state.calibrated, s, alpha, phi)
                out[s] = sum(w[i] * state.recovered[i] for i in sorted(w))
        pool = sorted(state.recovered)
        n = normalised([state.num_samples[s] for s in pool])
        state.global_vector = n @ stack([state.recovered[s] for s in pool])
    for s in active:
        out.setdefault(s, state.global_vector.copy())
    state.customized = {s: v.copy() for s, v in out.items()}
    return out


def fedcap_calibrate_and_detect(
    state: FedCapState, local_models: Mapping[str, np.ndarray], num_samples: Mapping[str, float], t_norm: float = T_NORM
) -> FedCapDetection:
    """Calibrate d~_k = w~_k - w^t, remove sites with ||d~_k||_2 > t_norm for good, refill the pools.

    ``local_models`` maps sites to their (recovered) trained model vectors w~_k; returns from
    sites removed earlier are ignored, whatever they send. The kept sites replace the pools
    (with ``num_samples`` for Eq. 6), ``state.customized`` is cleared and ``state.round`` counts
    one more round.
    """
    t_norm = check_t_norm(t_norm)
    ignored = sorted(s for s in local_models if s in state.removed)
    live = sorted(s for s in local_models if s not in state.removed)
    for s in live:
        if not _number(num_samples.get(s)) or num_samples[s] <= 0:
            raise ValueError(f"num_samples[{s!r}] must be a finite number > 0, got {num_samples.get(s)!r}")
    models = dict(zip(live, stack([local_models[s] for s in live], name="local_models"))) if live else {}
    if live and next(iter(models.values())).size != state.global_vector.size:
        raise ValueError(
            f"local models have {next(iter(models.values())).size} values "
            f"but the global model has {state.global_vector.size}"
        )
    calibrated = {s: models[s] - state.global_vector for s in live}
    norms = {s: float(np.linalg.norm(calibrated[s])) for s in live}
    removed_now = [s for s in live if norms[s] > t_norm]
    kept = [s for s in live if s not in removed_now]
    state.removed.update(dict.fromkeys(removed_now, state.round))
    state.norms.update(norms)
    state.recovered = {s: models[s] for s in kept}
    state.calibrated = {s: calibrated[s] for s in kept}
    state.num_samples = {s: float(num_samples[s]) for s in kept}
    state.customized = {}
    state.round += 1
    return FedCapDetection(kept=kept, removed_now=removed_now, ignored=ignored, norms=norms)

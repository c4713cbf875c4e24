"""FedCAP server rules (Li et al., "FedCAP: Robust Federated Learning via Customized Aggregation and
Personalization", the project's paper 002, Section V and Algorithm 1) on flat vectors, pure NumPy.

One round t: :func:`fedcap_customize` (Sec. V-A, Alg. 1 lines 5-10; Eqs. 3-6) gives each site its customised model and
updates the global model w^t; the sites train and the star controller recovers w~_k = w^_k + d_k (Sec. V-C;
:class:`lightyear.star.controller.StarController`); :func:`fedcap_calibrate_and_detect` (Sec. V-C, Alg. 1 lines 18-19)
calibrates d~_k = w~_k - w^t, removes for good a site with ||d~_k||_2 > T_norm, and refills the pools. The site side
(Eq. 7, ``lightyear.training.regularizers.proximal_term``) is in the trainer. Defaults: the paper grid-searches alpha
and phi (Sec. VI-A); alpha = 10 (Sec. V-A, VI-D1), phi = 0.1 (Sec. VI-D2), T_norm = 10 (Sec. VI-A), an absolute L2 norm
that depends on the model's size. A zero calibrated update has cosine 0 with all others (the authors' code: -1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from lightyear.algorithms.aggregation import normalised
from lightyear.algorithms.vectors import check_finite, cosine_similarity, stack
from lightyear.checks import non_negative, number_in, positive_number

ALPHA = 10.0
PHI = 0.1
T_NORM = 10.0


def check_alpha(alpha: float) -> float:
    """alpha (softmax scale, Eq. 5) must be a finite number >= 0; 0 gives equal weights."""
    return non_negative("alpha (FedCAP softmax scale, Eq. 5)", alpha, note="the paper searches {2, 5, 10}")


def check_phi(phi: float) -> float:
    """phi (a site's weight on its own recovered model) must be a number in [0, 1]."""
    return number_in("phi (FedCAP self weight)", phi, 0.0, 1.0, note="the paper searches {0.1, 0.2, 0.3}")


def check_t_norm(t_norm: float) -> float:
    """T_norm (detection threshold on ||d~_k||_2) must be a finite number > 0."""
    return positive_number("t_norm (FedCAP detection threshold)", t_norm, note="the paper uses 10")


def customization_weights(
    update, pool: Mapping[str, np.ndarray], site: str | None, alpha: float = ALPHA, phi: float = PHI
) -> dict[str, float]:
    """The weights p'_k over the pool's sites (summing to 1) for the site whose calibrated update is ``update``. A
    ``site`` in the pool gets phi and the others share 1 - phi by softmax(alpha * cos(update, d~_i)) (Eqs. 4-5), or 1
    if it is alone; a site outside it (or None) gets the plain softmax over the pool."""
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
    """What the FedCAP server keeps across rounds (Alg. 1's pools and the global model). global_vector: w^t, the
    calibration reference; recovered / calibrated: the pools {w~_i} and {d~_i} of the last round's kept sites, with
    their num_samples |D_i| (Eq. 6); customized: the w^_k sent this round, until detection; removed: site -> round
    removed (permanent); norms: site -> last ||d~||_2; round: rounds completed."""

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
    """kept: sites whose calibrated update passed, now the pools; removed_now: removed this round; ignored: returns
    from sites removed earlier (all sorted); norms: site -> ||d~||_2."""

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
    """Customised model vectors w^_k for the round's ``sites`` (removed ones left out); updates ``state`` (Sec. V-A).
    Round 0 (empty pool): the global vector. Otherwise w^_k = sum_i p'_ki w~_i (Eq. 3, :func:`customization_weights` on
    the site's calibrated update); a site outside the pool needs its update against the previous global model in
    ``fresh_updates`` (the paper's newcomer), or with ``absent="global"`` gets the new global model. The global model
    is then replaced by Eq. 6 over the pool."""
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
    """Calibrate d~_k = w~_k - w^t, remove sites with ||d~_k||_2 > t_norm for good, refill the pools. ``local_models``:
    site -> recovered model vector w~_k (returns from removed sites are ignored). Clears ``state.customized`` and
    counts one more round."""
    t_norm = check_t_norm(t_norm)
    ignored = sorted(s for s in local_models if s in state.removed)
    live = sorted(s for s in local_models if s not in state.removed)
    for s in live:
        positive_number(f"num_samples[{s!r}]", num_samples.get(s))
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

"""FedCAP's server as a star aggregator (Li, Wang, Yu, Sun, Zhang, Wang, "FedCAP: Robust Federated Learning via
Customized Aggregation and Personalization", Sec. V, Algorithm 1); round t (:mod:`lightyear.algorithms.star.fedcap`):

1. :meth:`FedCapAggregator.site_models` (Alg. 1 lines 5-11): each site not removed gets its customised model
   w^_k = sum_i p'_ki w~_i over the recovered pool (Eqs. 3-5; round 0: w^0); the global w^t follows by Eq. 6.
2. The sites train (a personal model by Eq. 7 beside) and return w_k^t or d_k^t = w_k^t - w^_k^t, which the
   controller recovers to w~_k^t = w^_k^t + d_k^t (Sec. V-C, Recovery).
3. :meth:`FedCapAggregator.aggregate` (Alg. 1 lines 18-19): d~_k = w~_k - w^t (Calibration); a site with
   ||d~_k||_2 > T_norm (an absolute norm) is removed for good (Detection); the kept sites refill the pools.

A site outside the pool (missing or rejected last round) gets w^t, this toolkit's fallback for the paper's newcomers.
"""

from __future__ import annotations

import numpy as np

from lightyear.algorithms.attacks.colluding import FedCapTarget
from lightyear.algorithms.detection import STAR_RECORD, excluded_labels
from lightyear.algorithms.star.fedcap import (
    ALPHA,
    PHI,
    T_NORM,
    FedCapState,
    check_alpha,
    check_phi,
    check_t_norm,
    fedcap_calibrate_and_detect,
    fedcap_customize,
)
from lightyear.algorithms.vectors import flatten, unflatten
from lightyear.flare.declarations import STAR, Detection, Method, Settings
from lightyear.star.aggregator import StarAggregator
from lightyear.star.sites.personal import PersonalExecutor


def _compact(vector: np.ndarray) -> np.ndarray:
    """float32 when that loses nothing (pools of float32 models), else the float64 vector."""
    small = vector.astype(np.float32)
    return small if np.array_equal(small, vector) else vector


class FedCapAggregator(StarAggregator):
    ADAPTIVE = FedCapTarget.ATTACK
    """The adaptive attack on FedCAP (full knowledge only)."""

    def __init__(self, alpha: float = ALPHA, phi: float = PHI, t_norm: float = T_NORM):
        """Args: alpha: softmax scale of the customisation weights (Eq. 5); phi: each site's weight on its own
        recovered model; t_norm: a site whose calibrated update's L2 norm exceeds this is removed for good."""
        super().__init__()
        self.alpha = check_alpha(alpha)
        self.phi = check_phi(phi)
        self.t_norm = check_t_norm(t_norm)
        self.fedcap: FedCapState | None = None

    def adaptive_target(self, sent: dict, keys: list[str]) -> FedCapTarget:
        """What the adaptive attack knows in a round: T_norm, alpha, phi and each site's offset (its model sent minus
        w^t over the floating entries ``keys``)."""
        if self.fedcap is None:
            raise ValueError("FedCAP has not customised this round's models yet; the adversary runs after site_models")
        reference = np.asarray(self.fedcap.global_vector, dtype=np.float64)
        offsets = {}
        for site, model in sent.items():
            vector = flatten(model, keys)
            if vector.size != reference.size:
                raise ValueError(
                    f"the model sent to {site} has {vector.size} floating values but FedCAP's w^t has {reference.size}"
                )
            offsets[site] = vector - reference
        return FedCapTarget(self.t_norm, offsets, self.alpha, self.phi)

    def site_models(self, sites, global_weights, round_num, fl_ctx):
        if self.fedcap is None:
            self.fedcap = FedCapState(global_vector=flatten(global_weights))
        vectors = fedcap_customize(self.fedcap, sites, self.alpha, self.phi, absent="global")
        return {s: unflatten(v, global_weights) for s, v in vectors.items()}

    def aggregate(self, global_weights, results, round_num, fl_ctx):
        if self.fedcap is None or not self.fedcap.customized:
            raise ValueError("FedCAP aggregates only results of models it customised this round (site_models first)")
        vectors = {s: flatten(r["weights"]) for s, r in results.items()}
        counts = {s: r["num_samples"] for s, r in results.items()}
        found = fedcap_calibrate_and_detect(self.fedcap, vectors, counts, self.t_norm)
        decision = self.decide(
            unflatten(self.fedcap.global_vector, global_weights),
            found.kept,
            found.removed_now + found.ignored,
            removed_now=found.removed_now,
            norms=found.norms,
        )
        self.log_info(fl_ctx, f"round {round_num}: FedCAP kept {found.kept}; calibrated update norms {found.norms}")
        for site in found.removed_now:
            self.log_warning(
                fl_ctx,
                f"round {round_num}: FedCAP removed {site} for good "
                f"(||d~|| = {found.norms[site]:.3g} > T_norm = {self.t_norm:g})",
            )
        return decision

    def state(self) -> dict:
        return {"fedcap": self.fedcap.to_dict()} if self.fedcap is not None else {}

    def removed_sites(self) -> list[str]:
        return sorted(self.fedcap.removed) if self.fedcap is not None else []

    def state_arrays(self) -> dict:
        if self.fedcap is None:
            return {}
        out = {"global": self.fedcap.global_vector}
        out.update({f"recovered/{s}": _compact(v) for s, v in self.fedcap.recovered.items()})
        return out


METHOD = Method(
    "fedcap",
    STAR,
    "a customised model per site, calibrated updates, permanent removal above a norm, a personal model on each site",
    site=PersonalExecutor,
    rule=FedCapAggregator,
    settings=Settings(datasets={"digits": {"t_norm": 20.0}}),
    detection=Detection(
        excluded_labels,
        STAR_RECORD,
        "",
        "removed (||d~|| > T_norm, for good) or excluded, or rejected by the server",
        per_client=True,
    ),
    adaptive=FedCapAggregator.ADAPTIVE,
)
"""FedCAP; on digits T_norm is 20, above the benign calibrated updates' norms there (docs/methods.md, FedCAP)."""

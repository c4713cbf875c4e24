"""The seven untargeted attacks of FedCAP, on flat update vectors (pure NumPy, no FLARE).

An update is a model minus a reference model as a 1-D float64 vector (``lightyear.algorithms.vectors``); every function
returns a new vector. References: FedCAP (Li et al.) Sec. VI-A3 and Eqs. 8-11, with the original papers: LF and SF
(Fang et al. 2020, FedCAP ref. [40]), MR (FedCAP ref. [15]), LIE (Baruch et al., NeurIPS 2019), Min-Max / Min-Sum
(Shejwalkar & Houmansadr, NDSS 2021), IPM (Xie, Koyejo, Gupta, UAI 2019). Knowledge decides what the caller passes as
``known_updates``: ``partial`` (FedCAP's default) the attackers' own honest updates, pooled; ``full`` also the benign
updates they see. IPM negates the mean of ``known_updates``: under full knowledge the caller passes the benign ones
alone (Xie et al.'s benign mean), under partial the attackers' own stand in for it.
"""

from __future__ import annotations

import math
from functools import partial
from numbers import Real
from statistics import NormalDist

import numpy as np

from lightyear.algorithms.attacks.declaration import Attack
from lightyear.algorithms.vectors import ZERO_NORM, as_matrix, check_finite, squared_distance_matrix

LF, SF, MR, LIE, MINMAX, MINSUM, IPM, ADAPTIVE = "lf", "sf", "mr", "lie", "minmax", "minsum", "ipm", "adaptive"

PARTIAL, FULL = "partial", "full"
KNOWLEDGE = (PARTIAL, FULL)
"""partial: the attackers know their own honest updates; full: also the benign updates."""

STD, UNIT, SIGN = "std", "unit", "sign"
PERTURBATIONS = (STD, UNIT, SIGN)
"""Min-Max / Min-Sum perturbations p: -std (FedCAP's choice), -mean/||mean||, -sign(mean)."""

GAMMA_INIT = 10.0
"""Starting gamma of the halving search (Shejwalkar & Houmansadr's)."""
GAMMA_TOL = 1e-5
"""Width of the bracket around the largest feasible gamma at which the search stops."""
MAX_DOUBLINGS = 64

CRAFT_PARAMS = {
    LF: (),
    SF: (),
    MR: ("scale",),
    LIE: ("z", "ddof"),
    MINMAX: ("perturbation", "gamma_init", "tol"),
    MINSUM: ("perturbation", "gamma_init", "tol"),
    IPM: ("epsilon",),
}


def sign_flip(update) -> np.ndarray:
    """-d: the negated honest update (FedCAP Sec. VI-A3, SF)."""
    return -_update("update", update)


def model_replacement(update, scale: float) -> np.ndarray:
    """scale * d (FedCAP Sec. VI-A3, MR); the caller passes scale = N participants per round by default."""
    return _positive("scale", scale, "the participants per round, N, is FedCAP's choice") * _update("update", update)


def lie_z_max(n: int, m: int) -> float:
    """z_max = Phi^-1((n - s) / n) with s = floor(n/2 + 1) - m (Baruch et al. 2019, Sec. 3). s is how many benign
    participants must back the crafted update for a majority. When the attackers are a majority (s <= 0, Phi^-1
    infinite) s is clamped to 1, the largest finite z_max. Raises ValueError unless n >= 2 and 1 <= m < n."""
    _check_counts(n, m, allow_all=False)
    supporters = max(n // 2 + 1 - m, 1)
    return NormalDist().inv_cdf((n - supporters) / n)


def lie(known_updates, z: float, ddof: int = 1) -> np.ndarray:
    """mu_j - z * sigma_j per coordinate over ``known_updates`` (Baruch et al. 2019; FedCAP Sec. VI-A3, LIE).
    ``ddof = 1`` is the sample std of Baruch et al.'s code, ``0`` the population std; one known update has sigma 0."""
    x = as_matrix(known_updates)
    z = _positive("z", z, "LIE moves each coordinate z standard deviations against the mean", strict=False)
    return x.mean(axis=0) - z * _std(x, ddof)


def perturbation_vector(known_updates, kind: str = STD, ddof: int = 0) -> np.ndarray:
    """p of Min-Max / Min-Sum (Shejwalkar & Houmansadr 2021, Sec. IV): -std, -mean/||mean|| or -sign(mean); zero
    when the mean (unit, sign) or the spread (std) is."""
    x = as_matrix(known_updates)
    mean = x.mean(axis=0)
    if kind == STD:
        return -_std(x, ddof)
    if kind == UNIT:
        norm = float(np.linalg.norm(mean))
        return np.zeros_like(mean) if norm <= ZERO_NORM else -mean / norm
    if kind == SIGN:
        return -np.sign(mean)
    raise ValueError(f"unknown perturbation {kind!r}; choose one of {', '.join(PERTURBATIONS)}")


def min_max(
    known_updates, perturbation: str = STD, gamma_init: float = GAMMA_INIT, tol: float = GAMMA_TOL
) -> tuple[np.ndarray, float]:
    """(mean + gamma * p, gamma), gamma the largest with max_i ||d_m - d_i|| <= max_ij ||d_i - d_j|| (FedCAP Eqs. 8-9).
    Search: :func:`_largest_gamma`. One known update or a zero p gives (mean, 0.0)."""
    return _searched_gamma(known_updates, perturbation, gamma_init, tol, np.max, lambda d: np.sum(d**2, axis=1).max())


def min_sum(
    known_updates, perturbation: str = STD, gamma_init: float = GAMMA_INIT, tol: float = GAMMA_TOL
) -> tuple[np.ndarray, float]:
    """(mean + gamma * p, gamma), gamma the largest with sum_i ||d_m - d_i||^2 <= max_i sum_j ||d_i - d_j||^2
    (FedCAP Eqs. 8, 10); search and edges as :func:`min_max`."""
    return _searched_gamma(
        known_updates, perturbation, gamma_init, tol, lambda sq: sq.sum(axis=1).max(), lambda d: np.sum(d**2)
    )


def ipm(benign_mean, epsilon: float) -> np.ndarray:
    """-epsilon * mean (Xie et al. 2019; FedCAP Eq. 11, epsilon = N participants by default)."""
    return -_positive("epsilon", epsilon, "FedCAP uses epsilon = N participants") * _update("benign_mean", benign_mean)


def crafted_update(
    kind: str, own_update, known_updates, n_participants: int, n_attackers: int, **params
) -> tuple[np.ndarray, dict]:
    """(the update an attacker sends for attack ``kind``, with FedCAP's defaults; the settings in force). lf returns
    ``own_update`` unchanged (its attack is the training on flipped labels,
    :func:`lightyear.training.trainer.flip_targets`); lie, minmax, minsum and ipm need ``known_updates``. ``params``
    (defaults in brackets): mr ``scale`` [n_participants]; lie ``z`` [lie_z_max(n, m)], ``ddof`` [1]; minmax / minsum
    ``perturbation`` ["std"], ``gamma_init`` [10], ``tol`` [1e-5]; ipm ``epsilon`` [n_participants]. Settings: mr
    ``scale``, lie ``z`` and ``ddof``, ipm ``epsilon``, minmax / minsum the ``gamma`` found; {} for lf and sf. Raises
    ValueError for an unknown kind or parameter or a bad value."""
    if kind == ADAPTIVE:
        raise ValueError(
            "the adaptive attack needs an acceptance test, not a fixed rule; use lightyear.algorithms.attacks.adaptive"
        )
    if kind not in CRAFT_PARAMS:
        raise ValueError(f"unknown attack {kind!r}; crafted_update handles {', '.join(CRAFT_PARAMS)}")
    unknown = sorted(set(params) - set(CRAFT_PARAMS[kind]))
    if unknown:
        raise ValueError(
            f"attack {kind!r} takes no parameter {', '.join(unknown)}; "
            f"it takes {', '.join(CRAFT_PARAMS[kind]) or 'none'}"
        )
    _check_counts(n_participants, n_attackers, allow_all=True)
    own = _update("own_update", own_update)
    known = None if kind in (LF, SF, MR) else _known(known_updates, own.size)
    return _CRAFT[kind](own, known, n_participants, n_attackers, **params)


def _lf(own, known, n, m):
    return own.copy(), {}


def _sf(own, known, n, m):
    return sign_flip(own), {}


def _mr(own, known, n, m, scale=None):
    scale = n if scale is None else scale
    return model_replacement(own, scale), {"scale": float(scale)}


def _lie(own, known, n, m, z=None, ddof=1):
    z = lie_z_max(n, m) if z is None else z
    return lie(known, z, ddof), {"z": float(z), "ddof": ddof}


def _ipm(own, known, n, m, epsilon=None):
    epsilon = n if epsilon is None else epsilon
    return ipm(known.mean(axis=0), epsilon), {"epsilon": float(epsilon)}


def _searched(search):
    def craft(own, known, n, m, **params):
        update, gamma = search(known, **params)
        return update, {"gamma": float(gamma)}

    return craft


_CRAFT = {LF: _lf, SF: _sf, MR: _mr, LIE: _lie, IPM: _ipm, MINMAX: _searched(min_max), MINSUM: _searched(min_sum)}


def _crafting(kind: str, text: str, **declared) -> Attack:
    """The declaration of an attack on updates whose ``craft`` is :func:`crafted_update`, with its checks."""
    return Attack(kind, text, CRAFT_PARAMS[kind], partial(crafted_update, kind), **declared)


DECLARED = (
    Attack(LF, "LF (label flipping)"),
    _crafting(SF, "SF (sign flipping)"),
    _crafting(MR, "MR (model replacement)", counts="n"),
    _crafting(LIE, "LIE (a little is enough)", needs_known=True, counts="nm"),
    _crafting(MINMAX, "Min-Max", needs_known=True),
    _crafting(MINSUM, "Min-Sum", needs_known=True),
    _crafting(IPM, "IPM (inner product manipulation)", needs_known=True, counts="n", benign_only=True),
    Attack(ADAPTIVE, "adaptive attack", needs_known=True),
)
"""FedCAP's seven attacks (LF crafts nothing) and the adaptive attack, searched by the components."""


def _largest_gamma(holds, gamma_init: float, tol: float) -> float:
    """The largest gamma >= 0 found with ``holds(gamma)``, to within ``tol``; 0.0 if none. Shejwalkar & Houmansadr's
    search (step up if the constraint held, down if not, halving the step), after doubling gamma_init while
    2 * gamma_init still holds (at most 64 times) so the answer is not capped. Both constraints are convex in gamma and
    hold at 0, so the search converges to the largest feasible gamma; the result was tested."""
    gamma = float(gamma_init)
    for _ in range(MAX_DOUBLINGS):
        if not holds(2.0 * gamma):
            break
        gamma *= 2.0
    step, best = gamma / 2.0, 0.0
    while True:
        # the bracket [last success, last failure] is now [gamma - 2 step, gamma + 2 step]
        if holds(gamma):
            best, gamma = gamma, gamma + step
        else:
            gamma -= step
        if 2.0 * step <= tol:
            return best
        step /= 2.0


def _searched_gamma(known_updates, perturbation, gamma_init, tol, bound_of, spread_of) -> tuple[np.ndarray, float]:
    """(mean + gamma * p, gamma) of Min-Max / Min-Sum: the largest gamma found with ``spread_of(mean + gamma * p -
    known) <= bound_of(squared distances among the known)``."""
    _positive("gamma_init", gamma_init, "the original search starts at 10")
    _positive("tol", tol, "e.g. 1e-5")
    x = as_matrix(known_updates)
    mean, p = x.mean(axis=0), perturbation_vector(x, perturbation)
    bound = bound_of(squared_distance_matrix(x))
    if x.shape[0] == 1 or bound <= 0 or np.linalg.norm(p) <= ZERO_NORM:
        return mean, 0.0
    gamma = _largest_gamma(lambda g: float(spread_of(mean + g * p - x)) <= bound, gamma_init, tol)
    return mean + gamma * p, gamma


def _std(x: np.ndarray, ddof) -> np.ndarray:
    if isinstance(ddof, bool) or ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 (population std) or 1 (sample std), got {ddof!r}")
    if x.shape[0] == 1:
        return np.zeros(x.shape[1])  # one known update has no spread, sample or population
    return x.std(axis=0, ddof=ddof)


def _update(name: str, update) -> np.ndarray:
    arr = np.asarray(update)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"{name} must be a non-empty 1-D vector, got shape {arr.shape}; "
            "flatten models with lightyear.algorithms.vectors.flatten"
        )
    return check_finite(name, arr)


def _known(known_updates, size: int) -> np.ndarray:
    if known_updates is None:
        raise ValueError(
            "this attack needs known_updates "
            "(the attackers' own honest updates, plus the benign ones under full knowledge)"
        )
    x = as_matrix(known_updates)
    if x.shape[1] != size:
        raise ValueError(
            f"known_updates have {x.shape[1]} values but own_update has {size}; flatten models with the same keys"
        )
    return x


def _check_counts(n, m, allow_all: bool) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n (participants per round) must be an integer >= 2, got {n!r}")
    top = n if allow_all else n - 1
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 1 <= m <= top:
        raise ValueError(f"m (attackers) must be an integer in [1, {top}] for n={n}, got {m!r}")


def _positive(name: str, value, hint: str, strict: bool = True) -> float:
    """``value`` as float if a finite number > 0 (``strict``) or >= 0, else a ValueError with ``hint``."""
    finite = not isinstance(value, bool) and isinstance(value, Real) and math.isfinite(value)
    if not finite or value < 0 or (strict and value == 0):
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} 0 ({hint}), got {value!r}")
    return float(value)

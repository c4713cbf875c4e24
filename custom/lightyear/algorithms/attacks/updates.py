"""The seven untargeted attacks of FedCAP, on flat update vectors (pure NumPy, no FLARE).

An *update* is a model minus a reference model, flattened to a 1-D float64 vector (see
``lightyear.algorithms.vectors``); the caller converts models to vectors and back. Every function
returns a new vector and never modifies its inputs.

References: FedCAP (Li et al.), Sec. VI-A3 and Eqs. 8-11, with the original papers:

* LF, label flipping (Fang et al. 2020, FedCAP ref. [40]): train honestly on y' = (y + 1) mod C.
* SF, sign flipping ([40]): send -d.
* MR, model replacement (FedCAP ref. [15]): send N * d, N = participants per round by default.
* LIE, "A little is enough" (Baruch, Baruch, Goldberg, NeurIPS 2019): mu_j - z_max * sigma_j per
  coordinate, s = floor(n/2 + 1) - m, z_max = Phi^-1((n - s) / n).
* Min-Max / Min-Sum (Shejwalkar & Houmansadr, NDSS 2021; FedCAP Eqs. 8-10): mean + gamma * p with
  the largest gamma meeting a distance constraint, found by a halving search.
* IPM, inner product manipulation (Xie, Koyejo, Gupta, UAI 2019; FedCAP Eq. 11): -epsilon * mean
  of the benign updates, epsilon = N in FedCAP.

Knowledge (:data:`KNOWLEDGE`) decides what the caller passes as ``known_updates``:

* ``"partial"`` (FedCAP's default): the attackers' own honest updates (every attacker trains
  honestly first and the attackers pool what they trained).
* ``"full"``: the attackers' honest updates and the benign updates they see (in the peer-to-peer
  topology, the in-neighbours' models an attacker receives).

IPM negates the mean of ``known_updates``. Under full knowledge the caller passes the benign
updates only, so that it is the benign mean of Xie et al.; under partial knowledge the attackers'
own honest updates stand in for it, the only estimate of the benign mean they have.
"""

from __future__ import annotations

import math
from numbers import Real
from statistics import NormalDist

import numpy as np

from lightyear.algorithms.attacks.declaration import Attack
from lightyear.algorithms.vectors import ZERO_NORM, as_matrix, check_finite, squared_distance_matrix

LF, SF, MR, LIE, MINMAX, MINSUM, IPM, ADAPTIVE = "lf", "sf", "mr", "lie", "minmax", "minsum", "ipm", "adaptive"

PARTIAL, FULL = "partial", "full"
KNOWLEDGE = (PARTIAL, FULL)
"""partial: the attackers know their own honest updates; full: also the benign updates (module docstring)."""

STD, UNIT, SIGN = "std", "unit", "sign"
PERTURBATIONS = (STD, UNIT, SIGN)
"""Min-Max / Min-Sum perturbations p: -std (FedCAP's choice), -mean/||mean||, -sign(mean)."""

GAMMA_INIT = 10.0
"""Starting gamma of the halving search (the value Shejwalkar & Houmansadr's search starts from)."""
GAMMA_TOL = 1e-5
"""The search stops once the bracket around the largest feasible gamma is narrower than this."""
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
    """z_max = Phi^-1((n - s) / n) with s = floor(n/2 + 1) - m (Baruch et al. 2019, Sec. 3).

    s is how many benign participants must back the crafted update for it to reach a majority.
    Edges: for 1 <= m < n the ratio (n - s) / n is at least 1/2 (so z_max >= 0; it is 0 for
    n even and m = 1). When the attackers are a majority themselves (m >= floor(n/2) + 1) s would
    be <= 0 and the ratio >= 1, Phi^-1 infinite; s is then clamped to 1, giving the largest finite
    value the formula yields, Phi^-1((n - 1) / n). Pass z to :func:`lie` directly for another value.
    Raises ValueError unless n >= 2 and 1 <= m < n.
    """
    _check_counts(n, m, allow_all=False)
    supporters = max(n // 2 + 1 - m, 1)
    return NormalDist().inv_cdf((n - supporters) / n)


def lie(known_updates, z: float, ddof: int = 1) -> np.ndarray:
    """mu_j - z * sigma_j for every coordinate j (Baruch et al. 2019; FedCAP Sec. VI-A3, LIE).

    mu and sigma are the mean and standard deviation over ``known_updates`` (an ``(n, d)`` array
    or a sequence of vectors). ``ddof = 1`` (default) is the sample std, as in Baruch et al.'s code
    (torch.std's default) and byzfl: the attackers estimate the spread of all updates from the ones
    they hold. With a single known update the sample std is undefined; sigma is then 0 (the crafted
    update is the mean) whatever ``ddof``. ``ddof = 0`` is the population std.
    """
    x = as_matrix(known_updates)
    z = _non_negative("z", z, "LIE moves each coordinate z standard deviations against the mean")
    return x.mean(axis=0) - z * _std(x, ddof)


def perturbation_vector(known_updates, kind: str = STD, ddof: int = 0) -> np.ndarray:
    """p of Min-Max / Min-Sum (Shejwalkar & Houmansadr 2021, Sec. IV): -std, -mean/||mean|| or -sign(mean).

    A zero mean gives a zero ``unit`` / ``sign`` perturbation, zero spread a zero ``std`` one.
    """
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

    See :func:`_largest_gamma` for the search and :func:`perturbation_vector` for p. With one
    known update (every distance 0) or a zero perturbation no gamma > 0 changes anything the
    constraint allows, and the result is (mean, 0.0).
    """
    x, mean, p = _setup(known_updates, perturbation, gamma_init, tol)
    bound = squared_distance_matrix(x).max()
    if x.shape[0] == 1 or bound <= 0 or np.linalg.norm(p) <= ZERO_NORM:
        return mean, 0.0

    def holds(gamma: float) -> bool:
        return float(np.max(np.sum((mean + gamma * p - x) ** 2, axis=1))) <= bound

    gamma = _largest_gamma(holds, gamma_init, tol)
    return mean + gamma * p, gamma


def min_sum(
    known_updates, perturbation: str = STD, gamma_init: float = GAMMA_INIT, tol: float = GAMMA_TOL
) -> tuple[np.ndarray, float]:
    """(mean + gamma * p, gamma), gamma the largest with sum_i ||d_m - d_i||^2 <= max_i sum_j ||d_i - d_j||^2
    (FedCAP Eqs. 8, 10).

    Same search, edges and p as :func:`min_max`.
    """
    x, mean, p = _setup(known_updates, perturbation, gamma_init, tol)
    bound = squared_distance_matrix(x).sum(axis=1).max()
    if x.shape[0] == 1 or bound <= 0 or np.linalg.norm(p) <= ZERO_NORM:
        return mean, 0.0

    def holds(gamma: float) -> bool:
        return float(np.sum((mean + gamma * p - x) ** 2)) <= bound

    gamma = _largest_gamma(holds, gamma_init, tol)
    return mean + gamma * p, gamma


def ipm(benign_mean, epsilon: float) -> np.ndarray:
    """-epsilon * mean (Xie et al. 2019; FedCAP Eq. 11, epsilon = N participants by default)."""
    return -_positive("epsilon", epsilon, "FedCAP uses epsilon = N participants") * _update("benign_mean", benign_mean)


def crafted_update(
    kind: str, own_update, known_updates, n_participants: int, n_attackers: int, **params
) -> tuple[np.ndarray, dict]:
    """(the update an attacker sends for attack ``kind``, with FedCAP's defaults; the attack's
    settings in force, what a run records of each crafted round).

    ``kind`` is one of sf, mr, lie, minmax, minsum, ipm, or lf: label flipping acts on the
    training data (:func:`lightyear.training.trainer.flip_targets`), so its update is the one
    trained on flipped labels and is returned unchanged. ``known_updates`` (see the module
    docstring on knowledge) is needed by lie, minmax, minsum and ipm and ignored by the others.
    ``params`` per kind (defaults in brackets):
    mr ``scale`` [n_participants]; lie ``z`` [lie_z_max(n_participants, n_attackers)], ``ddof`` [1];
    minmax / minsum ``perturbation`` ["std"], ``gamma_init`` [10], ``tol`` [1e-5];
    ipm ``epsilon`` [n_participants], applied to the mean of ``known_updates`` (benign ones only
    under full knowledge; see the module docstring).
    Raises ValueError for an unknown kind or parameter, or values of the wrong type or range.
    The settings are mr ``scale``, lie ``z`` and ``ddof``, ipm ``epsilon``, minmax / minsum the
    ``gamma`` the search found; {} for lf and sf."""
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


def _checked(kind: str):
    """The declared ``craft`` of ``kind``: :func:`crafted_update`, with its checks."""

    def craft(own_update, known, n, m, **params):
        return crafted_update(kind, own_update, known, n, m, **params)

    return craft


DECLARED = (
    Attack(LF, "LF (label flipping)"),
    Attack(SF, "SF (sign flipping)", craft=_checked(SF)),
    Attack(MR, "MR (model replacement)", CRAFT_PARAMS[MR], _checked(MR), counts="n"),
    Attack(LIE, "LIE (a little is enough)", CRAFT_PARAMS[LIE], _checked(LIE), needs_known=True, counts="nm"),
    Attack(MINMAX, "Min-Max", CRAFT_PARAMS[MINMAX], _checked(MINMAX), needs_known=True),
    Attack(MINSUM, "Min-Sum", CRAFT_PARAMS[MINSUM], _checked(MINSUM), needs_known=True),
    Attack(
        IPM,
        "IPM (inner product manipulation)",
        CRAFT_PARAMS[IPM],
        _checked(IPM),
        needs_known=True,
        counts="n",
        benign_only=True,
    ),
    Attack(ADAPTIVE, "adaptive attack", needs_known=True),
)
"""FedCAP's seven attacks and the adaptive attack (whose searches live with the components that
know the defence), as the catalogue lists them. LF trains on flipped labels, so it crafts nothing
(its update is the honest one of that training)."""


def _largest_gamma(holds, gamma_init: float, tol: float) -> float:
    """The largest gamma >= 0 found with ``holds(gamma)``, to within ``tol``; 0.0 if none.

    The search of Shejwalkar & Houmansadr: test gamma = gamma_init, then move gamma up by step if
    the constraint held and down if not, halving the step each time; the tested values bisect
    (0, 2 * gamma_init). Added here: while the constraint still holds at 2 * gamma_init, gamma_init
    doubles first (at most 64 times), so the answer is not capped at 2 * gamma_init. Both
    constraints are convex in gamma and hold at gamma = 0 (the mean lies in the hull of the known
    updates), so they hold on an interval [0, gamma*] and the search converges to gamma*.
    The returned gamma was tested and met the constraint; the last failure lies within tol above it.
    """
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


def _setup(known_updates, perturbation: str, gamma_init, tol):
    _positive("gamma_init", gamma_init, "the original search starts at 10")
    _positive("tol", tol, "e.g. 1e-5")
    x = as_matrix(known_updates)
    return x, x.mean(axis=0), perturbation_vector(x, perturbation)


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


def _positive(name: str, value, hint: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0 ({hint}), got {value!r}")
    return float(value)


def _non_negative(name: str, value, hint: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0 ({hint}), got {value!r}")
    return float(value)

"""Adaptive attacks: the largest step along a harmful direction that the defence is predicted to accept.

The attacker sends ``honest + alpha * direction`` with the largest alpha that the defence's acceptance rule (or a
stand-in it can run) is predicted to accept. Here: the step search, the search over families of candidates, the
harmful direction, and two complete attacks: on Krum (Fang, Cao, Jia, Gong, "Local Model Poisoning Attacks to
Byzantine-Robust Federated Learning", USENIX Security 2020, Sec. 4) and on FedCAP's norm detection and
customisation (paper 002, Sec. V).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Real

import numpy as np

from lightyear.algorithms.attacks.updates import _update
from lightyear.algorithms.star.fedcap import check_t_norm
from lightyear.algorithms.star.krum import check_krum_settings, default_f, krum_select
from lightyear.algorithms.vectors import ZERO_NORM, as_matrix, check_finite, squared_distance_matrix

REVERSE, SIGN = "reverse", "sign"
DIRECTIONS = (REVERSE, SIGN)
"""reverse: -(benign mean); sign: -sign(benign mean) (Fang et al.'s s); unit length in :func:`harmful_direction`,
entries +-1 in :func:`krum_adaptive`."""


def largest_accepted_step(
    accepts: Callable[[float], bool], max_step: float, tol: float, max_evaluations: int = 16, check_honest: bool = True
) -> float:
    """The largest step alpha in [0, max_step] found with ``accepts(alpha)`` True, within ``tol`` for a monotone test.
    alpha = 0 is the honest model: with ``check_honest`` it is tested first (0.0 if rejected), else assumed accepted.
    Search: alpha = max_step, max_step/2, ... (while >= tol) until one is accepted, then bisection of [a, 2a] down to
    ``tol``; 0.0 when no grid point is accepted. Each call of ``accepts`` is typically a forward pass, so at most
    ``max_evaluations`` are made (the best alpha so far is returned). Acceptance need not be monotone: the result is an
    alpha that was tested and accepted (or 0.0), not a guaranteed maximum."""
    if not callable(accepts):
        raise ValueError(f"accepts must be a callable alpha -> bool, got {type(accepts).__name__}")
    max_step = _positive("max_step", max_step)
    tol = _positive("tol", tol)
    if tol > max_step:
        raise ValueError(
            f"tol ({tol}) must not exceed max_step ({max_step}); the search would test nothing below max_step"
        )
    if isinstance(max_evaluations, bool) or not isinstance(max_evaluations, (int, np.integer)) or max_evaluations < 1:
        raise ValueError(
            "max_evaluations must be an integer >= 1 (each call of accepts costs a forward pass), "
            f"got {max_evaluations!r}"
        )
    budget = int(max_evaluations)

    def test(alpha: float) -> bool:
        nonlocal budget
        budget -= 1
        return bool(accepts(alpha))

    if check_honest and not test(0.0):
        return 0.0
    alpha = max_step
    while True:
        if budget <= 0 or alpha < tol:
            return 0.0
        if test(alpha):
            break
        alpha /= 2.0
    if alpha == max_step:
        return max_step
    low, high = alpha, 2.0 * alpha
    while high - low > tol and budget > 0:
        mid = (low + high) / 2.0
        if test(mid):
            low = mid
        else:
            high = mid
    return low


Harm = tuple
"""How much a candidate hurts, compared lexicographically (e.g. (drop of accuracy, rise of loss))."""


def most_harmful(
    families: dict,
    predict: Callable[[object], tuple[bool, Harm]],
    tol_share: float = 1.0 / 1024,
    max_evaluations: int = 16,
    expired: Callable[[], bool] | None = None,
) -> tuple[object | None, dict]:
    """The most harmful candidate the defence is predicted to accept: (candidate or None, record fields). ``families``
    maps a name to ``(make, max_strength)``, ``make(s)`` the candidate of strength s (a ``max_strength`` of None: the
    single candidate ``make(None)``); ``predict(candidate) -> (accepted, harm)`` runs the defence as the attacker can.
    Each family is searched by :func:`largest_accepted_step` (to ``tol_share * max_strength``), and every accepted
    candidate tested competes, since harm need not grow with strength; once ``expired()`` nothing more is predicted.
    None when nothing accepted did harm. Fields: ``attack_family``, ``attack_strength``, ``attack_harm`` (first
    component), ``attack_evaluations``."""
    best: tuple | None = None
    evaluations = 0
    for name, (make, top) in families.items():

        def accepts(strength, make=make, name=name) -> bool:
            nonlocal best, evaluations
            if expired is not None and expired():
                return False
            evaluations += 1
            candidate = make(strength)
            accepted, harm = predict(candidate)
            if accepted and (best is None or harm > best[0]):
                best = (harm, name, strength, candidate)
            return bool(accepted)

        if top is None:
            accepts(None)
        else:
            largest_accepted_step(accepts, top, top * tol_share, max_evaluations=max_evaluations, check_honest=False)
    fields = {"attack_family": "", "attack_strength": "", "attack_harm": 0.0, "attack_evaluations": evaluations}
    if best is None or not best[0] > tuple(0.0 for _ in best[0]):
        return None, fields
    harm, name, strength, candidate = best
    fields.update(
        {
            "attack_family": name,
            "attack_strength": "" if strength is None else float(strength),
            "attack_harm": float(harm[0]),
        }
    )
    return candidate, fields


def harmful_direction(own_update, known_benign_updates=None, kind: str = REVERSE) -> np.ndarray:
    """A unit (L2) direction that undoes benign progress, so that a step alpha is a distance. ``reverse``: -(mean of
    ``known_benign_updates``, or ``own_update`` without them); ``sign``: -sign of that vector (Fang et al.'s s); both
    scaled to unit length. A zero vector gives all zeros: the caller should send its honest update."""
    if kind not in DIRECTIONS:
        raise ValueError(f"unknown direction {kind!r}; choose one of {', '.join(DIRECTIONS)}")
    base = _update("own_update", own_update)
    if known_benign_updates is not None and len(known_benign_updates) > 0:
        known = as_matrix(known_benign_updates)
        if known.shape[1] != base.size:
            raise ValueError(
                f"known_benign_updates have {known.shape[1]} values but own_update has {base.size}; "
                "flatten models with the same keys"
            )
        base = known.mean(axis=0)
    direction = -base if kind == REVERSE else -np.sign(base)
    norm = float(np.linalg.norm(direction))
    return np.zeros_like(direction) if norm <= ZERO_NORM else direction / norm


def krum_adaptive(
    known_benign_updates,
    n_attackers: int,
    f: int | None = None,
    direction: str = SIGN,
    max_lambda: float | None = None,
    tol: float | None = None,
    max_evaluations: int = 32,
    m: int = 1,
) -> tuple[np.ndarray, float]:
    """Fang et al.'s full-knowledge attack on Krum (Sec. 4): (crafted update, lambda). All ``n_attackers`` send
    d = lambda * u, u = -sign(benign mean) (``sign``, Fang et al.'s -s) or the unit -(mean)/||mean|| (``reverse``).
    lambda is the largest found by :func:`largest_accepted_step` for which
    :func:`~lightyear.algorithms.star.krum.krum_select` (``f`` default ``default_f(n)``) puts a copy among its ``m``
    selected, the copies placed after the benign updates (ties go to a benign one, so count as rejected). Defaults:
    ``max_lambda`` = (largest benign norm + largest benign pairwise distance) / ||u||, ``tol`` = max_lambda / 1024. A
    zero benign mean, or no accepted lambda, gives lambda 0 and a zero update; copies Krum cannot outvote
    (n_attackers >= n - f - 1) get max_lambda."""
    benign = as_matrix(known_benign_updates)
    n_benign = benign.shape[0]
    if isinstance(n_attackers, bool) or not isinstance(n_attackers, (int, np.integer)) or n_attackers < 1:
        raise ValueError(f"n_attackers must be an integer >= 1, got {n_attackers!r}")
    n = n_benign + int(n_attackers)
    f = default_f(n) if f is None else f
    check_krum_settings(n, f, m)
    if direction not in DIRECTIONS:
        raise ValueError(f"unknown direction {direction!r}; choose one of {', '.join(DIRECTIONS)}")
    mean = benign.mean(axis=0)
    unit = -np.sign(mean) if direction == SIGN else harmful_direction(mean, benign, REVERSE)
    u_norm = float(np.linalg.norm(unit))
    if u_norm <= ZERO_NORM:
        return np.zeros_like(mean), 0.0
    if max_lambda is None:
        spread = math.sqrt(float(squared_distance_matrix(benign).max()))
        max_lambda = (float(np.linalg.norm(benign, axis=1).max()) + spread) / u_norm
    max_lambda = _positive("max_lambda", max_lambda)
    tol = max_lambda / 1024.0 if tol is None else _positive("tol", tol)

    def selected(lam: float) -> bool:
        crafted = np.tile(lam * unit, (int(n_attackers), 1))
        return max(krum_select(np.vstack([benign, crafted]), f, m)) >= n_benign

    lam = largest_accepted_step(selected, max_lambda, tol, max_evaluations=max_evaluations, check_honest=False)
    return lam * unit, lam


def _number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, Real) and math.isfinite(value)


def _positive(name: str, value) -> float:
    if not _number(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


ANGLES = 64
"""Angles tried between a target's direction and the harmful direction by :func:`fedcap_targeted`."""


def fedcap_targeted(
    known_calibrated: dict,
    attackers: int,
    t_norm: float,
    alpha: float,
    phi: float,
    margin: float = 0.02,
    direction: str = REVERSE,
    angles: int = ANGLES,
) -> tuple[np.ndarray, dict]:
    """The attack on FedCAP that trades customisation weight against harm: (crafted calibrated update, settings).
    FedCAP weights site k's customised model by a softmax of alpha * cos(d~_k, d~_i) (paper 002, Eqs. 3-5): an update
    along the harmful direction u gets no weight, one along a benign update does no harm. For every benign target k
    this tries d = r (cos a v_k + sin a w_k), v_k = d~_k / ||d~_k||, w_k the unit part of u orthogonal to v_k,
    r = (1 - margin) T_norm (inside the norm ball), ``angles`` values of a in [0, pi] (r u among them), and keeps the d
    of largest predicted harm: each benign site's weight on the ``attackers`` copies times d . u, plus the attackers'
    share of Eq. 6's global mean times d . u. ``known_calibrated``: benign site -> d~ (full knowledge). Settings: the
    target, angle, radius and predicted harm."""
    known = {s: check_finite(f"calibrated update of {s}", np.asarray(v)) for s, v in known_calibrated.items()}
    if not known:
        raise ValueError("the FedCAP attack needs the benign calibrated updates (full knowledge)")
    t_norm = check_t_norm(t_norm)
    if not _number(margin) or not 0.0 <= margin < 1.0:
        raise ValueError(
            f"margin must be a number in [0, 1): the share of T_norm the attacker keeps in reserve, got {margin!r}"
        )
    if isinstance(attackers, bool) or not isinstance(attackers, (int, np.integer)) or attackers < 1:
        raise ValueError(f"attackers must be an integer >= 1, got {attackers!r}")
    sites = sorted(known)
    matrix = np.stack([known[s] for s in sites])
    u = harmful_direction(matrix.mean(axis=0), kind=direction)
    radius = (1.0 - float(margin)) * t_norm
    if not u.any():
        return np.zeros(matrix.shape[1]), {"target": "", "angle": 0.0, "radius": 0.0, "harm": 0.0}
    norms = np.maximum(np.linalg.norm(matrix, axis=1), ZERO_NORM)
    cosines = (matrix @ matrix.T) / np.outer(norms, norms)
    share = attackers / (len(sites) + attackers)
    best = (-np.inf, None, 0.0, None)
    for t, target in enumerate(sites):
        v = matrix[t] / norms[t]
        w = u - (u @ v) * v
        w = w / np.linalg.norm(w) if np.linalg.norm(w) > ZERO_NORM else w
        for a in np.linspace(0.0, np.pi, angles):
            d = radius * (np.cos(a) * v + np.sin(a) * w)
            along = float(d @ u)
            to_benign = (matrix @ d) / (norms * radius)  # cos(d~_k, d) for every benign k
            harm = share * along
            for k in range(len(sites)):
                logits = alpha * np.concatenate([np.delete(cosines[k], k), np.full(attackers, to_benign[k])])
                soft = np.exp(logits - logits.max())
                harm += (1.0 - phi) * float(soft[len(sites) - 1 :].sum() / soft.sum()) * along
            if harm > best[0]:
                best = (harm, target, float(a), d)
    harm, target, angle, crafted = best
    return crafted, {"target": target, "angle": angle, "radius": radius, "harm": float(harm)}

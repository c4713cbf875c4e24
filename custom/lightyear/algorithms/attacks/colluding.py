"""One round of colluding attackers that see every update of a round (pure NumPy, no FLARE).

The star topology simulates its attackers on the server (``lightyear.star.adversary``). Participants n are the sites
with a usable update this round, attackers m the spec's attackers among them. Known updates: ``partial`` the
attackers' own honest updates, ``full`` also the benign ones (IPM and the adaptive attack: the benign ones alone,
the attackers' own standing in when there are none). sf and mr transform each attacker's own update; lie, minmax,
minsum and ipm compute one update that every attacker sends (FedCAP Sec. VI-A3). An attack that ``needs_rng`` draws
from :func:`~lightyear.algorithms.attacks.declaration.attack_rng` (each attacker's own, or the first attacker's for
a shared update).

``adaptive`` aims at the job's rule, every attacker sending the same update. On Krum:
:func:`~lightyear.algorithms.attacks.adaptive.krum_adaptive` (Fang et al., USENIX Security 2020, Sec. 4); under
partial knowledge the attackers' own updates stand in for the benign ones, so f is capped at ``default_f(2m)``,
multi-Krum's m at 2m, and it needs m >= 2. On FedCAP: :func:`~lightyear.algorithms.attacks.adaptive.fedcap_targeted`
on the calibrated updates d~_k = (update) + (model sent - w^t); it needs full knowledge, since w^t is Eq. 6's mean
of last round's mostly benign models.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from lightyear.algorithms.attacks import catalogue
from lightyear.algorithms.attacks.adaptive import fedcap_targeted, krum_adaptive
from lightyear.algorithms.attacks.declaration import RNG, attack_rng
from lightyear.algorithms.attacks.settings import AdaptiveTarget, AttackSpec
from lightyear.algorithms.attacks.updates import ADAPTIVE, FULL, LF, PARTIAL
from lightyear.algorithms.star.krum import default_f


@dataclass(frozen=True)
class KrumTarget:
    """The Krum settings the adaptive attack aims at: ``f`` (None: ``default_f`` of n) and multi-Krum's ``m``."""

    f: int | None = None
    m: int = 1

    ATTACK = AdaptiveTarget(
        params=("direction", "max_step", "tol", "max_evaluations"),
        partial_needs=2,
        partial_reason="the adaptive attack on Krum under partial knowledge simulates Krum on the attackers' "
        "own updates and their crafted copies, which needs at least 2 attackers; "
        "use --knowledge full or more attackers",
    )
    """Fang et al.'s attack on Krum (:func:`~lightyear.algorithms.attacks.adaptive.krum_adaptive`)."""


@dataclass(frozen=True)
class FedCapTarget:
    """What the adaptive attack on FedCAP knows of the rule in a round: ``t_norm``, ``offsets`` (site -> the model it
    was sent minus w^t, flat: its calibrated update is its update plus its offset), and ``alpha`` and ``phi``
    (Eqs. 4-5)."""

    t_norm: float
    offsets: Mapping[str, np.ndarray]
    alpha: float = 10.0
    phi: float = 0.1

    ATTACK = AdaptiveTarget(
        params=("margin", "direction"),
        full_knowledge_only="the adaptive attack on FedCAP needs its calibration reference w^t, the mean of last "
        "round's mostly benign models, which partial knowledge does not hold; use --knowledge full",
    )
    """The attack on FedCAP (:func:`~lightyear.algorithms.attacks.adaptive.fedcap_targeted`)."""


@dataclass
class CraftedRound:
    """What the attackers send in a round: ``updates`` (attacker -> update), ``settings`` in force, ``known`` sites."""

    updates: dict[str, np.ndarray] = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    known: list[str] = field(default_factory=list)
    n_participants: int = 0

    @property
    def attackers(self) -> list[str]:
        return sorted(self.updates)


def check_spec(spec: AttackSpec) -> AttackSpec:
    """Refuse what the server cannot simulate: no attackers, or label flipping (done in the attackers' training)."""
    if spec.kind == LF:
        raise ValueError(
            "label flipping (lf) happens in the attackers' training (executor argument flip_labels), not on the "
            "server; the simulated adversary takes the other attacks"
        )
    if not spec.attackers:
        raise ValueError("attackers must name at least one site (the last K sites of the job)")
    return spec


def known_sites(kind: str, knowledge: str, attackers, benign) -> list[str]:
    """The sites whose honest updates the crafting of ``kind`` uses (module docstring)."""
    attackers, benign = sorted(attackers), sorted(benign)
    declared = catalogue.attack(kind)
    if not declared.needs_known or knowledge == PARTIAL:
        return attackers
    if declared.benign_only or kind == ADAPTIVE:
        return benign or attackers
    return attackers + benign


def craft_round(
    spec: AttackSpec,
    honest: Mapping[str, np.ndarray],
    target: KrumTarget | FedCapTarget | None = None,
    seed: int | None = None,
    round_num: int | None = None,
) -> CraftedRound:
    """The crafted update of every attacker in ``honest`` (site -> its honest 1-D update of the round). ``target``:
    what the adaptive attack knows of its rule (required for it); ``seed`` and ``round_num``: the job's, for an attack
    that ``needs_rng`` (required for it). Raises ValueError when the round cannot be crafted."""
    check_spec(spec)
    if spec.kind == ADAPTIVE:
        if not isinstance(target, (KrumTarget, FedCapTarget)):
            raise ValueError(
                "the adaptive attack in the star topology needs what the job's rule declares of itself: "
                "a KrumTarget or FedCapTarget"
            )
        target.ATTACK.check(spec, type(target).__name__.removesuffix("Target"))
    if spec.knowledge not in (PARTIAL, FULL):
        raise ValueError(f"unknown knowledge {spec.knowledge!r}")
    attackers = sorted(s for s in honest if spec.is_attacker(s))
    if not attackers:
        return CraftedRound(n_participants=len(honest))
    benign = sorted(s for s in honest if not spec.is_attacker(s))
    n, m = len(honest), len(attackers)
    known = known_sites(spec.kind, spec.knowledge, attackers, benign)
    if spec.kind == ADAPTIVE and isinstance(target, FedCapTarget):
        return _fedcap_attack(spec, honest, attackers, known, target)
    if spec.kind == ADAPTIVE:
        update, settings = _krum_attack(spec, [honest[s] for s in known], m, target)
        return CraftedRound({a: update.copy() for a in attackers}, settings, known, n)
    declared = catalogue.attack(spec.kind)
    if declared.craft is None:
        raise ValueError(
            f"attack {spec.kind!r} crafts no update on the server (it acts on the training data or a whole model)"
        )
    if declared.needs_rng and (seed is None or round_num is None):
        raise ValueError(f"attack {spec.kind!r} draws at random: give craft_round the job's seed and the round")

    def drawn(attacker: str) -> dict:
        return {RNG: attack_rng(seed, round_num, spec.attackers.index(attacker))} if declared.needs_rng else {}

    if not declared.needs_known:  # each attacker transforms its own update
        crafted = {
            a: declared.craft(np.asarray(honest[a], dtype=np.float64), None, n, m, **spec.params, **drawn(a))
            for a in attackers
        }
        settings = crafted[attackers[0]][1]
        return CraftedRound({a: c[0] for a, c in crafted.items()}, settings, known, n)
    matrix = np.stack([np.asarray(honest[s], dtype=np.float64) for s in known])
    own = np.asarray(honest[attackers[0]], dtype=np.float64)
    update, settings = declared.craft(own, matrix, n, m, **spec.params, **drawn(attackers[0]))
    return CraftedRound({a: update.copy() for a in attackers}, settings, known, n)


def _fedcap_attack(
    spec: AttackSpec, honest: Mapping[str, np.ndarray], attackers: list[str], known: list[str], target: FedCapTarget
) -> CraftedRound:
    """Every attacker sends the crafted calibrated update minus its own offset."""
    missing = [s for s in known + attackers if s not in target.offsets]
    if missing:
        raise ValueError(f"no calibration offset for sites {missing}: FedCapTarget.offsets needs every participant's")
    calibrated = {s: np.asarray(honest[s], dtype=np.float64) + target.offsets[s] for s in known}
    margin, direction = spec.param("margin"), spec.param("direction")
    crafted, found = fedcap_targeted(
        calibrated, len(attackers), target.t_norm, target.alpha, target.phi, margin, direction
    )
    updates = {a: crafted - target.offsets[a] for a in attackers}
    settings = {**found, "t_norm": float(target.t_norm), "margin": margin, "direction": direction}
    return CraftedRound(updates, settings, known, len(honest))


def _krum_attack(spec: AttackSpec, stand_in: list[np.ndarray], m: int, krum: KrumTarget) -> tuple[np.ndarray, dict]:
    n_sim = len(stand_in) + m
    if n_sim < 3:
        raise ValueError(
            f"Krum cannot be simulated on {n_sim} updates (it needs 3): "
            f"{len(stand_in)} known and {m} attacker(s) this round"
        )
    f = default_f(n_sim) if krum.f is None else min(krum.f, default_f(n_sim))
    m_krum = min(krum.m, n_sim)
    direction = spec.param("direction")
    update, lam = krum_adaptive(
        np.stack(stand_in),
        m,
        f=f,
        direction=direction,
        max_lambda=spec.param("max_step"),
        tol=spec.param("tol"),
        max_evaluations=spec.param("max_evaluations"),
        m=m_krum,
    )
    return update, {"lambda": float(lam), "f": f, "m": m_krum, "direction": direction}

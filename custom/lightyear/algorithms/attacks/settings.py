"""An attack's settings, checked once for the job generator and every component (pure, no FLARE).

:class:`AttackSpec` refuses what no rule can use, so a bad value is named when the job is generated. The defaults
stay with the rules (:func:`lightyear.algorithms.attacks.updates.crafted_update`; :data:`ADAPTIVE_DEFAULTS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Real

from lightyear.algorithms.attacks import catalogue, reparametrise, updates
from lightyear.algorithms.attacks.adaptive import DIRECTIONS, REVERSE
from lightyear.algorithms.attacks.reparametrise import TRANSFORMS, check_factor
from lightyear.algorithms.attacks.updates import ADAPTIVE, KNOWLEDGE, PARTIAL, PERTURBATIONS
from lightyear.checks import boolean, int_in, mapping, one_of

ADAPTIVE_PARAMS = ("margin", "direction", "max_step", "tol", "max_evaluations")
"""Every setting of the adaptive attack; the attack on each method takes those it declares (``Method.adaptive``)."""


BUILTIN = tuple(a.name for a in (*updates.DECLARED, *reparametrise.DECLARED))
"""The toolkit's own attacks, whose settings this module checks by name."""


def params_of(kind: str) -> tuple[str, ...]:
    """The parameters attack ``kind`` takes (the job setting ``attack_<name>`` sets ``<name>``)."""
    return ADAPTIVE_PARAMS if kind == ADAPTIVE else catalogue.attack(kind).params


ADAPTIVE_DEFAULTS = {"margin": 0.02, "direction": REVERSE, "max_step": None, "tol": None, "max_evaluations": 16}
"""The adaptive attack's defaults: it aims at a score ``tau + margin`` (peer-to-peer) or a calibrated norm
``(1 - margin) T_norm`` (FedCAP); a None ``max_step`` / ``tol`` is derived from the update's size."""


REPARAMETRISATIONS = TRANSFORMS
"""Attacks that send a function-preserving reparametrisation of the attacker's (partial) or receiver's (full) model."""

_POSITIVE = ("scale", "epsilon", "gamma_init", "tol", "max_step")


@dataclass(frozen=True)
class AttackSpec:
    """What the attackers of a run do, and know.

    Args:
        kind: a known attack (:mod:`~lightyear.algorithms.attacks.catalogue`).
        knowledge: ``partial`` (the attackers' own honest updates, pooled; FedCAP's default) or ``full`` (also the
            benign updates of the round).
        attackers: the attacking sites' names.
        params: the attack's parameters (:func:`params_of`); those not given keep their defaults.
    """

    kind: str
    knowledge: str = PARTIAL
    attackers: tuple = ()
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.kind, str) or self.kind not in catalogue.names():
            raise ValueError(f"unknown attack {self.kind!r}; choose one of {', '.join(catalogue.names())}")
        if not isinstance(self.knowledge, str) or self.knowledge not in KNOWLEDGE:
            raise ValueError(f"unknown knowledge {self.knowledge!r}; choose one of {', '.join(KNOWLEDGE)}")
        names = list(self.attackers) if isinstance(self.attackers, (list, tuple)) else None
        if names is None or not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names):
            raise ValueError(f"attackers must be a list of distinct site names, got {self.attackers!r}")
        object.__setattr__(self, "attackers", tuple(names))
        mapping("attack parameters", self.params)
        check_params(self.kind, self.params)

    def param(self, name: str, default=None):
        """The parameter's value, or the adaptive default, or ``default``."""
        if name in self.params:
            return self.params[name]
        return ADAPTIVE_DEFAULTS.get(name, default) if self.kind == ADAPTIVE else default

    def is_attacker(self, site: str) -> bool:
        return site in self.attackers


def check_params(kind: str, params: dict) -> None:
    """Refuse a parameter ``kind`` does not take, or a value of the wrong type or range."""
    allowed = params_of(kind)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        takes = ", ".join(f"attack_{p}" for p in allowed) or "none"
        raise ValueError(
            f"attack {kind!r} takes no setting {', '.join('attack_' + str(u) for u in unknown)}; it takes {takes}"
        )
    if kind not in BUILTIN:  # a plugin's attack checks its own settings, crafting once from a small update
        try:
            catalogue.check_craft_params(kind, params)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"attack {kind!r} refuses its settings {params}: {exc}") from None
        return
    for name, value in params.items():
        if name in ("max_step", "tol") and value is None and kind == ADAPTIVE:
            continue
        if name in _POSITIVE:
            _number(name, value, lambda v: v > 0, "a finite number > 0")
        elif name == "factor":
            check_factor(value)
        elif name == "per_receiver":
            boolean("attack_per_receiver", value, note="true: a new draw for every receiver, peer-to-peer only")
        elif name == "z":
            _number(name, value, lambda v: True, "a finite number (LIE's z_max; default from n and m)")
        elif name == "margin":
            aim = "the attacker aims at the score tau + margin (peer-to-peer) or the norm (1 - margin) T_norm (FedCAP)"
            _number(name, value, lambda v: 0 <= v < 1, f"a number in [0, 1): {aim}")
        elif name == "ddof" and (isinstance(value, bool) or value not in (0, 1)):
            raise ValueError(f"attack_ddof must be 0 or 1, got {value!r}")
        elif name == "perturbation":
            one_of("attack_perturbation", value, PERTURBATIONS)
        elif name == "direction":
            one_of("attack_direction", value, DIRECTIONS)
        elif name == "max_evaluations":
            int_in("attack_max_evaluations", value, 1, 64)


def _number(name: str, value, ok, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or not ok(value):
        raise ValueError(f"attack_{name} must be {what}, got {value!r}")


@dataclass(frozen=True)
class AdaptiveTarget:
    """The adaptive attack on one method as the method declares it (``Method.adaptive``): the ``attack_<param>``
    settings it takes, and, with the reason :meth:`check` gives, whether it needs full knowledge and the least
    attackers under partial knowledge."""

    params: tuple[str, ...]
    full_knowledge_only: str = ""
    partial_needs: int = 1
    partial_reason: str = ""

    def check(self, spec: AttackSpec, method: str) -> AttackSpec:
        """Refuse an adaptive ``spec`` this attack on ``method`` cannot run; other attacks pass."""
        if spec.kind != ADAPTIVE:
            return spec
        extra = sorted(set(spec.params) - set(self.params))
        if extra:
            takes = ", ".join(f"attack_{p}" for p in self.params)
            raise ValueError(
                f"the adaptive attack on {method} takes no {', '.join('attack_' + p for p in extra)}; it takes {takes}"
            )
        if spec.knowledge == PARTIAL and self.full_knowledge_only:
            raise ValueError(self.full_knowledge_only)
        if spec.knowledge == PARTIAL and len(spec.attackers) < self.partial_needs:
            raise ValueError(self.partial_reason)
        return spec


PEER_ADAPTIVE = AdaptiveTarget(params=("max_step", "max_evaluations"))
"""The adaptive attack on a peer-to-peer method whose site predicts its own decision (``Method.adaptive``
``"oracle"``; :mod:`lightyear.p2p.attack.adaptive`), under either knowledge level."""

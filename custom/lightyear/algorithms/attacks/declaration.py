"""What an attack declares of itself: one :class:`Attack` per attack (pure, no FLARE)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
COUNTS = ("", "n", "nm")
RNG = "rng"
"""The keyword by which a ``craft`` that declares ``needs_rng`` gets its generator."""


def attack_rng(seed: int, round_num: int, attacker: int, *stream: int) -> np.random.Generator:
    """The generator of round ``round_num`` for ``attacker`` (its index among the job's attackers), from the job's
    ``seed``: the same job draws the same values (the peer-to-peer attacker adds the receiver's index: ``stream``)."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(round_num), int(attacker), *map(int, stream)])


@dataclass(frozen=True)
class Attack:
    """One attack.

    Args:
        name: the name jobs use (``--attack NAME``).
        text: a short title, for figures and listings.
        params: the ``attack_<param>`` settings it takes.
        craft: for an attack on updates, ``craft(own_update, known, n, m, **params) -> (update, settings)`` on flat
            float64 vectors (``known`` the ``(k, d)`` updates its knowledge gives, or None; n the participants a
            receiver aggregates over, m the attackers among them), raising ValueError for a bad parameter; None for an
            attack the components carry out (on training data, a whole model, or by searching the defence).
        needs_known: it pools the attackers' honest updates (and the benign ones under full knowledge).
        uses_knowledge: full knowledge changes what it sends (implied by ``needs_known``).
        counts: what of n and m the update depends on (``"n"``, ``"nm"`` or ``""``): an attacker crafts once for every
            distinct value among its receivers.
        benign_only: under full knowledge it is computed from the benign updates alone.
        needs_rng: ``craft`` also takes ``rng``, from :func:`attack_rng`, and draws from nothing else.
    """

    name: str
    text: str
    params: tuple[str, ...] = ()
    craft: Callable | None = None
    needs_known: bool = False
    uses_knowledge: bool = False
    counts: str = ""
    benign_only: bool = False
    needs_rng: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not NAME.fullmatch(self.name):
            raise ValueError(
                "an attack's name must be lower-case letters, digits and '_', starting with a letter; "
                f"got {self.name!r}"
            )
        if self.counts not in COUNTS:
            raise ValueError(f"attack {self.name}: counts must be one of {COUNTS}, got {self.counts!r}")
        if self.craft is not None and not callable(self.craft):
            raise ValueError(
                f"attack {self.name}: "
                "craft must be a function (own_update, known, n, m, **params) -> (update, settings)"
            )
        if RNG in self.params:
            raise ValueError(
                f"attack {self.name}: {RNG!r} is no setting; declare needs_rng=True and craft gets the job's generator"
            )
        if self.needs_known:
            object.__setattr__(self, "uses_knowledge", True)

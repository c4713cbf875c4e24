"""What an attack declares of itself: one :class:`Attack` per attack (pure, no FLARE).

The toolkit's attacks declare themselves beside their rules (``updates.py``, ``reparametrise.py``),
a plugin's in its own package (entry point group ``lightyear.attacks``, ``docs/extending.md``);
:mod:`lightyear.algorithms.attacks.catalogue` lists them all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
COUNTS = ("", "n", "nm")
RNG = "rng"
"""The keyword by which a ``craft`` that declares ``needs_rng`` gets its generator (no parameter's name)."""


def attack_rng(seed: int, round_num: int, attacker: int, *stream: int) -> np.random.Generator:
    """The generator an attack draws from in round ``round_num`` for ``attacker`` (its index among the
    job's attackers), from the job's ``seed``: the same job draws the same values. The toolkit's
    reparametrisations draw their factors and permutations from it (the peer-to-peer attacker adds
    the receiver's index as ``stream``), and a plugin's attack that declares ``needs_rng`` gets it
    as ``craft(..., rng=...)``."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(round_num), int(attacker), *map(int, stream)])


@dataclass(frozen=True)
class Attack:
    """One attack.

    Args:
        name: the name jobs use (``--attack NAME``).
        text: a short title, for figures and listings.
        params: the ``attack_<param>`` settings it takes.
        craft: for an attack on updates, ``craft(own_update, known, n, m, **params) -> (update,
            settings in force)`` on flat float64 vectors: ``own_update`` the attacker's honest
            update, ``known`` an ``(k, d)`` array of the updates its knowledge gives (None when it
            needs none), n the participants a receiver aggregates over, m the attackers among them;
            it raises ValueError for a bad parameter. None: the attack acts elsewhere (on the
            training data, on a whole model, or by searching the defence), in the components.
        needs_known: it pools the attackers' honest updates (and, under full knowledge, the benign
            ones); the attackers collude for it.
        uses_knowledge: full knowledge changes what it sends (implied by ``needs_known``).
        counts: what of n and m the crafted update depends on (``"n"``, ``"nm"`` or ``""``): an
            attacker crafts once for every distinct value among its receivers.
        benign_only: under full knowledge it is computed from the benign updates alone.
        needs_rng: it draws at random: ``craft`` also takes the keyword ``rng``, a NumPy Generator
            seeded from the job's seed, the round and the attacker (:func:`attack_rng`), and draws
            from nothing else, so the same job crafts the same updates.
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

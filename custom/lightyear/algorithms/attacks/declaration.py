"""What an attack declares of itself: one :class:`Attack` per attack (pure, no FLARE).

The toolkit's attacks declare themselves beside their rules (``updates.py``, ``reparametrise.py``),
a plugin's in its own package (entry point group ``lightyear.attacks``, ``docs/extending.md``);
:mod:`lightyear.algorithms.attacks.catalogue` lists them all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

NAME = re.compile(r"^[a-z][a-z0-9_]*$")
COUNTS = ("", "n", "nm")


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
    """

    name: str
    text: str
    params: tuple[str, ...] = ()
    craft: Callable | None = None
    needs_known: bool = False
    uses_knowledge: bool = False
    counts: str = ""
    benign_only: bool = False

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
        if self.needs_known:
            object.__setattr__(self, "uses_knowledge", True)

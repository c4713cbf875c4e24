"""Every attack the toolkit knows, its own and installed plugins', by name (pure, no FLARE).

Each declares itself (:class:`~lightyear.algorithms.attacks.declaration.Attack`): the toolkit's in
:mod:`~lightyear.algorithms.attacks.updates` and :mod:`~lightyear.algorithms.attacks.reparametrise`, a plugin's
under the entry point group ``lightyear.attacks`` (an ``Attack`` with a ``craft``; ``docs/extending.md``).
"""

from __future__ import annotations

import functools

import numpy as np

from lightyear.algorithms.attacks import reparametrise, updates
from lightyear.algorithms.attacks.declaration import RNG, Attack, attack_rng
from lightyear.plugins import announced, load

GROUP = "lightyear.attacks"


@functools.cache
def attacks() -> dict[str, Attack]:
    """name -> declaration of every known attack, the toolkit's first (in their order), then plugins'."""
    found = {a.name: a for a in (*updates.DECLARED, *reparametrise.DECLARED)}
    for entry in announced(GROUP):
        try:
            declared = load(entry.value)
        except (ImportError, AttributeError) as exc:
            raise ValueError(
                f"the entry point {entry.name} of group {GROUP} names {entry.value}, which cannot be loaded "
                f"({type(exc).__name__}: {exc}); fix it or reinstall the package that declares it"
            ) from None
        if not isinstance(declared, Attack) or declared.craft is None:
            raise ValueError(
                f"the entry point {entry.name} of group {GROUP} names {entry.value}: a plugin's attack must be a "
                "lightyear.algorithms.attacks.declaration.Attack with a craft function"
            )
        if declared.name in found:
            raise ValueError(
                f"the entry point {entry.name} of group {GROUP} declares attack {declared.name!r}, which exists already"
            )
        found[declared.name] = declared
    return found


def names() -> tuple[str, ...]:
    return tuple(attacks())


def attack(name: str) -> Attack:
    """The declaration of attack ``name``; an unknown name is refused with the known ones."""
    known = attacks()
    if name not in known:
        raise ValueError(f"unknown attack {name!r}; choose one of {', '.join(known)}")
    return known[name]


def check_craft_params(name: str, params: dict) -> None:
    """Refuse settings a plugin's attack cannot take, crafting once from a small update (its checks name them)."""
    declared = attack(name)
    if declared.craft is None:
        return
    own, known = np.array([1.0, -1.0]), np.array([[1.0, -1.0], [0.5, 0.5], [-1.0, 2.0]])
    drawn = {RNG: attack_rng(0, 0, 0)} if declared.needs_rng else {}
    declared.craft(own, known if declared.needs_known else None, 4, 1, **params, **drawn)

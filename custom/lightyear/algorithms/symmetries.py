"""A network's exact parameter symmetries, as its module declares them (pure, no torch): the hidden units that
move together under positive rescaling or permutation, and where each entry of the state dict carries them. The
networks of :mod:`lightyear.models` declare them; the reparametrisation attacks
(:mod:`lightyear.algorithms.attacks.reparametrise`) apply them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """Where one entry carries a group's units. ``key``: the model entry; ``view``: the shape it is reshaped to first
    (None: its own; ``-1`` allowed); ``part``: an index into the view's first axis (a block of a packed attention
    projection), or None; ``axis``: the axis of the (sub-)array holding the units, at ``offset`` to ``offset + units``;
    ``power``: the unit's factor enters as c ** power (+1 producer, -1 reader, 0 moves with the unit only, e.g.
    BatchNorm statistics)."""

    key: str
    axis: int
    power: int
    view: tuple | None = None
    part: int | None = None
    offset: int = 0


@dataclass(frozen=True)
class UnitGroup:
    """Hidden units that move together: ``units`` of them in ``slots``; ``scalable`` if positive rescaling is exact
    for them (else only permutation); permuted within contiguous blocks of ``block`` units (None: any permutation)."""

    name: str
    units: int
    slots: tuple[Slot, ...]
    scalable: bool = True
    block: int | None = None

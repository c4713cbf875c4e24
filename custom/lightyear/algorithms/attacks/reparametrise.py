"""Function-preserving reparametrisations of a model: the same predictions from other parameters (pure NumPy).

Scaling a hidden unit's producing weights by c > 0 and its reading weights by 1/c (for positively homogeneous
activations), or permuting hidden units consistently, leaves the function unchanged (Entezari et al., ICLR 2022;
Ainsworth et al., "Git Re-Basin", ICLR 2023). Such a model passes any test of what it predicts, yet averaged with
another model's parameters it is, in general, a much worse model: the attacks ``rescale``, ``permute`` and
``rescale_permute`` (``docs/attacks.md``). Each network declares its symmetries as
:class:`~lightyear.algorithms.symmetries.UnitGroup` s (:func:`lightyear.models.model_symmetries`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Real

import numpy as np

from lightyear.algorithms.attacks.declaration import Attack
from lightyear.algorithms.symmetries import Slot, UnitGroup

RESCALE, PERMUTE, RESCALE_PERMUTE = "rescale", "permute", "rescale_permute"
TRANSFORMS = (RESCALE, PERMUTE, RESCALE_PERMUTE)
"""rescale: every scalable unit by ``factor`` or 1/``factor`` (a fair coin each); permute: a random
permutation of every group's units; rescale_permute: both."""

DEFAULT_FACTOR = 100.0


def check_factor(factor) -> float:
    """``factor`` must be a finite number > 0 (each scaled unit is multiplied by it or its inverse)."""
    if isinstance(factor, bool) or not isinstance(factor, Real) or not math.isfinite(factor) or factor <= 0:
        raise ValueError(
            f"attack_factor must be a finite number > 0 (each unit is scaled by it or by its inverse), got {factor!r}"
        )
    return float(factor)


def check_transform(transform) -> str:
    if transform not in TRANSFORMS:
        raise ValueError(f"unknown reparametrisation {transform!r}; choose one of {', '.join(TRANSFORMS)}")
    return transform


def check_groups(weights: Mapping[str, np.ndarray], groups: Sequence[UnitGroup]) -> None:
    """Raise ValueError naming the first slot whose entry is missing or does not hold the group's units."""
    for group in groups:
        if group.block is not None and (group.block < 1 or group.units % group.block):
            raise ValueError(f"group {group.name}: block {group.block} does not divide its {group.units} units")
        for slot in group.slots:
            if slot.key not in weights:
                raise ValueError(
                    f"group {group.name}: the model has no entry {slot.key!r}; "
                    "the symmetries were declared for another network"
                )
            sub = slot_array(np.asarray(weights[slot.key]), slot)
            if not -sub.ndim <= slot.axis < sub.ndim or not 0 <= slot.offset <= sub.shape[slot.axis] - group.units:
                raise ValueError(
                    f"group {group.name}: entry {slot.key} (viewed as {sub.shape}) has no {group.units} units "
                    f"from {slot.offset} on axis {slot.axis}"
                )


def draw(
    groups: Sequence[UnitGroup], transform: str, factor: float, rng: np.random.Generator
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(per-unit factors, permutation) for every group, as :data:`TRANSFORMS` says (groups that are not scalable keep
    factor 1): what :func:`reparametrise` applies."""
    check_transform(transform)
    factor = check_factor(factor)
    out = []
    for group in groups:
        scales = np.ones(group.units)
        if transform != PERMUTE and group.scalable:
            scales = np.where(rng.random(group.units) < 0.5, factor, 1.0 / factor)
        order = np.arange(group.units)
        if transform != RESCALE:
            block = group.block or group.units
            order = np.concatenate([start + rng.permutation(block) for start in range(0, group.units, block)])
        out.append((scales, order))
    return out


def reparametrise(
    weights: Mapping[str, np.ndarray], groups: Sequence[UnitGroup], draws: Sequence[tuple[np.ndarray, np.ndarray]]
) -> dict[str, np.ndarray]:
    """A copy of ``weights`` with every group's units scaled and permuted as ``draws`` say. Every slot of a group is
    transformed alike (:func:`transform_entry`), so producers and readers stay matched and the network computes the
    same function, up to float rounding. Groups apply in order, so a slot may be in several; entries no group names are
    copied, each entry keeps its dtype."""
    if len(draws) != len(groups):
        raise ValueError(f"{len(groups)} groups but {len(draws)} draws")
    check_groups(weights, groups)
    out = {k: np.array(v, copy=True) for k, v in weights.items()}
    for group, (scales, order) in zip(groups, draws):
        for slot in group.slots:
            out[slot.key] = transform_entry(out[slot.key], slot, group.units, scales, order)
    return out


def transform_entry(entry: np.ndarray, slot: Slot, units: int, scales: np.ndarray, order: np.ndarray) -> np.ndarray:
    """A new ``entry`` (its dtype and shape) with the ``units`` that ``slot`` locates scaled by
    ``scales ** slot.power`` and reordered: new unit k is old unit ``order[k]``."""
    entry = np.asarray(entry)
    scaled = bool(np.any(np.asarray(scales) != 1.0))
    work = entry.astype(np.float64) if scaled else np.array(entry, copy=True)
    sub = slot_array(work, slot)
    index = [slice(None)] * sub.ndim
    index[slot.axis] = slice(slot.offset, slot.offset + units)
    moved = sub[tuple(index)]
    if scaled:
        shape = [1] * sub.ndim
        shape[slot.axis] = units
        moved = moved * np.power(scales, slot.power).reshape(shape)
    sub[tuple(index)] = np.take(moved, order, axis=slot.axis)  # sub is a view of work
    return work.reshape(entry.shape).astype(entry.dtype, copy=False)


def reparametrised(
    weights: Mapping[str, np.ndarray],
    groups: Sequence[UnitGroup],
    transform: str,
    factor: float,
    rng: np.random.Generator,
) -> tuple[dict[str, np.ndarray], dict]:
    """(the transformed model, record fields ``attack_transform``, ``attack_factor``, ``attack_units`` (units scaled
    or moved)): :func:`draw` then :func:`reparametrise`."""
    draws = draw(groups, transform, factor, rng)
    moved = sum(int(np.sum((s != 1.0) | (o != np.arange(o.size)))) for s, o in draws)
    fields = {"attack_transform": transform, "attack_factor": check_factor(factor), "attack_units": moved}
    return reparametrise(weights, groups, draws), fields


def slot_array(array: np.ndarray, slot: Slot) -> np.ndarray:
    """The (sub-)array of ``array`` that ``slot`` reads: a view where ``array`` can be viewed so."""
    try:
        view = array.reshape(slot.view) if slot.view is not None else array
    except ValueError:
        raise ValueError(f"entry {slot.key} of shape {array.shape} cannot be viewed as {slot.view}") from None
    return view[slot.part] if slot.part is not None else view


DECLARED = (
    Attack(RESCALE, "rescaled copy", ("factor", "per_receiver"), uses_knowledge=True),
    Attack(PERMUTE, "permuted copy", ("per_receiver",), uses_knowledge=True),
    Attack(RESCALE_PERMUTE, "rescaled and permuted copy", ("factor", "per_receiver"), uses_knowledge=True),
)
"""The reparametrisations as the catalogue lists them (whole models, transformed by the components)."""

"""Unit alignment before averaging: a received model's hidden units put in the order of the receiver's
own units (pure NumPy and SciPy, no FLARE).

The agreement score judges what a model predicts; Eq. 18 averages parameters. A network's hidden
units can be permuted without changing what it predicts
(:mod:`lightyear.algorithms.attacks.reparametrise`), so two models that predict alike can sit far
apart in parameter space, and their average is then a worse function than either. This rule
undoes such permutations before averaging, group by group in the order the network declares its
unit groups (input to output): every received unit is assigned to one own unit by a
maximum-weight matching (SciPy's ``linear_sum_assignment``) of the cosine similarity of what
produces them (incoming weights and bias, read after the earlier groups were aligned; cosine
similarity does not change under a unit's own rescaling), within each block of a group that only
permutes within blocks, with ``margin`` added to the similarity of every unit with the own unit at
its own position: a unit moves only where that gains more than ``margin`` in total.

Why the margin: honest models of the same seeded start keep their units in place, but after local
training with Adam the incoming weights of a wide layer are far from parallel across sites (cosine
0.31 on average between two digits sites' fc1 units after two rounds), and a plain matching
then reorders most of them (468 of 512, and 17 of the 64 conv2 channels, on that pair), which
wrecks the average it was meant to protect. With the default margin of 0.5, 2 of the 608 hidden
units of that pair moved.

What it guarantees, in what the site itself measures:

1. the aligned model computes the function the received model computes (a permutation of hidden
   units is an exact symmetry of the network), so it has the same agreement score and passes the
   same selection; only where it sits in parameter space changes;
2. the aligned model is averaged and validated as any received model is
   (:mod:`lightyear.algorithms.p2p.validated_update`): alignment adds no way into the average.

What it does: a permuted copy of the own model (what an attacker with full knowledge can send) is
put back in the own order, exactly, whenever the copy's units at each position are less similar to
the own units there than 1 - ``margin`` (measured: every such copy of a digits model, back to the
bit). A permuted copy of another site's model is not undone where that site's units are not similar
to the receiver's (the matching cannot tell the permutation from training); the validated
aggregation stays the bound on what it does. Rescaled units are left as they are: the validated
aggregation refuses the norms they bring.

Cost per received model: one similarity matrix per group (units x units x at most
``max_features`` multiply-adds, the producers' columns subsampled by a fixed draw beyond that), one
assignment per group (cubic in the units of a block) and one pass over the entries the groups name.
A network that declares no symmetry is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from lightyear.algorithms.attacks.reparametrise import UnitGroup, check_groups, slot_array, transform_entry

DEFAULT_MAX_FEATURES = 256
"""Columns of a group's producer matrix the similarity reads at most (a fixed subsample beyond)."""
DEFAULT_MARGIN = 0.5
"""What a unit must gain in cosine similarity, in total, to leave its position (module docstring)."""


def producer_matrix(weights: Mapping[str, np.ndarray], group: UnitGroup) -> np.ndarray:
    """units x features (the entries' dtype): every producer slot's entries of each unit (``power`` +1),
    side by side."""
    parts = []
    for slot in group.slots:
        if slot.power != 1:
            continue
        sub = slot_array(np.asarray(weights[slot.key]), slot)
        index = [slice(None)] * sub.ndim
        index[slot.axis] = slice(slot.offset, slot.offset + group.units)
        parts.append(np.moveaxis(sub[tuple(index)], slot.axis, 0).reshape(group.units, -1))
    return np.concatenate(parts, axis=1) if parts else np.zeros((group.units, 0))


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` (float32) with every non-zero row scaled to unit length (norms taken in float64)."""
    matrix = np.asarray(matrix, dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    return (matrix / np.where(norms > 0.0, norms, 1.0)[:, None]).astype(np.float32)


def match_units(similarity: np.ndarray, block: int | None, margin: float = 0.0) -> np.ndarray:
    """``order`` with ``order[k]`` = the received unit placed at own position k: the assignment of
    largest total similarity (rows: received units, columns: own units) with ``margin`` added to
    every unit staying where it is, within blocks of ``block``."""
    units = similarity.shape[0]
    similarity = similarity + margin * np.eye(units)
    size = block or units
    order = np.arange(units)
    for start in range(0, units, size):
        rows, cols = linear_sum_assignment(similarity[start : start + size, start : start + size], maximize=True)
        order[start + cols] = start + rows
    return order


class UnitAligner:
    """Aligns received models to one own model (module docstring); what it needs of the own model
    (each group's producers, column subsample and unit rows) is taken once."""

    def __init__(
        self,
        own: Mapping[str, np.ndarray],
        groups: Sequence[UnitGroup],
        max_features: int = DEFAULT_MAX_FEATURES,
        margin: float = DEFAULT_MARGIN,
    ):
        check_groups(own, groups)
        self.own, self.groups, self.margin = own, list(groups), float(margin)
        self.columns, self.own_rows = [], []
        for index, group in enumerate(self.groups):
            mine = producer_matrix(own, group)
            columns = None
            if mine.shape[1] > max_features:  # a fixed subsample of the columns: the same for every model
                columns = np.sort(np.random.default_rng(index).choice(mine.shape[1], max_features, replace=False))
                mine = mine[:, columns]
            self.columns.append(columns)
            self.own_rows.append(unit_rows(mine))

    def orders(self, received: Mapping[str, np.ndarray]) -> tuple[list[np.ndarray], dict]:
        """(every group's permutation, the entries of ``received`` the groups name, moved in turn)."""
        check_groups(received, self.groups)
        orders: list[np.ndarray] = []
        moved: dict[str, np.ndarray] = {}  # entries of `received` after the groups aligned so far
        for group, columns, mine in zip(self.groups, self.columns, self.own_rows):
            theirs = producer_matrix({s.key: moved.get(s.key, received[s.key]) for s in group.slots}, group)
            theirs = unit_rows(theirs if columns is None else theirs[:, columns])
            similarity = np.nan_to_num(theirs @ mine.T, nan=-1.0, posinf=-1.0, neginf=-1.0)
            order = match_units(similarity, group.block, self.margin)
            orders.append(order)
            if np.any(order != np.arange(group.units)):
                for slot in group.slots:
                    entry = moved.get(slot.key, received[slot.key])
                    moved[slot.key] = transform_entry(entry, slot, group.units, np.ones(group.units), order)
        return orders, moved

    def __call__(self, received: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int]:
        """(``received`` aligned to the own model, how many units it moved to another position)."""
        orders, entries = self.orders(received)
        moved = sum(int(np.sum(order != np.arange(order.size))) for order in orders)
        return {k: entries[k] if k in entries else np.array(v, copy=True) for k, v in received.items()}, moved


def aligned(
    own: Mapping[str, np.ndarray],
    received: Mapping[str, np.ndarray],
    groups: Sequence[UnitGroup],
    max_features: int = DEFAULT_MAX_FEATURES,
    margin: float = DEFAULT_MARGIN,
) -> tuple[dict[str, np.ndarray], int]:
    """(``received`` aligned to ``own``, how many units it moved to another position), in ``received``'s dtypes."""
    return UnitAligner(own, groups, max_features, margin)(received)

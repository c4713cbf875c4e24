"""Aggregates around an own model as flat vectors, built from the peers' models as they are (pure).

:class:`FlatModels` holds the own model's floating entries once as a flat vector in its float type and builds each
candidate theta + weight * sum_j (theta_j - theta) of the validated aggregation in one new vector, each peer's
difference taken entry by entry (into it or one reused scratch vector): a few model sizes of memory whatever the
number of peers. Integer entries keep the own value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lightyear.algorithms.aggregation import Weights
from lightyear.algorithms.vectors import is_float_entry


class FlatModels:
    """The own model as a flat vector, and aggregates of the peers' models around it (module docstring)."""

    def __init__(self, own: Weights, models: Mapping[str, Weights]):
        self.own, self.models = own, models
        self.keys = [k for k, v in own.items() if is_float_entry(v)]
        self.dtype = np.result_type(*[np.asarray(own[k]).dtype for k in self.keys]) if self.keys else np.float64
        self.base = self.flat(own)
        sizes = [np.asarray(own[k]).size for k in self.keys]
        self.starts = np.cumsum([0] + sizes[:-1]).astype(np.int64)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.own_norms = self.norms(self.base)
        self._scratch: np.ndarray | None = None

    def flat(self, model: Weights) -> np.ndarray:
        if not self.keys:
            return np.zeros(0, dtype=self.dtype)
        return np.concatenate([np.asarray(model[k], dtype=self.dtype).ravel() for k in self.keys])

    def norms(self, vector: np.ndarray) -> np.ndarray:
        """The L2 norm of every entry's segment of ``vector`` (an entry whose squares overflow: infinite)."""
        with np.errstate(over="ignore"):
            squares = [float(np.dot(vector[a : a + n], vector[a : a + n])) for a, n in zip(self.starts, self.sizes)]
        return np.sqrt(np.asarray(squares, dtype=np.float64))

    def _scratch_vector(self) -> np.ndarray:
        """The one vector reused for every difference that is not kept (made on first use)."""
        if self._scratch is None:
            self._scratch = np.empty_like(self.base)
        return self._scratch

    def _difference(self, peer: str, out: np.ndarray) -> np.ndarray:
        """theta_peer - theta, written into ``out``."""
        model = self.models[peer]
        for key, a, n in zip(self.keys, self.starts, self.sizes):
            entry = np.asarray(model[key]).reshape(-1)
            np.subtract(entry, self.base[a : a + n], out=out[a : a + n], dtype=self.dtype)
        return out

    def aggregate(self, peers: Sequence[str], weight: float) -> np.ndarray:
        """theta + weight * sum_j (theta_j - theta) over ``peers``, differences summed in the order given, as a new
        vector."""
        total = np.empty_like(self.base) if peers else np.zeros_like(self.base)
        for n, peer in enumerate(peers):
            if n == 0:
                self._difference(peer, total)
                continue
            total += self._difference(peer, self._scratch_vector())
        return self.around(total, weight)

    def around(self, total: np.ndarray, weight: float) -> np.ndarray:
        """theta + weight * ``total``, written into ``total`` (a sum of differences) and returned."""
        total *= weight
        total += self.base
        return total

    def summed_with_growths(self, peers: Sequence[str], at: float) -> tuple[np.ndarray, dict[str, float]]:
        """(sum_j (theta_j - theta) over ``peers``, peer -> :meth:`growth` of theta + at * (theta_j - theta)), each
        difference taken once; the sum is, to the bit, the one :meth:`aggregate` scales."""
        total = np.empty_like(self.base) if peers else np.zeros_like(self.base)
        growths = {}
        for n, peer in enumerate(peers):
            if n == 0:
                point = np.multiply(self._difference(peer, total), at, out=self._scratch_vector())
            else:
                point = self._difference(peer, self._scratch_vector())
                total += point
                point *= at
            point += self.base
            growths[peer] = self.growth(point)
        return total, growths

    def growth(self, vector: np.ndarray) -> float:
        """The largest ||vector[k]|| / ||own[k]|| - 1 over the entries not all zero in the own model (0: none
        grew)."""
        mine = self.own_norms > 0.0
        if not mine.any():
            return 0.0
        return max(0.0, float(np.max(self.norms(vector)[mine] / self.own_norms[mine])) - 1.0)

    def model(self, vector: np.ndarray) -> dict[str, np.ndarray]:
        """``vector`` as a model: views of it in the own entries' shapes and dtypes."""
        out = {}
        for key, start, size in zip(self.keys, self.starts, self.sizes):
            mine = np.asarray(self.own[key])
            out[key] = vector[start : start + size].reshape(mine.shape).astype(mine.dtype, copy=False)
        return {k: out[k] if k in out else np.array(v, copy=True) for k, v in self.own.items()}

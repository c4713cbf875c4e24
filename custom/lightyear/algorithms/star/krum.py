"""Krum and multi-Krum (Blanchard, El Mhamdi, Guerraoui, Stainer, "Machine Learning with
Adversaries: Byzantine Tolerant Gradient Descent", NeurIPS 2017), pure NumPy.

Among n vectors of which at most f are Byzantine, each vector i gets the score (Section 4,
definition of Krum)

    score(i) = sum over the n - f - 2 vectors j != i closest to i of ||x_i - x_j||^2

Krum returns the vector with the lowest score; multi-Krum (Section 5) averages the m vectors
with the lowest scores (m = 1 is Krum, m = n is plain averaging; m = n - f is the usual choice).

The paper's guarantee needs **n > 2f + 2** (Proposition 1). This module enforces it: a
setting that breaks it raises ValueError. The LIGHTYEAR authors' code used f = n // 2, which
always breaks it (for n = 10: 2*5 + 2 = 12 > 10, and n - f - 2 = 3 neighbours); here the
default is instead :func:`default_f`, the largest f the paper allows.

Distances between full models equal distances between their updates against one common
reference (the reference cancels), so Krum can be fed either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lightyear.algorithms.aggregation import weighted_average
from lightyear.algorithms.vectors import as_matrix, flatten, squared_distance_matrix
from lightyear.checks import int_in, positive_int


def default_f(n: int) -> int:
    """The largest number of tolerated Byzantine sites f with n > 2f + 2, i.e. (n - 3) // 2 (0 if n < 5).

    n = 3 or 4 -> 0, n = 5 or 6 -> 1, n = 10 -> 3. (The authors' code used n // 2, which
    violates the paper's requirement; see the module docstring.)
    """
    positive_int("n (number of sites)", n)
    return max(0, (n - 3) // 2)


def check_krum_settings(n: int, f: int, m: int) -> None:
    """Raise ValueError naming the fix unless f >= 0, n > 2f + 2 and 1 <= m <= n."""
    int_in("f (number of Byzantine sites tolerated)", f, 0)
    if n <= 2 * f + 2:
        if n < 3:
            fix = "Krum needs at least 3 sites"
        else:
            fix = f"use f <= {default_f(n)} (default_f({n})) or more sites"
        raise ValueError(f"Krum needs n > 2f + 2 (Blanchard et al. 2017, Prop. 1); got n={n}, f={f}: {fix}")
    int_in("m (number of models multi-Krum averages)", m, 1, n)


def krum_scores(vectors, f: int | None = None) -> np.ndarray:
    """The Krum score of each vector: the sum of its n - f - 2 smallest squared distances to the others.

    ``vectors`` is an ``(n, d)`` array or a sequence of vectors; ``f`` defaults to :func:`default_f`.
    """
    x = as_matrix(vectors)
    n = x.shape[0]
    f = default_f(n) if f is None else f
    check_krum_settings(n, f, 1)
    dist = squared_distance_matrix(x)
    k = n - f - 2
    scores = np.empty(n)
    for i in range(n):
        others = np.delete(dist[i], i)
        scores[i] = np.sort(others)[:k].sum()
    return scores


def krum_select(vectors, f: int | None = None, m: int = 1) -> list[int]:
    """Indices of the m vectors with the lowest Krum scores, lowest first; ties go to the lower index.

    m = 1 is Krum's choice; m > 1 is multi-Krum's set. ``f`` defaults to :func:`default_f`.
    Raises ValueError unless n > 2f + 2 and 1 <= m <= n.
    """
    x = as_matrix(vectors)
    n = x.shape[0]
    f = default_f(n) if f is None else f
    check_krum_settings(n, f, m)
    scores = krum_scores(x, f)
    order = np.argsort(scores, kind="stable")  # stable: equal scores keep index order
    return [int(i) for i in order[:m]]


def krum(
    models: Sequence[Mapping[str, np.ndarray]], f: int | None = None, m: int = 1
) -> tuple[dict[str, np.ndarray], list[int]]:
    """(Multi-)Krum on whole models: the uniform mean of the m selected models, and their indices.

    Models are compared by :func:`~lightyear.algorithms.vectors.flatten` (floating entries).
    The mean keeps each floating entry's dtype; integer entries (counters) come from the
    selected model with the lowest score. ``f`` defaults to :func:`default_f` (len(models)).
    """
    if not models:
        raise ValueError("krum needs at least one model")
    selected = krum_select([flatten(model) for model in models], f, m)
    mean = weighted_average([models[i] for i in selected])
    return mean, selected

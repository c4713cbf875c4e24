"""Krum and multi-Krum (Blanchard, El Mhamdi, Guerraoui, Stainer, "Machine Learning with Adversaries: Byzantine
Tolerant Gradient Descent", NeurIPS 2017), pure NumPy.

score(i) = sum of ||x_i - x_j||^2 over the n - f - 2 vectors j != i closest to i (Section 4); Krum picks the lowest
score, multi-Krum (Section 5) averages the m lowest. The guarantee needs n > 2f + 2 (Proposition 1), enforced here
(the LIGHTYEAR authors' f = n // 2 always breaks it). Full models or their updates against one reference give the
same distances.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lightyear.algorithms.aggregation import weighted_average
from lightyear.algorithms.vectors import as_matrix, flatten, squared_distance_matrix
from lightyear.checks import int_in, positive_int


def default_f(n: int) -> int:
    """The largest f with n > 2f + 2: (n - 3) // 2, 0 if n < 5."""
    positive_int("n (number of sites)", n)
    return max(0, (n - 3) // 2)


def check_krum_settings(n: int, f: int, m: int) -> None:
    """Raise ValueError naming the fix unless f >= 0, n > 2f + 2 and 1 <= m <= n."""
    int_in("f (number of Byzantine sites tolerated)", f, 0)
    if n <= 2 * f + 2:
        fix = "Krum needs at least 3 sites" if n < 3 else f"use f <= {default_f(n)} (default_f({n})) or more sites"
        raise ValueError(f"Krum needs n > 2f + 2 (Blanchard et al. 2017, Prop. 1); got n={n}, f={f}: {fix}")
    int_in("m (number of models multi-Krum averages)", m, 1, n)


def krum_scores(vectors, f: int | None = None) -> np.ndarray:
    """The Krum score of each vector: the sum of its n - f - 2 smallest squared distances to the others (``f``
    default :func:`default_f`)."""
    x = as_matrix(vectors)
    n = x.shape[0]
    f = default_f(n) if f is None else f
    check_krum_settings(n, f, 1)
    dist = squared_distance_matrix(x)
    k = n - f - 2
    return np.array([np.sort(np.delete(dist[i], i))[:k].sum() for i in range(n)], dtype=np.float64)


def krum_select(vectors, f: int | None = None, m: int = 1) -> list[int]:
    """Indices of the m vectors with the lowest Krum scores, lowest first, ties to the lower index (m = 1: Krum);
    ValueError unless n > 2f + 2 and 1 <= m <= n."""
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
    """(Multi-)Krum on whole models compared by their floating entries: the uniform mean of the m selected (counters
    from the lowest-scored) and their indices."""
    if not models:
        raise ValueError("krum needs at least one model")
    selected = krum_select([flatten(model) for model in models], f, m)
    mean = weighted_average([models[i] for i in selected])
    return mean, selected

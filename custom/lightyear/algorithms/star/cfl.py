"""Byzantine-robust use of Clustered Federated Learning (Sattler, Mueller, Samek, "Clustered Federated Learning:
Model-Agnostic Distributed Multitask Optimization Under Privacy Constraints", IEEE TNNLS 2020, arXiv:1910.01991).

CFL's bipartitioning step splits the clients into the two groups minimising the largest cross-group cosine
similarity (its reference code: complete linkage on the precomputed matrix); adversarial clients land in a cluster
of their own, so the larger cluster is averaged and the smaller discarded, also in rounds without attackers. Here
complete linkage runs on 1 - alpha_ij (the LIGHTYEAR authors' code clustered the matrix rows as Euclidean features
instead). Ties go by the sorted site names.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lightyear.algorithms.aggregation import weighted_average
from lightyear.algorithms.vectors import cosine_similarity_matrix, flatten, stack


def complete_linkage_bipartition(distance: np.ndarray) -> tuple[list[int], list[int]]:
    """Two clusters of indices from agglomerative complete linkage on a symmetric ``(n, n)`` distance matrix, n >= 2.
    Merges the two clusters whose farthest members are closest (ties: the first pair) until two are left, returned as
    sorted index lists, the one holding index 0 first."""
    d = np.array(distance, dtype=np.float64)
    n = d.shape[0]
    if d.ndim != 2 or d.shape != (n, n) or n < 2:
        raise ValueError(f"need a square distance matrix of at least 2 x 2, got shape {d.shape}")
    if not np.allclose(d, d.T):
        raise ValueError("the distance matrix must be symmetric")
    clusters = [[i] for i in range(n)]
    link = d.copy()  # link[a, b]: complete-linkage distance between clusters a and b
    np.fill_diagonal(link, np.inf)
    while len(clusters) > 2:
        a, b = np.unravel_index(int(np.argmin(link)), link.shape)  # row-major: first pair wins ties
        a, b = min(a, b), max(a, b)
        merged = np.maximum(link[a], link[b])  # Lance-Williams update for complete linkage
        link[a, :], link[:, a] = merged, merged
        link[a, a] = np.inf
        link = np.delete(np.delete(link, b, axis=0), b, axis=1)
        clusters[a] = sorted(clusters[a] + clusters.pop(b))
    return (clusters[0], clusters[1]) if 0 in clusters[0] else (clusters[1], clusters[0])


def cfl_bipartition(updates: Mapping[str, np.ndarray]) -> tuple[list[str], list[str]]:
    """(majority, minority) of the sites (each sorted) from their flattened updates; equal sizes: the cluster with the
    first site is the majority; one site: ([site], []). Raises ValueError on non-finite updates."""
    names = sorted(updates)
    x = stack(updates, name="updates")
    if len(names) == 1:
        return names, []
    distance = 1.0 - cosine_similarity_matrix(x)
    np.fill_diagonal(distance, 0.0)
    first, second = complete_linkage_bipartition(distance)  # first holds index 0, i.e. names[0]
    if len(second) > len(first):
        first, second = second, first
    return [names[i] for i in first], [names[i] for i in second]


def cfl(
    models: Mapping[str, Mapping[str, np.ndarray]], reference: Mapping[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], list[str], list[str]]:
    """The CFL baseline on whole models: (uniform mean of the majority's models, majority, minority), updates taken
    against ``reference``, the round's global model; counters from the first majority site."""
    if not models:
        raise ValueError("cfl needs at least one model")
    ref = flatten(reference)
    majority, minority = cfl_bipartition({s: flatten(m) - ref for s, m in models.items()})
    return weighted_average([models[s] for s in majority]), majority, minority

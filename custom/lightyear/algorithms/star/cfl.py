"""Byzantine-robust use of Clustered Federated Learning (Sattler, Mueller, Samek, "Clustered
Federated Learning: Model-Agnostic Distributed Multitask Optimization Under Privacy
Constraints", IEEE TNNLS 2020, arXiv:1910.01991), pure NumPy.

CFL splits the clients into the two groups whose updates are least similar across the split:
with alpha_ij the cosine similarity of the updates of i and j, the bipartition minimises the
largest cross-group similarity max_{i in c1, j in c2} alpha_ij (the paper's bipartitioning
step; its reference code solves it by complete-linkage agglomerative clustering on the
*precomputed* similarity matrix). The paper observes that clients sending adversarial updates
land in a cluster of their own; as a robust baseline the larger cluster is kept and averaged
uniformly, the smaller one discarded.

This module runs complete linkage itself on the precomputed distance matrix 1 - alpha_ij
(a monotone map of -alpha, so the merges are the same) until two clusters remain. The LIGHTYEAR
authors' code omitted the "precomputed" setting and clustered the rows of the similarity
matrix as Euclidean feature vectors; that is not done here.

Made explicit: the minority is always discarded, also in rounds without any attacker (with
2 sites, one of them). Ties -- equal cluster sizes, or equal linkage distances while merging --
go by the sorted order of the site names: equal-distance merges take the first pair, and of
two equal-size clusters the one holding the lexicographically first site is the majority.
Zero updates have cosine 0 with everything (see ``vectors``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lightyear.algorithms.aggregation import weighted_average
from lightyear.algorithms.vectors import cosine_similarity_matrix, flatten, stack


def complete_linkage_bipartition(distance: np.ndarray) -> tuple[list[int], list[int]]:
    """Two clusters of indices from agglomerative complete linkage on a precomputed distance matrix.

    Repeatedly merges the two clusters whose farthest members are closest (ties: the first
    pair in index order) until two clusters are left; returns them as sorted index lists,
    the one holding index 0 first. Needs a symmetric ``(n, n)`` matrix with n >= 2.
    """
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
    """(majority, minority): the larger and the smaller cluster of sites, each sorted.

    ``updates`` maps each site to its flattened update (model minus the global model it started
    from). Equal sizes: the cluster with the lexicographically first site is the majority.
    A single site gives ([site], []). Raises ValueError on non-finite updates.
    """
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
    """The CFL baseline on whole models: (uniform mean of the majority's models, majority, minority).

    Updates are ``flatten(model) - flatten(reference)``, with ``reference`` the global model
    the round started from. Integer entries (counters) come from the first majority site.
    """
    if not models:
        raise ValueError("cfl needs at least one model")
    ref = flatten(reference)
    majority, minority = cfl_bipartition({s: flatten(m) - ref for s, m in models.items()})
    return weighted_average([models[s] for s in majority]), majority, minority

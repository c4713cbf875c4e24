"""DeFTA's trusted averaging and its asynchronous variant (pure NumPy, no FLARE).

Reference: Zhou et al., "DeFTA: A Plug-and-Play Decentralized Replacement for FedAvg": Section 3.2 (Eq. 1, Theorem 3.3,
Corollary 3.3.2, Algorithm 2) for the weights, Section 3.4 for AsyncDeFTA; the trust system of Section 3.3 is in
``lightyear.algorithms.p2p.defta_trust`` (re-exported here). The own model is in the aggregated set S, as in the
combine-then-adapt diffusion the paper builds on, so a site's out-degree d_j counts its self-loop
(:func:`defta_out_degrees`). AsyncDeFTA defines no staleness weighting: a site aggregates, at its own pace, the newest
model it holds from each sampled peer with the same weights.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from lightyear.algorithms.model_check import check_models
from lightyear.algorithms.p2p.defta_trust import DeftaTrust, TrustDecision, crelu, trust_sample_weights
from lightyear.algorithms.vectors import Weights

__all__ = [  # one import point for all of DeFTA
    "DeftaTrust",
    "TrustDecision",
    "async_inputs",
    "crelu",
    "defta_aggregate",
    "defta_out_degrees",
    "trust_sample_weights",
    "trusted_weights",
]


def defta_out_degrees(graph: Mapping[str, Sequence[str]], self_loop: bool = True) -> dict[str, int]:
    """d_j for every site of a graph of out-neighbours: len(graph[j]), plus 1 for the self-loop when ``self_loop``
    (matching ``defta_aggregate(include_self=True)``)."""
    return {site: len(targets) + int(self_loop) for site, targets in graph.items()}


def trusted_weights(
    dataset_sizes: Mapping[str, int], out_degrees: Mapping[str, int], peers: Iterable[str]
) -> dict[str, float]:
    """p_{i,j} = (|D_j| / d_j) / sum_{k in peers} (|D_k| / d_k) for each j in ``peers`` (DeFTA Corollary 3.3.2).
    Dividing by the out-degree undoes FedAvg's over-counting of a site that sends to many (Corollary 3.3.1). The
    weights sum to 1; a ValueError if a site lacks a size or degree, or either is < 1."""
    names = list(peers)
    if not names:
        raise ValueError("trusted_weights needs at least one site to weight")
    if len(set(names)) != len(names):
        raise ValueError(f"sites {names} contain duplicates; list each site once")
    ratio = {}
    for site in names:
        for table, what in ((dataset_sizes, "dataset size"), (out_degrees, "out-degree")):
            value = table.get(site)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{what} of {site!r} must be an integer >= 1, got {value!r}")
        ratio[site] = dataset_sizes[site] / out_degrees[site]
    total = sum(ratio.values())
    return {site: r / total for site, r in ratio.items()}


def defta_aggregate(
    own_site: str,
    own: Weights,
    received: Mapping[str, Weights],
    dataset_sizes: Mapping[str, int],
    out_degrees: Mapping[str, int],
    include_self: bool = True,
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """w_i = sum_{j in S} p_{i,j} w~_j over S = received peers (+ the own site) (DeFTA Algorithm 2). Returns the new
    model and the weights used, own site included (feed the peers' to ``DeftaTrust.observe``). Integer entries keep the
    own value; with nothing to aggregate the own model is kept (a copy). Raises a ValueError for a malformed or
    non-finite model or a missing size or degree."""
    if own_site in received:
        raise ValueError(f"received holds the own site {own_site!r}; pass the own model as own")
    check_models(own, received)
    models = {own_site: own} if include_self else {}
    models.update({p: received[p] for p in sorted(received)})
    if not models:
        return {k: np.array(v, copy=True) for k, v in own.items()}, {}
    weights = trusted_weights(dataset_sizes, out_degrees, models)
    out = {}
    for key, mine in own.items():
        mine = np.asarray(mine)
        if not np.issubdtype(mine.dtype, np.floating):
            out[key] = np.array(mine, copy=True)
            continue
        acc = np.zeros(mine.shape, dtype=np.float64)
        for site, model in models.items():
            acc += weights[site] * np.asarray(model[key], dtype=np.float64)
        out[key] = acc.astype(mine.dtype)
    return out, weights


def async_inputs(
    sampled: Iterable[str], latest: Mapping[str, tuple[int, Weights]], round_index: int
) -> tuple[dict[str, Weights], dict[str, int]]:
    """AsyncDeFTA's inputs to one aggregation (Section 3.4): the newest model held from each sampled peer. ``latest``
    maps a peer to (the sender's round when it sent the model, the model). Returns the models and their staleness
    ``round_index - sent_round`` (for the records only)."""
    models, staleness = {}, {}
    for peer in sorted(sampled):
        if peer in latest:
            sent_round, model = latest[peer]
            models[peer] = model
            staleness[peer] = int(round_index) - int(sent_round)
    return models, staleness

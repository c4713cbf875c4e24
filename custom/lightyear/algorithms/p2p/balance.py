"""BALANCE: Byzantine-robust averaging through local similarity (pure NumPy, no FLARE).

Reference: Fang et al., "Byzantine-Robust Decentralized Federated Learning", ACM CCS 2024. A neighbour's model is
accepted within a radius proportional to the own model's L2 norm (over all floating entries), shrinking over the
rounds; the site mixes its own model with the accepted ones' mean. Unlike the LIGHTYEAR authors' code, the weights
sum to 1 (alpha own, (1 - alpha) / |S| each accepted) and lambda(t) = t / T, as in the paper (pass ``t + 1`` for
the authors' radius).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from lightyear.algorithms.model_check import check_models
from lightyear.algorithms.vectors import Weights, flatten, float_keys, unflatten
from lightyear.checks import int_in, non_negative, number_in, positive_number


def check_balance_settings(t, T, gamma=0.3, kappa=1.0, alpha=0.5) -> None:
    """Raise a ValueError naming the setting unless gamma > 0, kappa >= 0, alpha in [0, 1], T an integer >= 1 and
    t >= 0 (the paper: gamma 0.3, kappa 1, alpha 0.5)."""
    positive_number("gamma", gamma, note="the paper uses 0.3")
    non_negative("kappa", kappa, note="0 keeps the radius constant; the paper uses 1")
    number_in("alpha", alpha, 0.0, 1.0, note="the weight of the own model; the paper uses 0.5")
    int_in("T", T, 1, note="the total number of rounds")
    non_negative("t", t, note="the round, counted from 0")


def balance_threshold(own_norm: float, t: float, T: int, gamma: float = 0.3, kappa: float = 1.0) -> float:
    """gamma * exp(-kappa * t / T) * ||theta_i||: neighbour j is accepted when ||theta_i - theta_j|| is at most this
    (BALANCE's acceptance condition, Fang et al., CCS 2024); ``t`` counts rounds from 0."""
    check_balance_settings(t, T, gamma, kappa)
    non_negative("own_norm", own_norm)
    return float(gamma * math.exp(-kappa * (t / T)) * own_norm)


def balance_update(
    own: Weights,
    received: Mapping[str, Weights],
    t: float,
    T: int,
    gamma: float = 0.3,
    kappa: float = 1.0,
    alpha: float = 0.5,
) -> tuple[dict[str, np.ndarray], list[str], dict[str, float]]:
    """BALANCE aggregation (Fang et al., CCS 2024).

    S_i = {j : ||theta_i - theta_j|| <= gamma * exp(-kappa * t / T) * ||theta_i||}
    theta_i <- alpha * theta_i + (1 - alpha) * (1 / |S_i|) * sum_{j in S_i} theta_j

    Returns ``(new_model, accepted, distances)``: the sorted S_i and every peer's distance; with S_i empty, a copy of
    the own model. Raises a ValueError for a bad setting or a malformed or non-finite model.
    """
    check_balance_settings(t, T, gamma, kappa, alpha)
    check_models(own, received)
    keys = float_keys(own)
    mine = flatten(own, keys)
    threshold = balance_threshold(float(np.linalg.norm(mine)), t, T, gamma, kappa)
    distances = {}
    accepted = []
    vectors = {}
    for peer in sorted(received):
        vectors[peer] = flatten(received[peer], keys)
        distances[peer] = float(np.linalg.norm(mine - vectors[peer]))
        if distances[peer] <= threshold:
            accepted.append(peer)
    if not accepted:
        return unflatten(mine, own, keys), accepted, distances
    mean = np.mean([vectors[p] for p in accepted], axis=0)
    return unflatten(alpha * mine + (1.0 - alpha) * mean, own, keys), accepted, distances

"""Decentralised FedAvg: a site averages its own model with its neighbours' (pure NumPy, no FLARE)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lightyear.algorithms.aggregation import Weights, weighted_average
from lightyear.algorithms.model_check import check_models


def p2p_average(own: Weights, received: Sequence[Weights]) -> dict[str, np.ndarray]:
    """theta_i <- (theta_i + sum_{j in R_i} theta_j) / (|R_i| + 1) over the models received (FedAvg, McMahan et al.
    2017, with equal weights on the neighbourhood). Integer entries keep the own value; a ValueError if any model is
    malformed or not finite."""
    check_models(own, {f"received[{n}]": m for n, m in enumerate(received)})
    return weighted_average([own, *received])

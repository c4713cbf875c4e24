"""LIGHTYEAR's aggregation: a step towards the selected peers' mean that decays with the rounds (Eq. 18 of
"Don't Reach for the Stars"; pure NumPy, no FLARE). Integer entries keep the own value."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lightyear.algorithms.aggregation import Weights
from lightyear.algorithms.vectors import is_float_entry
from lightyear.checks import number_in


def check_gamma(gamma: float) -> float:
    """Raise a ValueError naming the fix if gamma is not a number in (0, 1]."""
    note = "1 = plain FedAvg over the selected peers; the paper uses 0.95"
    return number_in("gamma", gamma, 0.0, 1.0, low_open=True, note=note)


def decayed_mean_update(own: Weights, selected: Sequence[Weights], gamma: float, t: int) -> dict[str, np.ndarray]:
    """theta_i <- theta_i + gamma^t * 1/|S_i| * sum_{j in S_i} (theta_j - theta_i) (Eq. 18). ``t`` counts aggregations
    from 0, so the first step (gamma^0 = 1) reaches the peers' mean, as every step does with gamma = 1. The own model
    is not in the mean; an empty selection returns it unchanged."""
    check_gamma(gamma)
    if t < 0:
        raise ValueError(f"round index t must be >= 0, got {t}")
    for n, peer in enumerate(selected):  # shapes here (a pass over no values); finiteness on the result
        for key, mine in own.items():
            if key not in peer or np.shape(peer[key]) != np.shape(mine):
                found = np.shape(peer[key]) if key in peer else "nothing"
                raise ValueError(
                    f"cannot aggregate: selected[{n}] has {found} for {key!r}, the own model the shape "
                    f"{np.shape(mine)}; reject such models before aggregating (lightyear.algorithms.model_check)"
                )
    out = {k: np.array(v, copy=True) for k, v in own.items()}
    if not selected:
        return out
    step = gamma**t
    for key, mine in own.items():
        if not is_float_entry(mine):
            continue
        acc = np.zeros(np.shape(mine), dtype=np.float64)
        for peer in selected:
            acc += np.asarray(peer[key], dtype=np.float64) - mine
        out[key] = (mine + step * acc / len(selected)).astype(np.asarray(mine).dtype)
        if not np.isfinite(out[key]).all():  # NaN or Inf in a model, which any sum carries to the result
            raise ValueError(
                f"cannot aggregate: the Eq. 18 step of {key!r} is not finite (a model holds NaN or Inf there); "
                "reject such models before aggregating (lightyear.algorithms.model_check)"
            )
    return out

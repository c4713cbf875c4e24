"""The model each site's result stands for on the star server, and the checks it passes before a rule sees it;
nothing in a result is trusted: :func:`result_model` names every problem instead of raising."""

from __future__ import annotations

import math

import numpy as np
from nvflare.apis.dxo import DataKind
from nvflare.apis.shareable import Shareable

from lightyear.algorithms.model_check import model_problems
from lightyear.star.messages import read_result


def valid_num_samples(value) -> bool:
    number = not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating))
    return number and math.isfinite(value) and value > 0


def capped_counts(counts: dict[str, float], max_ratio: float | None) -> dict[str, float]:
    """Each claimed sample count capped at ``max_ratio`` x the round's median: no site takes over a weighted mean."""
    if not counts or max_ratio is None:
        return dict(counts)
    cap = max_ratio * float(np.median(list(counts.values())))
    return {s: min(float(n), cap) for s, n in counts.items()}


def added(sent: dict, diff: dict, reference: dict) -> dict:
    """sent + diff in float64 for the floating entries; the integer entries are ``sent``'s."""
    out = {}
    for key, ref in reference.items():
        if np.issubdtype(ref.dtype, np.floating):
            out[key] = np.asarray(sent[key], dtype=np.float64) + np.asarray(diff[key], dtype=np.float64)
        else:
            out[key] = np.asarray(sent[key])
    return out


def result_model(
    result: Shareable, sent: dict, reference: dict, max_abs: float | None
) -> tuple[dict | None, object, list[str]]:
    """(model, claimed sample count, problems) of one OK result, checked against ``reference`` (keys, shapes,
    dtypes); a WEIGHT_DIFF is checked, added to ``sent`` and the sum checked again (it may overflow)."""
    unpacked = read_result(result)
    if unpacked.problem:
        return None, None, [unpacked.problem]
    problems = model_problems(unpacked.data, reference, max_abs)
    if problems or unpacked.kind == DataKind.WEIGHTS:
        return unpacked.data, unpacked.num_samples, problems
    weights = added(sent, unpacked.data, reference)
    return weights, unpacked.num_samples, model_problems(weights, reference, max_abs)

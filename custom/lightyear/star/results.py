"""Reading the sites' results on the star server: the model each result stands for, and the
checks every result passes before a rule sees it.

A result is a FLARE DXO (:mod:`lightyear.star.messages`) of kind ``WEIGHTS`` (the trained
model) or ``WEIGHT_DIFF`` (trained minus the model the site was sent, which is added back here).
Nothing in a result is trusted: :func:`result_model` names every problem instead of raising.
"""

from __future__ import annotations

import math

import numpy as np
from nvflare.apis.dxo import DataKind
from nvflare.apis.shareable import Shareable

from lightyear.algorithms.model_check import model_problems
from lightyear.star.messages import read_result


def valid_num_samples(value) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float, np.integer, np.floating))
        and math.isfinite(value)
        and value > 0
    )


def capped_counts(counts: dict[str, float], max_ratio: float | None) -> dict[str, float]:
    """Cap each site's claimed sample count at ``max_ratio`` x the round's median claim, so that
    one site cannot take over a sample-weighted mean by claiming a huge count."""
    if not counts or max_ratio is None:
        return dict(counts)
    cap = max_ratio * float(np.median(list(counts.values())))
    return {s: min(float(n), cap) for s, n in counts.items()}


def added(sent: dict, diff: dict, reference: dict) -> dict:
    """sent + diff for the floating entries (in float64, cast to the reference's dtypes later);
    integer entries are taken from ``sent``."""
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
    """(model, claimed sample count, problems) of one OK result; a WEIGHT_DIFF is checked, then
    added to the model the site was sent (``sent``), and the sum checked again (it may overflow).
    ``reference`` (the global model) fixes the keys, shapes and dtypes a result must have."""
    unpacked = read_result(result)
    if unpacked.problem:
        return None, None, [unpacked.problem]
    problems = model_problems(unpacked.data, reference, max_abs)
    if problems or unpacked.kind == DataKind.WEIGHTS:
        return unpacked.data, unpacked.num_samples, problems
    weights = added(sent, unpacked.data, reference)
    return weights, unpacked.num_samples, model_problems(weights, reference, max_abs)

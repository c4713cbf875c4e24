"""A round's results on the star server, from FLARE's tasks to the models a rule sees: :func:`answered`, then (attack
jobs) :func:`crafted`, then :func:`checked`. Problems go to ``warn`` (the controller's log), never raised."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from nvflare.apis.controller_spec import Task
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.shareable import Shareable

from lightyear.flare import constants as C
from lightyear.star.adversary import SimulatedAdversary
from lightyear.star.results import capped_counts, result_model, valid_num_samples


def _ok(result) -> bool:
    return isinstance(result, Shareable) and result.get_return_code() == ReturnCode.OK


def sent_models(tasks: list[Task], sent: dict | None, global_weights: dict) -> dict:
    """The model each site of ``tasks`` was sent: its entry in ``sent``, else the global model."""
    return {ct.client.name: (sent or {}).get(ct.client.name, global_weights) for t in tasks for ct in t.client_tasks}


def answered(tasks: Iterable[Task], round_num: int, warn: Callable[[str], None]) -> dict[str, Shareable]:
    """The results returned OK, by site; every other answer (or none) is warned about."""
    raw = {}
    for ct in (ct for task in tasks for ct in task.client_tasks):
        site, result = ct.client.name, ct.result
        if not _ok(result):
            rc = result.get_return_code() if isinstance(result, Shareable) else "no result"
            reason = result.get(C.KEY_ERROR, "") if isinstance(result, Shareable) else ""
            warn(f"round {round_num}: {site} returned {rc} {reason}")
            continue
        raw[site] = result
    return raw


def crafted(
    adversary: SimulatedAdversary,
    raw: dict[str, Shareable],
    sent: dict,
    global_weights: dict,
    round_num: int,
    max_abs_weight: float | None,
) -> tuple[dict, dict]:
    """(``raw`` with the attackers' results crafted, the round's record); if crafting fails, ``raw`` without them
    (an honest result would turn the attackers benign unseen) and a record of the failure."""
    try:
        return adversary.rewrite(raw, sent, global_weights, round_num, max_abs_weight)
    except Exception as exc:  # noqa: BLE001 - a failed simulation must not stop the run
        dropped = [s for s in raw if s in adversary.attackers]
        return {s: r for s, r in raw.items() if s not in dropped}, adversary.failure(round_num, exc, dropped)


def checked(
    raw: dict[str, Shareable],
    sent: dict,
    global_weights: dict,
    round_num: int,
    max_abs_weight: float | None,
    max_sample_ratio: float | None,
    warn: Callable[[str], None],
) -> tuple[dict, list[str]]:
    """(the valid results as ``{site: {"weights", "num_samples"}}``, the refused sites): each model cast to the
    global model's dtypes with its integer entries, the claimed counts capped (:func:`capped_counts`)."""
    claimed, models, rejected = {}, {}, []
    integer = {k: v for k, v in global_weights.items() if not np.issubdtype(v.dtype, np.floating)}
    for site, result in raw.items():
        weights, n, problems = result_model(result, sent[site], global_weights, max_abs_weight)
        if not valid_num_samples(n):
            problems.append(f"num_samples must be a finite positive number, got {n!r}")
        if problems:
            warn(f"round {round_num}: rejected the result of {site}: {'; '.join(problems)}")
            rejected.append(site)
            continue
        claimed[site] = float(n)
        models[site] = {k: np.asarray(v).astype(global_weights[k].dtype, copy=False) for k, v in weights.items()}
        models[site].update(integer)
    counts = capped_counts(claimed, max_sample_ratio)
    for site in counts:
        if counts[site] < claimed[site]:
            warn(f"round {round_num}: {site} claimed {claimed[site]:g} samples; capped at {counts[site]:g}")
    return {s: {"weights": models[s], "num_samples": counts[s]} for s in models}, rejected


def final_rows(tasks: Iterable[Task], last_round: int, adversary: SimulatedAdversary | None) -> list[dict]:
    """The final evaluation's OK results as summary rows; an attacker's ``malfunction`` is the adversary's attack."""
    rows = []
    for ct in (ct for task in tasks for ct in task.client_tasks):
        if _ok(ct.result) and isinstance(ct.result.get(C.KEY_RESULT), dict):
            row = dict(ct.result[C.KEY_RESULT], site=ct.client.name, status="finished", last_round=last_round)
            if adversary is not None and ct.client.name in adversary.attackers:
                row["malfunction"] = adversary.spec.kind
            rows.append(row)
    return rows

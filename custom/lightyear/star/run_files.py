"""The files the star server writes into its job's run directory: each round's model and rule state (replaced
atomically), an attack job's ``adversary.jsonl`` and the final ``summary.csv``/``summary.json``."""

from __future__ import annotations

import json
import os

from lightyear.records import atomic_write, save_npz_atomic, summarize_sites, write_summary
from lightyear.star.adversary import ADVERSARY_FILE
from lightyear.star.aggregator import StarAggregator


def save_round(run_dir: str, global_weights: dict, history: list[dict], aggregator: StarAggregator) -> None:
    """The round's global model and the rule's state (with ``history`` when there is one)."""
    save_npz_atomic(os.path.join(run_dir, "global_model.npz"), global_weights)
    state = {**({"history": history} if history else {}), **aggregator.state()}
    if state:
        blob = json.dumps(state, default=float).encode()
        atomic_write(os.path.join(run_dir, "aggregator_state.json"), lambda f: f.write(blob))
    arrays = aggregator.state_arrays()
    if arrays:
        save_npz_atomic(os.path.join(run_dir, "aggregator_state.npz"), arrays)


def append_attack_record(run_dir: str, record: dict) -> None:
    """One round's adversary record as a line of ``adversary.jsonl`` (an OSError is the caller's)."""
    with open(os.path.join(run_dir, ADVERSARY_FILE), "a") as f:
        f.write(json.dumps(record, default=float) + "\n")


def write_final_summary(
    finals: list[dict], sites: list[str], run_dir: str, reasons: dict[str, str] | None = None
) -> tuple[list[dict], str]:
    """(the summary rows, the CSV's path): the final evaluations, and a ``dropped`` row (with its reason from
    ``reasons``) for each site of ``sites`` without one."""
    done = {f["site"] for f in finals}
    reasons = reasons or {}
    missing = [
        {"site": s, "status": "dropped", "reason": reasons.get(s, "no final evaluation result"), "test": {}}
        for s in sites
        if s not in done
    ]
    rows = summarize_sites(finals + missing)
    return rows, write_summary(rows, run_dir)

"""Read a sweep folder: every run's scenario (from its job's ``meta.json``) and final per-site metrics.

A run folder is ``<sweep>/runs/<run>/`` with ``job/meta.json`` (its ``lightyear`` block: method,
dataset, topology, malfunction, faulty sites, seed) and, once finished,
``ws/server/simulate_job/summary.csv`` (one row per site, then ``mean_benign`` and ``std_benign``)
and ``ws/site-K/simulate_job/rounds.csv``.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

from lightyear.algorithms.malfunctions import NONE
from lightyear.experiments.runner import RUNS, summary_path
from lightyear.jobs.generate import load_json
from lightyear.records import read_csv

SUMMARY_ROWS = ("mean_benign", "std_benign")


class ReportError(ValueError):
    """A sweep folder that cannot be reported on; the message says why."""


def site_key(site: str):
    """Sort ``site-2`` before ``site-10``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", site)]


@dataclass
class RunResult:
    """One run of a sweep: its scenario and, when finished, its per-site summary rows."""

    name: str
    folder: str
    method: str
    dataset: str
    topology: str
    malfunction: str
    faulty_sites: list[str]
    seed: int
    sites: list[str]
    rows: list[dict] = field(default_factory=list)  # summary.csv rows of single sites

    @property
    def faulty(self) -> int:
        return len(self.faulty_sites)

    @property
    def finished(self) -> bool:
        """Whether at least one benign site finished (as :func:`~lightyear.experiments.runner.is_finished`)."""
        return any(r.get("malfunction") == NONE and r.get("status", "finished") == "finished" for r in self.rows)

    @property
    def metric(self) -> str:
        """The task's main metric: ``dice`` for segmentation, else ``acc``."""
        return "dice" if self.rows and "dice" in self.rows[0] else "acc"

    def benign_values(self, metric: str) -> list[float]:
        """``metric`` of every benign site that finished (the sites ``mean_benign`` averages)."""
        values = []
        for row in self.rows:
            if row.get("malfunction") != NONE or row.get("status", "finished") != "finished":
                continue
            try:
                value = float(row.get(metric, "nan"))
            except ValueError:
                continue
            if not math.isnan(value):
                values.append(value)
        return values

    def rounds_csv(self, site: str) -> str:
        return os.path.join(self.folder, "ws", site, "simulate_job", "rounds.csv")

    def job_setting(self, key: str):
        """A setting of the benign sites' app (first match in ``config_fed_client.json``), or None."""
        path = os.path.join(self.folder, "job", "app", "config", "config_fed_client.json")
        return _find_key(load_json(path), key) if os.path.isfile(path) else None


def _find_key(obj, key):
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for item in obj:
            found = _find_key(item, key)
            if found is not None:
                return found
    return None


def read_run(folder: str) -> RunResult:
    """One run folder; raises :class:`ReportError` when it has no generated job."""
    meta_path = os.path.join(folder, "job", "meta.json")
    if not os.path.isfile(meta_path):
        raise ReportError(f"{folder} has no job/meta.json: not a run folder written by lightyear-sweep")
    meta = load_json(meta_path)
    info = meta.get("lightyear") or {}
    missing = [k for k in ("method", "dataset", "malfunction", "faulty_sites", "seed") if k not in info]
    if missing:
        raise ReportError(f"{meta_path} lacks {', '.join(missing)} in its 'lightyear' block: regenerate the job")
    sites = sorted({s for group, names in meta.get("deploy_map", {}).items() for s in names if s != "server"}, key=site_key)
    faulty_sites = list(info["faulty_sites"])
    result = RunResult(
        name=os.path.basename(os.path.normpath(folder)), folder=folder, method=info["method"], dataset=info["dataset"],
        topology=info.get("topology", "?"), malfunction=info["malfunction"] if faulty_sites else NONE,
        faulty_sites=faulty_sites, seed=int(info["seed"]), sites=sites,
    )
    path = summary_path(folder)
    if os.path.isfile(path):
        result.rows = [r for r in read_csv(path) if r.get("site") not in SUMMARY_ROWS]
    return result


def load_sweep(sweep_dir: str) -> list[RunResult]:
    """Every run under ``sweep_dir/runs`` (finished or not), sorted by name."""
    folder = os.path.join(sweep_dir, RUNS)
    if not os.path.isdir(sweep_dir):
        raise ReportError(f"no sweep folder at {sweep_dir}")
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    runs = [read_run(os.path.join(folder, n)) for n in names if os.path.isdir(os.path.join(folder, n))]
    if not runs:
        raise ReportError(f"{sweep_dir} holds no runs (no {RUNS}/<run>/ folders): run lightyear-sweep SPEC --out {sweep_dir} first")
    return runs


def method_order(runs: list[RunResult]) -> list[str]:
    """Star methods, then peer-to-peer ones, then LIGHTYEAR (as in the paper's tables); by name within."""
    topology = {r.method: r.topology for r in runs}

    def key(method: str):
        return (method == "lightyear", topology[method] != "star", method)

    return sorted(topology, key=key)

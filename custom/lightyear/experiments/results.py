"""Read a sweep folder: every run's scenario (its job's ``meta.json``) and final per-site metrics (its summary).

Damage is reported, never averaged in: an unreadable run is left out with the reason (:func:`scan_sweep`), an
unusable summary row with the row named (:attr:`RunResult.problems`). **Benign** sites are those not in
``faulty_sites``: a malfunctioning site or an attacker (whose row may say ``none``) never enters a benign mean.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass, field

from lightyear.algorithms.attacks.catalogue import names as attack_names
from lightyear.algorithms.attacks.updates import FULL, KNOWLEDGE
from lightyear.algorithms.malfunctions import KINDS, NONE
from lightyear.cli import UserError
from lightyear.experiments.runner import RUNS, summary_path
from lightyear.jobs import registry
from lightyear.jobs.folders import load_json
from lightyear.records import table_rows

SUMMARY_ROWS = ("mean_benign", "std_benign")
STATUSES = ("finished", "failed", "dropped")
METRICS = ("acc", "dice", "ece", "conf", "loss")


class ReportError(UserError):
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
    problems: list[str] = field(default_factory=list)  # summary rows left out, and why
    attack: str = NONE  # an attack run: its kind and the attackers' knowledge
    knowledge: str | None = None

    @property
    def faulty(self) -> int:
        return len(self.faulty_sites)

    @property
    def threat(self) -> str:
        """The malfunction kind, the attack (``<kind>_full`` under full knowledge), or ``none`` for a clean run."""
        if self.attack != NONE and self.faulty_sites:
            return self.attack + ("_full" if self.knowledge == FULL else "")
        return self.malfunction

    def is_benign(self, row: dict) -> bool:
        return row.get("malfunction") == NONE and row.get("site") not in self.faulty_sites

    def _benign_finished(self) -> list[dict]:
        return [r for r in self.rows if self.is_benign(r) and r.get("status", "finished") == "finished"]

    @property
    def finished(self) -> bool:
        """Whether at least one benign site finished (as :func:`~lightyear.experiments.runner.is_finished`)."""
        return bool(self._benign_finished())

    @property
    def metric(self) -> str:
        """The task's main metric: ``dice`` for segmentation, else ``acc``."""
        return "dice" if self.rows and "dice" in self.rows[0] else "acc"

    def benign_values(self, metric: str) -> list[float]:
        """``metric`` of every benign site that finished, where it is a number."""
        values = [_number(row.get(metric, "nan")) for row in self._benign_finished()]
        return [v for v in values if v is not None and not math.isnan(v)]

    def rounds_csv(self, site: str) -> str:
        return os.path.join(self.folder, "ws", site, "simulate_job", "rounds.csv")

    def job_setting(self, key: str):
        """A setting of the benign sites' app (first match in ``config_fed_client.json``), or None."""
        path = os.path.join(self.folder, "job", "app", "config", "config_fed_client.json")
        try:
            return _find_key(load_json(path), key) if os.path.isfile(path) else None
        except UserError:
            return None


def _number(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def row_problem(row: dict, main_metric: str, faulty_sites=()) -> str | None:
    """Why a summary row of one site cannot be used, or None. A finished benign site (not in ``faulty_sites``) needs a
    finite main metric; every metric given must be a number, not infinite. ``malfunction`` may name an attack."""
    status = row.get("status", "finished")
    if status not in STATUSES:
        return f"status {status!r} is none of {', '.join(STATUSES)}"
    if row.get("malfunction") not in KINDS + attack_names():
        return f"malfunction {row.get('malfunction')!r} is none of {', '.join(KINDS + attack_names())}"
    benign = status == "finished" and row.get("malfunction") == NONE and row.get("site") not in faulty_sites
    for metric in METRICS:
        if metric not in row:
            continue
        text = row[metric]
        value = _number(text)
        needed = benign and metric == main_metric
        if (text or needed) if value is None else (math.isinf(value) or (needed and math.isnan(value))):
            return f"{metric} {text!r} is not a finite number"
    return None


def _find_key(obj, key):
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        obj = list(obj.values())
    if isinstance(obj, list):
        for item in obj:
            if (found := _find_key(item, key)) is not None:
                return found
    return None


def read_run(folder: str) -> RunResult:
    """One run folder; raises :class:`ReportError` when it has no readable job or summary."""
    meta_path = os.path.join(folder, "job", "meta.json")
    if not os.path.isfile(meta_path):
        raise ReportError(f"{folder} has no job/meta.json: not a run folder written by lightyear-sweep")
    meta = load_json(meta_path, "the job's meta.json")
    info = meta.get("lightyear") if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        raise ReportError(f"{meta_path} has no 'lightyear' block: not a job lightyear-jobs wrote; regenerate the job")
    if missing := [k for k in ("method", "dataset", "malfunction", "faulty_sites", "seed") if k not in info]:
        raise ReportError(f"{meta_path} lacks {', '.join(missing)} in its 'lightyear' block: regenerate the job")
    if problem := _scenario_problem(info):
        raise ReportError(f"{meta_path}: {problem}: regenerate the job")
    deploy_map = meta.get("deploy_map")
    if not isinstance(deploy_map, dict) or not all(
        isinstance(v, list) and all(isinstance(s, str) for s in v) for v in deploy_map.values()
    ):
        raise ReportError(f"{meta_path} has no deploy_map of app -> [participants]: regenerate the job")
    sites = sorted({s for names in deploy_map.values() for s in names if s != "server"}, key=site_key)
    faulty_sites = list(info["faulty_sites"])
    if strangers := [s for s in faulty_sites if s not in sites]:
        raise ReportError(
            f"{meta_path}: faulty_sites names {', '.join(strangers)}, which the job's deploy_map "
            "does not run: regenerate the job"
        )
    result = RunResult(
        name=os.path.basename(os.path.normpath(folder)),
        folder=folder,
        method=info["method"],
        dataset=info["dataset"],
        topology=str(info.get("topology", "?")),
        malfunction=info["malfunction"] if faulty_sites else NONE,
        faulty_sites=faulty_sites,
        seed=info["seed"],
        sites=sites,
        attack=info.get("attack") or NONE,
        knowledge=info.get("knowledge"),
    )
    path = summary_path(folder)
    if os.path.isfile(path):
        rows, result.problems = table_rows(path, "the summary")
        rows = [r for r in rows if r.get("site") not in SUMMARY_ROWS]
        main = "dice" if rows and "dice" in rows[0] else "acc"
        for row in rows:
            if why := row_problem(row, main, faulty_sites):
                result.problems.append(f"{row.get('site') or '?'}: {why}")
            else:
                result.rows.append(row)
        result.problems = [f"summary.csv {p}; left out" for p in result.problems]
    return result


def _scenario_problem(info: dict) -> str | None:
    for key in ("method", "dataset", "malfunction"):
        if not isinstance(info[key], str) or not info[key]:
            return f"{key} {info[key]!r} is not a name"
    if info["malfunction"] not in KINDS:
        return f"malfunction {info['malfunction']!r} is none of {', '.join(KINDS)}"
    faulty = info["faulty_sites"]
    if not isinstance(faulty, list) or not all(isinstance(s, str) for s in faulty):
        return f"faulty_sites {faulty!r:.60} is not a list of site names"
    seed = info["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int):
        return f"seed {seed!r:.40} is not a whole number"
    attack = info.get("attack") or NONE
    if attack != NONE and attack not in attack_names():
        return f"attack {attack!r} is none of {', '.join(attack_names())}"
    if attack != NONE and info.get("knowledge") not in KNOWLEDGE:
        return f"knowledge {info.get('knowledge')!r} is none of {', '.join(KNOWLEDGE)}"
    if attack != NONE and info["malfunction"] != NONE:
        return (
            f"an attack run ({attack}) gives malfunction {info['malfunction']!r}: a site is either faulty or attacking"
        )
    if faulty and attack == NONE and info["malfunction"] == NONE:
        return f"faulty_sites {faulty!r:.60} but neither a malfunction nor an attack"
    return None


def scan_sweep(sweep_dir: str) -> tuple[list[RunResult], list[tuple[str, str]]]:
    """(every readable run under ``sweep_dir/runs``, sorted by name; [(run, why it was left out)])."""
    folder = os.path.join(sweep_dir, RUNS)
    if not os.path.isdir(sweep_dir):
        raise ReportError(f"no sweep folder at {sweep_dir}: give the folder lightyear-sweep --out wrote")
    names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    runs, skipped = [], []
    first_of: dict[str, str] = {}  # the job folder's digest -> the first run with that job
    for name in names:
        if not os.path.isdir(os.path.join(folder, name)):
            continue
        try:
            run = read_run(os.path.join(folder, name))
        except UserError as exc:  # ReportError, a meta.json or summary that cannot be read
            skipped.append((name, str(exc)))
            continue
        digest = job_digest(os.path.join(folder, name, "job"))
        if digest in first_of:  # a copied run folder: the same job, counted once
            skipped.append((name, f"the same job as run {first_of[digest]} (a copy?): each job counts once"))
            continue
        if digest:
            first_of[digest] = name
        runs.append(run)
    if not runs and not skipped:
        raise ReportError(
            f"{sweep_dir} holds no runs (no {RUNS}/<run>/ folders): run lightyear-sweep SPEC --out {sweep_dir} first"
        )
    return runs, skipped


def job_digest(job: str) -> str:
    """A digest of every file's name and contents in the folder ``job`` ("" for none): a job's runs count once."""
    h = hashlib.sha256()
    found = False
    for root, dirs, files in os.walk(job):
        dirs.sort()
        for f in sorted(files):
            path = os.path.join(root, f)
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            found = True
            h.update(os.path.relpath(path, job).encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return h.hexdigest() if found else ""


def load_sweep(sweep_dir: str) -> list[RunResult]:
    """Every readable run under ``sweep_dir/runs`` (finished or not), sorted by name (:func:`scan_sweep`)."""
    return scan_sweep(sweep_dir)[0]


def method_order(runs: list[RunResult]) -> list[str]:
    """Star methods, then peer-to-peer ones, then the featured one (as the paper's tables); by name within."""
    topology = {r.method: r.topology for r in runs}
    featured = set(registry.featured())
    return sorted(topology, key=lambda method: (method in featured, topology[method] != "star", method))

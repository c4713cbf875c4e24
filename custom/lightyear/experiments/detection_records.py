"""The records a run's detection metrics are computed from, read as untrusted input: the job's ``meta.json`` (ground
truth), each benign site's ``rounds.csv`` (peer-to-peer) or the server's ``aggregator_state.json`` (star). Any damage
is a :class:`DetectionError` naming the file and the problem, and the run gets no figures; only a benign site with no
``rounds.csv`` at all counts as one that made no decision.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from lightyear import records
from lightyear.algorithms.attacks import catalogue
from lightyear.algorithms.malfunctions import NONE
from lightyear.checks import raising
from lightyear.cli import read_text
from lightyear.experiments.results import ReportError, site_key
from lightyear.jobs.folders import load_json
from lightyear.records import table_rows

SERVER = "server"
STATE_FILE = "aggregator_state.json"
ROUND = re.compile(r"[0-9]{1,9}")
RERUN = "run the job again"


class DetectionError(ReportError):
    """A run whose records cannot give its detection figures; the message names the file and what it lacks."""


@dataclass
class RunRecords:
    """Where one run's records are, and its ground truth."""

    name: str
    method: str
    faulty_sites: list[str]
    sites: list[str]
    workspace: str  # holds server/ and site-K/
    info: dict  # the meta.json "lightyear" block

    @property
    def benign(self) -> list[str]:
        return [s for s in self.sites if s not in self.faulty_sites]

    def rounds_csv(self, site: str) -> str:
        return os.path.join(self.workspace, site, "simulate_job", "rounds.csv")

    def state_json(self) -> str:
        return os.path.join(self.workspace, SERVER, "simulate_job", STATE_FILE)


def _names(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)


def records_from_meta(meta_path: str, workspace: str, name: str | None = None) -> RunRecords:
    """The records of the run with job ``meta.json`` ``meta_path`` and simulator workspace ``workspace``."""
    fix = "regenerate the job with lightyear-jobs"
    with raising(DetectionError):
        meta = load_json(meta_path, "the job's meta.json")
    info = meta.get("lightyear") if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        raise DetectionError(
            f"{meta_path} has no 'lightyear' block (a JSON object): not a job lightyear-jobs wrote; {fix}"
        )
    if missing := [k for k in ("method", "faulty_sites") if k not in info]:
        raise DetectionError(f"{meta_path} lacks {', '.join(missing)} in its 'lightyear' block: {fix}")
    if not isinstance(info["method"], str) or not info["method"]:
        raise DetectionError(f"{meta_path}: method {info['method']!r:.60} is not a method name: {fix}")
    deploy_map = meta.get("deploy_map")
    if not isinstance(deploy_map, dict) or not all(_names(group) for group in deploy_map.values()):
        raise DetectionError(f"{meta_path} has no deploy_map of app -> [participants]: {fix}")
    sites = sorted({s for group in deploy_map.values() for s in group if s != SERVER}, key=site_key)
    faulty = info["faulty_sites"]
    if not isinstance(faulty, list) or not all(isinstance(s, str) for s in faulty):
        raise DetectionError(f"{meta_path}: faulty_sites {faulty!r:.60} is not a list of site names: {fix}")
    if strangers := [s for s in faulty if s not in sites]:
        raise DetectionError(
            f"{meta_path}: faulty_sites names {', '.join(strangers)}, which the job's deploy_map does not run: {fix}"
        )
    attack = info.get("attack") or NONE
    if attack != NONE and attack not in catalogue.names():
        raise DetectionError(
            f"{meta_path}: no attack {attack!r:.60} is known (the toolkit's and installed plugins': "
            f"{', '.join(catalogue.names())}); install the plugin that declares it, or {fix}"
        )
    run_name = name or meta.get("name")
    if not isinstance(run_name, str) or not run_name:
        run_name = os.path.basename(os.path.normpath(workspace))
    return RunRecords(run_name, info["method"], list(faulty), sites, workspace, info)


def open_run(path: str, job: str | None = None) -> RunRecords:
    """The records of a sweep run folder or a simulator workspace (with ``job``'s meta.json when given)."""
    if not os.path.isdir(path):
        raise DetectionError(f"no folder at {path}: pass a sweep run folder (runs/<run>) or a simulator workspace (-w)")
    swept = os.path.isdir(os.path.join(path, "ws"))
    workspace = os.path.join(path, "ws") if swept else path
    if job is not None:
        meta = os.path.join(job, "meta.json")
    elif swept:
        meta = os.path.join(path, "job", "meta.json")
    else:
        meta = os.path.join(path, SERVER, "simulate_job", "meta.json")
    if not os.path.lexists(meta):
        raise DetectionError(
            f"no job meta.json at {meta}: pass a sweep run folder, a simulator workspace (-w), "
            "or the job folder with --job"
        )
    return records_from_meta(meta, workspace, os.path.basename(os.path.normpath(path)) if swept else None)


def round_number(value, where: str) -> int:
    """A round number of a record (a whole number >= 0; in a CSV its digits); else a DetectionError."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**9:
        return value
    if isinstance(value, str) and ROUND.fullmatch(value):
        return int(value)
    raise DetectionError(f"{where}: round {value!r:.40} is not a round number: the records are damaged; {RERUN}")


def record_file(path: str, what: str) -> bool:
    """Whether the record file ``path`` exists; a DetectionError when something else is in its place."""
    with raising(DetectionError):
        return records.record_file(path, what)


def site_rows(path: str, site: str) -> list[dict]:
    """Every row of a site's ``rounds.csv``, each whole and with a round number; else a DetectionError."""
    what = f"{site}'s rounds.csv"
    with raising(DetectionError):  # not text, empty, a header and no rows
        rows, problems = table_rows(path, what)
    if problems:
        raise DetectionError(
            f"{what} {path}: {problems[0]}: the detection figures need every round's whole record; {RERUN}"
        )
    for i, row in enumerate(rows):
        row["round"] = round_number(row.get("round"), f"{path} row {i + 1}")
    return rows


def state_history(path: str, method: str, needs: tuple[str, ...]) -> list[dict]:
    """The ``history`` of a star run's ``aggregator_state.json``, every entry checked; else a DetectionError."""
    with raising(DetectionError):
        text = read_text(path, "the server's aggregator state", RERUN)
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise DetectionError(f"{path} is not valid JSON ({str(exc)[:80]}): the records are damaged; {RERUN}") from None
    history = state.get("history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise DetectionError(
            f"{path} has no 'history' (the {method} rule's per-round kept/excluded sites): "
            "the run was written by an older toolkit, or the file is damaged; run it again"
        )
    for i, entry in enumerate(history):
        if not isinstance(entry, dict):
            raise DetectionError(f"{path}: history entry {i} is not a JSON object: the records are damaged; {RERUN}")
        if lacking := [k for k in needs if k not in entry]:
            raise DetectionError(
                f"{path}: history entry {i} has no '{lacking[0]}', which the {method} detection rule reads"
            )
        entry["round"] = round_number(entry["round"], f"{path} history entry {i}")
        for key in ("kept", "excluded", "rejected"):
            if key in entry and not _names(entry[key]):
                raise DetectionError(
                    f"{path}: history entry {i}: {key} {entry[key]!r:.40} is not a list of site names; {RERUN}"
                )
    return history

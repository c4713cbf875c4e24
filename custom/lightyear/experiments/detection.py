"""Detection metrics of one run from its records: DAcc, FPR and FNR of the senders a method left out.

FedCAP (Li et al., "FedCAP: Robust Federated Learning via Customized Aggregation and
Personalization", Sec. VI-C, Table III) measures how well a defence tells malicious clients from
benign ones; the counts and ratios are :mod:`lightyear.algorithms.attacks.detection`. Here a
*decision* is one deciding party in one round: the server of a star run, or one **benign**
receiving site of a peer-to-peer run (a faulty site's choices are not scored).

* **Malicious** = listed in ``faulty_sites`` of the job's ``meta.json`` (malfunctioning or attacking).
* **Evaluated** = the senders whose models the deciding party received that round, valid or
  refused by the model checks (``rejected``); a sender that never arrived is not evaluated.
* **Labelled malicious** = the method excluded it that round, by the rule of :data:`RULES`
  (one function per rule below; documented in ``docs/methods.md``, "Detection metrics").

Records read: star runs ``<ws>/server/simulate_job/aggregator_state.json`` (``history``: per
aggregated round ``kept``, ``excluded`` and ``rejected``); peer-to-peer runs each benign site's
``<ws>/<site>/simulate_job/rounds.csv``. A run is a sweep run folder (``job/meta.json`` and
``ws/``) or a simulator workspace (``server/simulate_job/meta.json``, or ``--job JOB``).
Methods that exclude no sender (:data:`NO_DETECTION`) have no detection figures.

``python -m lightyear.experiments.detection RUN_DIR_OR_WORKSPACE`` prints a run's figures per
receiver, per round and pooled over the run (:func:`~lightyear.algorithms.attacks.detection.pool`).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from lightyear.algorithms.attacks.detection import DetectionCounts, detection_counts, pool
from lightyear.experiments.results import ReportError, site_key
from lightyear.records import format_table, read_csv

SERVER = "server"
ALL = "all"
STATE_FILE = "aggregator_state.json"
NO_DETECTION = ("fedavg", "fedprox", "ditto", "p2p_fedavg", "local")
COLUMNS = ("round", "receiver", "tp", "fp", "tn", "fn", "dacc", "fpr", "fnr")


class DetectionError(ReportError):
    """A run whose records cannot give its detection figures; the message names the file and what it lacks."""


@dataclass(frozen=True)
class Labelling:
    """One decision: the senders evaluated and those of them labelled malicious."""

    evaluated: frozenset
    flagged: frozenset


def names(value) -> frozenset:
    """Site names of a record cell: a ``;``-separated string (CSV) or a list (JSON, a live row)."""
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(n for n in value.split(";") if n)
    return frozenset(str(n) for n in value)


def _filled(row: dict, peers, suffix: str) -> frozenset:
    """The peers whose ``<peer><suffix>`` cell is not empty (the rule computed something for them)."""
    return frozenset(p for p in peers if str(row.get(f"{p}{suffix}", "")) != "")


# ---------------------------------------------------------------------------- labelling rules
def lightyear_labels(row: dict, peers) -> Labelling:
    """LIGHTYEAR: a scored peer not selected (A_ij < tau, or below the skill floor), a selected peer
    excluded after averaging (the validated aggregation: not in ``adopted``), or a rejected one.
    In a warm-up round (own model below the skill floor) no peer is judged: only rejections count."""
    rejected = names(row.get("rejected"))
    if str(row.get("warming_up", "0")) in ("1", "True"):
        return Labelling(rejected, rejected)
    evaluated = _filled(row, peers, "_score") | rejected
    kept = names(row["adopted"]) if "adopted" in row else names(row["selected"])
    return Labelling(evaluated, evaluated - kept)


def balance_labels(row: dict, peers) -> Labelling:
    """BALANCE: a peer not accepted (distance above the radius), or a rejected one."""
    evaluated = _filled(row, peers, "_distance") | names(row.get("rejected"))
    return Labelling(evaluated, evaluated - names(row["selected"]))


def scclip_labels(row: dict, peers) -> Labelling:
    """SCCLIP: a peer clipped (scale < 1) or removed, or a rejected one."""
    rejected = names(row.get("rejected"))
    evaluated = _filled(row, peers, "_distance") | rejected
    return Labelling(evaluated, names(row["clipped"]) | names(row["removed"]) | rejected)


def defta_labels(row: dict, peers) -> Labelling:
    """DeFTA: a received peer not aggregated (left out of the trust-weighted sample; a blocked
    peer, with zero trust weight, is never sampled), or a rejected one."""
    evaluated = names(row["received"]) | names(row.get("rejected"))
    return Labelling(evaluated, evaluated - names(row["selected"]))


def excluded_labels(entry: dict, peers=()) -> Labelling:
    """Star rules: a site the rule left out of the round (``excluded``: not among Krum's m, AFA's
    removed or blocked, ASMR's flagged, CFL's minority, FedCAP's removed), or whose result the
    server's model checks refused (``rejected``; absent in records written before it was kept)."""
    rejected = names(entry.get("rejected"))
    return Labelling(names(entry["kept"]) | names(entry["excluded"]) | rejected, names(entry["excluded"]) | rejected)


@dataclass(frozen=True)
class Rule:
    """How a method's decisions are read: its topology, labelling function, the record columns
    (P2P) or history keys (star) it needs, the per-sender column suffix it reads, and its text."""

    topology: str
    label: Callable[..., Labelling]
    needs: tuple[str, ...]
    peer_suffix: str
    text: str


_STAR = ("round", "kept", "excluded")
RULES = {
    "lightyear": Rule("p2p", lightyear_labels, ("round", "selected", "rejected"), "_score",
                      "not selected (agreement score < tau or below the skill floor), excluded after averaging, or rejected"),
    "lightyear_paper": Rule("p2p", lightyear_labels, ("round", "selected", "rejected"), "_score",
                            "not selected (agreement score < tau or below the skill floor) or rejected"),
    "balance": Rule("p2p", balance_labels, ("round", "selected", "rejected"), "_distance", "not accepted (distance above the acceptance radius) or rejected"),
    "scclip": Rule("p2p", scclip_labels, ("round", "clipped", "removed", "rejected"), "_distance", "clipped (scale < 1) or removed, or rejected"),
    "defta": Rule("p2p", defta_labels, ("round", "received", "selected", "rejected"), "", "received but not aggregated (outside the trust-weighted sample, blocked peers included) or rejected"),
    "krum": Rule("star", excluded_labels, _STAR, "", "not among the m models with the lowest Krum scores, or rejected by the server"),
    "afa": Rule("star", excluded_labels, _STAR, "", "removed by the similarity test or blocked, or rejected by the server"),
    "asmr": Rule("star", excluded_labels, _STAR, "", "flagged (below the largest gap of the outlier factors), or rejected by the server"),
    "cfl": Rule("star", excluded_labels, _STAR, "", "in the smaller cluster, or rejected by the server"),
    "fedcap": Rule("star", excluded_labels, _STAR, "", "removed (||d~|| > T_norm, for good) or excluded, or rejected by the server"),
}


def rule_for(method: str) -> Rule | None:
    """The method's labelling rule; None for a method without detection; an error for an unknown one."""
    if method in NO_DETECTION:
        return None
    if method not in RULES:
        raise DetectionError(f"no detection labelling rule for method {method!r}: add one to RULES in {__name__}, or to NO_DETECTION if it excludes no sender")
    return RULES[method]


# ---------------------------------------------------------------------------- a run's records
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


def records_from_meta(meta_path: str, workspace: str, name: str | None = None) -> RunRecords:
    """The records of a run whose job ``meta.json`` is ``meta_path`` and simulator workspace ``workspace``."""
    with open(meta_path) as f:
        meta = json.load(f)
    info = meta.get("lightyear") or {}
    missing = [k for k in ("method", "faulty_sites") if k not in info]
    if missing:
        raise DetectionError(f"{meta_path} lacks {', '.join(missing)} in its 'lightyear' block: regenerate the job with lightyear-jobs")
    sites = sorted({s for group in meta.get("deploy_map", {}).values() for s in group if s != SERVER}, key=site_key)
    return RunRecords(name or meta.get("name", os.path.basename(os.path.normpath(workspace))), info["method"],
                      list(info["faulty_sites"]), sites, workspace, info)


def open_run(path: str, job: str | None = None) -> RunRecords:
    """A sweep run folder (``job/meta.json`` + ``ws/``) or a simulator workspace (its
    ``server/simulate_job/meta.json``, or ``job``'s meta.json when given)."""
    swept = os.path.isdir(os.path.join(path, "ws"))
    workspace = os.path.join(path, "ws") if swept else path
    if job is not None:
        meta = os.path.join(job, "meta.json")
    elif swept:
        meta = os.path.join(path, "job", "meta.json")
    else:
        meta = os.path.join(path, SERVER, "simulate_job", "meta.json")
    if not os.path.isfile(meta):
        raise DetectionError(f"no job meta.json at {meta}: pass a sweep run folder, a simulator workspace (-w), or the job folder with --job")
    return records_from_meta(meta, workspace, os.path.basename(os.path.normpath(path)) if swept else None)


# ---------------------------------------------------------------------------- decisions
@dataclass(frozen=True)
class Decision:
    round: int
    receiver: str
    counts: DetectionCounts
    evaluated: frozenset = frozenset()
    flagged: frozenset = frozenset()


PER_CLIENT = ("fedcap",)
"""Rules whose exclusion is permanent, for which FedCAP's per-client counts are reported too
(Table III of paper 002: each client judged once, at the end of the run)."""


@dataclass
class RunDetection:
    """Every decision of a run, with per-round, per-receiver and pooled counts."""

    run: RunRecords
    rule: Rule
    decisions: list[Decision]

    @property
    def total(self) -> DetectionCounts:
        return pool(d.counts for d in self.decisions)

    def by_round(self) -> dict[int, DetectionCounts]:
        return {r: pool(d.counts for d in self.decisions if d.round == r) for r in sorted({d.round for d in self.decisions})}

    def per_client(self) -> DetectionCounts:
        """Each client judged once, by the last round's decision of every receiver: flagged if that
        round left it out (for FedCAP, removed for good at some point), the way FedCAP's Table III
        counts; pooled over the receivers."""
        last = max((d.round for d in self.decisions), default=None)
        return pool(detection_counts(self.run.faulty_sites, d.evaluated, d.flagged) for d in self.decisions if d.round == last)

    def by_receiver(self) -> dict[str, DetectionCounts]:
        receivers = sorted({d.receiver for d in self.decisions}, key=site_key)
        return {s: pool(d.counts for d in self.decisions if d.receiver == s) for s in receivers}

    def rows(self) -> list[dict]:
        """``detection.csv``: every decision, then the per-receiver pools (round ``all``) and, with
        several receivers, the per-round pools and the run's pool (receiver ``all``)."""
        rows = [_row(d.round, d.receiver, d.counts) for d in self.decisions]
        rows += [_row(ALL, s, c) for s, c in self.by_receiver().items()]
        if len(self.by_receiver()) > 1:
            rows += [_row(r, ALL, c) for r, c in self.by_round().items()] + [_row(ALL, ALL, self.total)]
        return rows


def _row(rnd, receiver: str, counts: DetectionCounts) -> dict:
    ratios = {k: ("" if v != v else round(v, 6)) for k, v in (("dacc", counts.dacc), ("fpr", counts.fpr), ("fnr", counts.fnr))}
    return {"round": rnd, "receiver": receiver, "tp": counts.tp, "fp": counts.fp, "tn": counts.tn, "fn": counts.fn, **ratios}


def _decide(run: RunRecords, rule: Rule, where: str, rnd: int, receiver: str, record: dict) -> Decision:
    peers = [s for s in run.sites if s != receiver]
    labels = rule.label(record, peers)
    try:
        counts = detection_counts(run.faulty_sites, labels.evaluated, labels.flagged)
    except ValueError as exc:
        raise DetectionError(f"{where}, round {rnd}: the {run.method} records are inconsistent ({exc})") from exc
    return Decision(rnd, receiver, counts, frozenset(labels.evaluated), frozenset(labels.flagged))


def _check_columns(path: str, rows: list[dict], rule: Rule, method: str) -> None:
    header = set(rows[0]) if rows else set()
    for column in rule.needs:
        if column not in header:
            raise DetectionError(f"{path} has no column '{column}', which the {method} detection rule reads: the run was written by an older toolkit; run it again")
    if rule.peer_suffix and "senders" in header:
        for row in rows:
            for sender in sorted(names(row["senders"]), key=site_key):
                if f"{sender}{rule.peer_suffix}" not in header:
                    raise DetectionError(f"{path} has no column '{sender}{rule.peer_suffix}' for the sender {sender}, which the {method} detection rule reads")


def p2p_decisions(run: RunRecords, rule: Rule) -> list[Decision]:
    """One decision per benign receiving site and round, from its ``rounds.csv``."""
    decisions, found = [], []
    for site in run.benign:
        path = run.rounds_csv(site)
        if not os.path.isfile(path):
            continue  # a site that wrote no round made no decision
        found.append(site)
        rows = read_csv(path)
        _check_columns(path, rows, rule, run.method)
        decisions += [_decide(run, rule, path, int(row["round"]), site, row) for row in rows]
    if run.benign and not found:
        raise DetectionError(f"no benign site of {run.name} wrote its records (looked for {run.rounds_csv(run.benign[0])}): has the run started?")
    return sorted(decisions, key=lambda d: (d.round, site_key(d.receiver)))


def star_decisions(run: RunRecords, rule: Rule) -> list[Decision]:
    """One decision per aggregated round, from the server's ``aggregator_state.json``."""
    path = run.state_json()
    if not os.path.isfile(path):
        raise DetectionError(f"no {STATE_FILE} at {path}: the server writes it after every aggregated round; did any round aggregate?")
    with open(path) as f:
        state = json.load(f)
    history = state.get("history")
    if not isinstance(history, list):
        raise DetectionError(f"{path} has no 'history' (the {run.method} rule's per-round kept/excluded sites): the run was written by an older toolkit; run it again")
    for i, entry in enumerate(history):
        lacking = [k for k in rule.needs if k not in entry]
        if lacking:
            raise DetectionError(f"{path}: history entry {i} has no '{lacking[0]}', which the {run.method} detection rule reads")
    return [_decide(run, rule, path, int(e["round"]), SERVER, e) for e in history]


def run_detection(run: RunRecords) -> RunDetection | None:
    """The run's decisions under its method's rule; None for a method without detection."""
    rule = rule_for(run.method)
    if rule is None:
        return None
    decisions = star_decisions(run, rule) if rule.topology == "star" else p2p_decisions(run, rule)
    return RunDetection(run, rule, decisions)


def write_csv(detection: RunDetection, path: str) -> str:
    """Write ``detection.csv`` (:meth:`RunDetection.rows`) to ``path``."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(COLUMNS))
        writer.writeheader()
        writer.writerows(detection.rows())
    return path


# ---------------------------------------------------------------------------- console
def _table(title: str, key: str, items) -> str:
    rows = [{key: name, **{k: v for k, v in _row("", "", c).items() if k not in ("round", "receiver")}} for name, c in items]
    return f"{title}\n{format_table(rows)}" if rows else f"{title}\n(no decisions)"


def describe(detection: RunDetection) -> str:
    """The figures of one run as text: per receiver, per round and over the run."""
    run, total = detection.run, detection.total
    lines = [
        f"{run.name}: {run.method}, faulty sites {', '.join(run.faulty_sites) or 'none'}",
        f"labelled malicious: {detection.rule.text}",
        "",
        _table("per receiver (pooled over rounds)", "receiver", detection.by_receiver().items()),
        "",
        _table("per round (pooled over receivers)", "round", detection.by_round().items()),
        "",
        _table("run (pooled over rounds and receivers)", "run", [(ALL, total)]),
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Detection figures (FedCAP's DAcc, FPR, FNR) of one run from its records.")
    parser.add_argument("path", help="a sweep run folder (runs/<run>) or a simulator workspace (-w)")
    parser.add_argument("--job", help="the job folder, when the workspace holds no copy of its meta.json")
    parser.add_argument("--csv", help="also write the decisions to this detection.csv")
    args = parser.parse_args(argv)
    try:
        run = open_run(args.path, args.job)
        detection = run_detection(run)
    except DetectionError as exc:
        print(f"detection: {exc}", file=sys.stderr)
        return 2
    if detection is None:
        print(f"{run.name}: {run.method} has no detection (it excludes no sender)")
        return 0
    print(describe(detection))
    if args.csv:
        print(f"\nwrote {write_csv(detection, args.csv)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

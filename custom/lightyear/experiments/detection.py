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
import io
import sys
from collections.abc import Callable
from dataclasses import dataclass

from lightyear.algorithms.attacks.detection import DetectionCounts, detection_counts, pool
from lightyear.cli import UserError, command, output_file
from lightyear.experiments.detection_records import (
    SERVER,
    STATE_FILE,
    DetectionError,
    RunRecords,
    open_run,
    record_file,
    records_from_meta,
    site_rows,
    state_history,
)
from lightyear.experiments.results import site_key
from lightyear.records import atomic_write, format_table

PROG = "lightyear-detection"
ALL = "all"
NO_DETECTION = ("fedavg", "fedprox", "ditto", "p2p_fedavg", "local")
COLUMNS = ("round", "receiver", "tp", "fp", "tn", "fn", "dacc", "fpr", "fnr")


__all__ = ["SERVER", "STATE_FILE", "DetectionError", "RunRecords", "open_run", "records_from_meta", "run_detection",
           "write_csv"]


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
    """One decision per benign receiving site and round, from its ``rounds.csv`` (whole records only:
    :func:`~lightyear.experiments.detection_records.site_rows`)."""
    decisions, found = [], []
    for site in run.benign:
        path = run.rounds_csv(site)
        if not record_file(path, f"{site}'s rounds.csv"):
            continue  # a site that wrote no round made no decision
        found.append(site)
        rows = site_rows(path, site)
        _check_columns(path, rows, rule, run.method)
        decisions += [_decide(run, rule, path, row["round"], site, row) for row in rows]
    if run.benign and not found:
        raise DetectionError(f"no benign site of {run.name} wrote its records (looked for {run.rounds_csv(run.benign[0])}): has the run started?")
    return sorted(decisions, key=lambda d: (d.round, site_key(d.receiver)))


def star_decisions(run: RunRecords, rule: Rule) -> list[Decision]:
    """One decision per aggregated round, from the server's ``aggregator_state.json``."""
    path = run.state_json()
    if not record_file(path, f"the server's {STATE_FILE}"):
        raise DetectionError(f"no {STATE_FILE} at {path}: the server writes it after every aggregated round; did any round aggregate?")
    return [_decide(run, rule, path, e["round"], SERVER, e) for e in state_history(path, run.method, rule.needs)]


def run_detection(run: RunRecords) -> RunDetection | None:
    """The run's decisions under its method's rule; None for a method without detection."""
    rule = rule_for(run.method)
    if rule is None:
        return None
    decisions = star_decisions(run, rule) if rule.topology == "star" else p2p_decisions(run, rule)
    return RunDetection(run, rule, decisions)


def write_csv(detection: RunDetection, path: str) -> str:
    """Write ``detection.csv`` (:meth:`RunDetection.rows`) to ``path`` (atomically: a crash leaves no half file)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(COLUMNS))
    writer.writeheader()
    writer.writerows(detection.rows())
    try:
        return atomic_write(path, lambda f: f.write(text.getvalue().encode()))
    except OSError as exc:  # a place that takes no file (/proc), a full disk
        raise UserError(f"{path} cannot be written ({exc.strerror or exc})") from None


def is_detection_csv(path: str) -> bool:
    """Whether ``path`` holds a ``detection.csv`` this module wrote (its header), so it may be replaced."""
    try:
        with open(path, newline="", errors="replace") as f:
            return next(csv.reader(f), None) == list(COLUMNS)
    except OSError:
        return False


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


@command(PROG)
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description="Detection figures (FedCAP's DAcc, FPR, FNR) of one run "
                                     "from its records.")
    parser.add_argument("path", help="a sweep run folder (runs/<run>) or a simulator workspace (-w)")
    parser.add_argument("--job", help="the job folder, when the workspace holds no copy of its meta.json")
    parser.add_argument("--csv", help="also write the decisions to this file (a detection.csv)")
    parser.add_argument("--force", action="store_true",
                        help="let --csv replace a file that is not a detection.csv this command wrote")
    args = parser.parse_args(argv)
    if args.csv is not None:  # checked before anything is read
        output_file(args.csv, "--csv", replaceable=args.force or is_detection_csv(args.csv))
    run = open_run(args.path, args.job)
    detection = run_detection(run)
    if detection is None:
        print(f"{run.name}: {run.method} has no detection (it excludes no sender)")
        return 0
    print(describe(detection))
    if args.csv:
        print(f"\nwrote {write_csv(detection, args.csv)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

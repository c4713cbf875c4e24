"""Detection metrics of one run from its records: DAcc, FPR and FNR of the senders a method left out, as FedCAP (Li
et al., "FedCAP: Robust Federated Learning via Customized Aggregation and Personalization", Sec. VI-C, Table III)
measures them (counts and ratios: :mod:`lightyear.algorithms.detection`; which exclusions count: docs/methods.md,
"Detection metrics"). A *decision* is one deciding party in one round: a star run's server, or one **benign**
receiving site of a peer-to-peer run; it evaluates the senders whose models it received that round, valid or
``rejected``, labels malicious those its method excluded (``Method.detection``), and malicious are the job's
``faulty_sites``. ``python -m lightyear.experiments.detection RUN_DIR_OR_WORKSPACE`` prints a run's figures.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from dataclasses import dataclass

from lightyear.algorithms.detection import DetectionCounts, detection_counts, names, pool
from lightyear.cli import UserError, command, output_file
from lightyear.experiments.detection_records import (
    RERUN,
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
from lightyear.flare.declarations import Detection
from lightyear.jobs import registry
from lightyear.records import atomic_write, format_table

PROG = "lightyear-detection"
ALL = "all"
COLUMNS = ("round", "receiver", "tp", "fp", "tn", "fn", "dacc", "fpr", "fnr")


__all__ = [
    "SERVER",
    "STATE_FILE",
    "DetectionError",
    "RunRecords",
    "open_run",
    "records_from_meta",
    "run_detection",
    "write_csv",
]


@dataclass(frozen=True)
class Rule:
    """How a method's decisions are read: its topology and its declaration's :class:`Detection`."""

    topology: str
    detection: Detection

    @property
    def label(self):
        return self.detection.label


def no_detection() -> list[str]:
    """The methods that exclude no sender (their declarations have no detection)."""
    return [name for name, method in registry.methods().items() if method.detection is None]


def rule_for(method: str) -> Rule | None:
    """The method's labelling rule; None for a method without detection; a DetectionError for an unknown one."""
    known = registry.methods()
    if method not in known:
        raise DetectionError(
            f"no method {method!r} is known (the toolkit's and installed plugins': {', '.join(known)}); "
            "install the plugin that declares it"
        )
    declared = known[method]
    return None if declared.detection is None else Rule(declared.topology, declared.detection)


def per_client(method: str) -> bool:
    """Whether ``method``'s exclusion is permanent, so its per-client counts are reported too."""
    rule = rule_for(method)
    return rule is not None and rule.detection.per_client


@dataclass(frozen=True)
class Decision:
    round: int
    receiver: str
    counts: DetectionCounts
    evaluated: frozenset = frozenset()
    flagged: frozenset = frozenset()


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
        return {
            r: pool(d.counts for d in self.decisions if d.round == r) for r in sorted({d.round for d in self.decisions})
        }

    def per_client(self) -> DetectionCounts:
        """Each client judged once per receiver by that receiver's last decision about it (flagged if it left the
        client out), as FedCAP's Table III counts; pooled over receivers. A client removed for good is judged by the
        round that removed it, since a rule's records name it in that round only or in every later one too."""
        judged: dict[str, dict[str, bool]] = {}
        for d in sorted(self.decisions, key=lambda d: d.round):
            for client in d.evaluated:
                judged.setdefault(d.receiver, {})[client] = client in d.flagged
        return pool(
            detection_counts(self.run.faulty_sites, set(last), {c for c, flagged in last.items() if flagged})
            for last in judged.values()
        )

    def by_receiver(self) -> dict[str, DetectionCounts]:
        receivers = sorted({d.receiver for d in self.decisions}, key=site_key)
        return {s: pool(d.counts for d in self.decisions if d.receiver == s) for s in receivers}

    def rows(self) -> list[dict]:
        """``detection.csv``: every decision, per-receiver pools, and with several receivers per-round and run pools."""
        rows = [_row(d.round, d.receiver, d.counts) for d in self.decisions]
        rows += [_row(ALL, s, c) for s, c in self.by_receiver().items()]
        if len(self.by_receiver()) > 1:
            rows += [_row(r, ALL, c) for r, c in self.by_round().items()] + [_row(ALL, ALL, self.total)]
        return rows


def _row(rnd, receiver: str, c: DetectionCounts) -> dict:
    ratios = {k: ("" if v != v else round(v, 6)) for k, v in (("dacc", c.dacc), ("fpr", c.fpr), ("fnr", c.fnr))}
    return {"round": rnd, "receiver": receiver, "tp": c.tp, "fp": c.fp, "tn": c.tn, "fn": c.fn, **ratios}


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
    suffix = rule.detection.peer_suffix
    for column in rule.detection.needs:
        if column not in header:
            raise DetectionError(
                f"{path} has no column '{column}', which the {method} detection rule reads: "
                "the run was written by an older toolkit; run it again"
            )
    if suffix and "senders" in header:
        for row in rows:
            for sender in sorted(names(row["senders"]), key=site_key):
                if f"{sender}{suffix}" not in header:
                    raise DetectionError(
                        f"{path} has no column '{sender}{suffix}' for the sender {sender}, "
                        f"which the {method} detection rule reads"
                    )


SITE_LISTS = ("senders", "rejected")
"""Site lists a record may hold besides those its rule needs: the round's senders and those the model checks refused."""


def _check_sites(run: RunRecords, rule: Rule, path: str, records: list[dict]) -> None:
    """Refuse records whose site lists name a site the job does not run (damaged, or another job's)."""
    sites = set(run.sites)
    lists = [key for key in dict.fromkeys((*rule.detection.needs, *SITE_LISTS)) if key != "round"]
    for record in records:
        for key in lists:
            value = record.get(key)
            strangers = sorted(names(value) - sites, key=site_key) if isinstance(value, (str, list)) else []
            if strangers:
                which = "which is not one of" if len(strangers) == 1 else "which are not among"
                raise DetectionError(
                    f"{path}, round {record['round']}: {key} names {', '.join(strangers)}, {which} the job's sites "
                    f"({', '.join(run.sites)}): the records are damaged or another job's; {RERUN}"
                )


def p2p_decisions(run: RunRecords, rule: Rule) -> list[Decision]:
    """One decision per benign receiving site and round, from its ``rounds.csv`` (whole records only)."""
    decisions, found = [], []
    for site in run.benign:
        path = run.rounds_csv(site)
        if not record_file(path, f"{site}'s rounds.csv"):
            continue  # a site that wrote no round made no decision
        found.append(site)
        rows = site_rows(path, site)
        _check_sites(run, rule, path, rows)
        _check_columns(path, rows, rule, run.method)
        decisions += [_decide(run, rule, path, row["round"], site, row) for row in rows]
    if run.benign and not found:
        raise DetectionError(
            f"no benign site of {run.name} wrote its records (looked for {run.rounds_csv(run.benign[0])}): "
            "has the run started?"
        )
    return sorted(decisions, key=lambda d: (d.round, site_key(d.receiver)))


def star_decisions(run: RunRecords, rule: Rule) -> list[Decision]:
    """One decision per aggregated round, from the server's ``aggregator_state.json``."""
    path = run.state_json()
    if not record_file(path, f"the server's {STATE_FILE}"):
        raise DetectionError(
            f"no {STATE_FILE} at {path}: the server writes it after every aggregated round; did any round aggregate?"
        )
    history = state_history(path, run.method, rule.detection.needs)
    _check_sites(run, rule, path, history)
    return [_decide(run, rule, path, e["round"], SERVER, e) for e in history]


def run_detection(run: RunRecords) -> RunDetection | None:
    """The run's decisions under its method's rule; None for a method without detection."""
    rule = rule_for(run.method)
    if rule is None:
        return None
    decisions = star_decisions(run, rule) if rule.topology == "star" else p2p_decisions(run, rule)
    return RunDetection(run, rule, decisions)


def write_csv(detection: RunDetection, path: str) -> str:
    """Write ``detection.csv`` (:meth:`RunDetection.rows`) to ``path`` atomically."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(COLUMNS))
    writer.writeheader()
    writer.writerows(detection.rows())
    try:
        return atomic_write(path, lambda f: f.write(text.getvalue().encode()))
    except OSError as exc:  # a place that takes no file (/proc), a full disk
        raise UserError(f"{path} cannot be written ({exc.strerror or exc})") from None


def is_detection_csv(path: str) -> bool:
    """Whether ``path`` holds a ``detection.csv`` this module wrote (by its header), so it may be replaced."""
    try:
        with open(path, newline="", errors="replace") as f:
            return next(csv.reader(f), None) == list(COLUMNS)
    except (OSError, csv.Error):
        return False


def _table(title: str, key: str, items) -> str:
    rows = [
        {key: name, **{k: v for k, v in _row("", "", c).items() if k not in ("round", "receiver")}} for name, c in items
    ]
    return f"{title}\n{format_table(rows)}" if rows else f"{title}\n(no decisions)"


def describe(detection: RunDetection) -> str:
    """The figures of one run as text: per receiver, per round and over the run."""
    run, total = detection.run, detection.total
    lines = [
        f"{run.name}: {run.method}, faulty sites {', '.join(run.faulty_sites) or 'none'}",
        f"labelled malicious: {detection.rule.detection.text}",
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
    parser = argparse.ArgumentParser(
        prog=PROG, description="Detection figures (FedCAP's DAcc, FPR, FNR) of one run from its records."
    )
    parser.add_argument("path", help="a sweep run folder (runs/<run>) or a simulator workspace (-w)")
    parser.add_argument("--job", help="the job folder, when the workspace holds no copy of its meta.json")
    parser.add_argument("--csv", help="also write the decisions to this file (a detection.csv)")
    parser.add_argument(
        "--force", action="store_true", help="let --csv replace a file that is not a detection.csv this command wrote"
    )
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

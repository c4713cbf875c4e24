"""Detection tables of a sweep (as FedCAP's Table III, Sec. VI-C): DAcc / FPR / FNR per method and scenario.

One table per dataset and threat (a malfunction kind: columns the number of faulty sites; an attack: columns the
attack kind), rows the methods with a labelling rule, plus ``<method> (per client)`` for a permanent exclusion. A
cell pools TP/FP/TN/FN over every decision of every run, then takes the ratios
(:func:`~lightyear.algorithms.detection.pool`); it reads ``n/a`` with the run named when a run's records give no
figures. :func:`write_detection` is the report's hook.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass, field

from lightyear.algorithms.detection import DetectionCounts, pool
from lightyear.algorithms.malfunctions import NONE
from lightyear.experiments import detection
from lightyear.experiments.results import RunResult, method_order

SECTION = "detection.md"
CLEAN = "clean"
MISSING = "-"


@dataclass(frozen=True)
class Scenario:
    """Where a run goes: its dataset, its threat (None: clean) and its column."""

    dataset: str
    threat: str | None
    column: tuple  # (sort key, label)


@dataclass
class DetectionTable:
    dataset: str
    threat: str
    methods: list[str]
    columns: list[tuple]  # (sort key, label), in order
    cells: dict  # (method, label) -> (DetectionCounts, runs)
    no_detection: list[str]
    damaged: dict = field(default_factory=dict)  # (method, label) -> [runs with damaged records]: no figure

    @property
    def stem(self) -> str:
        return f"{self.dataset}_{self.threat}_detection"

    @property
    def caption(self) -> str:
        by = "attack" if self.threat.startswith("attack") else "number of faulty sites (0 = clean)"
        return (
            f"{self.dataset} - {self.threat}: detection DAcc / FPR / FNR (%) of the senders each method left out, "
            f"pooled over rounds, benign receivers and seeds, by {by}"
        )


def scenario(run: RunResult) -> Scenario:
    """The run's threat and column: an attack (``attack`` in meta.json), a malfunction kind, or clean."""
    if run.attack and run.attack != NONE:
        threat = f"attack_{run.knowledge}" if run.knowledge else "attack"
        return Scenario(run.dataset, threat, (1, str(run.attack), run.faulty))
    if run.faulty:
        return Scenario(run.dataset, run.malfunction, (run.faulty, str(run.faulty)))
    return Scenario(run.dataset, None, (0, "0 (clean)"))


def _columns(threat: str, members: list[tuple[Scenario, RunResult]]) -> dict[int, tuple]:
    """Each member's column in the table of ``threat`` (by position in ``members``)."""
    if not threat.startswith("attack"):
        return {i: sc.column for i, (sc, _) in enumerate(members)}
    one_count = len({sc.column[2] for sc, _ in members if sc.threat is not None}) == 1
    return {
        i: (0, CLEAN) if sc.threat is None else (1, sc.column[1] if one_count else "{1}, {2} faulty".format(*sc.column))
        for i, (sc, _) in enumerate(members)
    }


def build_tables(
    items: list[tuple[RunResult, Scenario, detection.RunDetection | None]],
    damaged: list[tuple[RunResult, Scenario]] = (),
) -> list[DetectionTable]:
    """Tables per dataset and threat; the ``damaged`` runs, whose records give no figures, make their cells ``n/a``."""
    tables = []
    everything = [(run, sc, det, False) for run, sc, det in items] + [(run, sc, None, True) for run, sc in damaged]
    for dataset in sorted({sc.dataset for _, sc, _, _ in everything}):
        mine = [entry for entry in everything if entry[1].dataset == dataset]
        threats = sorted({sc.threat for _, sc, _, _ in mine if sc.threat is not None}) or [CLEAN]
        for threat in threats:
            members = [(sc, run, det, bad) for run, sc, det, bad in mine if sc.threat in (threat, None)]
            where = _columns(threat, [(sc, run) for sc, run, _, _ in members])
            groups: dict[tuple[str, str], list[DetectionCounts]] = {}
            broken: dict[tuple[str, str], list[str]] = {}
            for i, (_, run, det, bad) in enumerate(members):
                if bad:
                    broken.setdefault((run.method, where[i][1]), []).append(run.name)
                elif det is not None:
                    groups.setdefault((run.method, where[i][1]), []).append(det.total)
                if not bad and det is not None and detection.per_client(run.method) and det.decisions:
                    groups.setdefault((per_client_row(run.method), where[i][1]), []).append(det.per_client())
                if bad and detection.per_client(run.method):
                    broken.setdefault((per_client_row(run.method), where[i][1]), []).append(run.name)
            cells = {key: (pool(counts), len(counts)) for key, counts in groups.items() if key not in broken}
            runs = [run for _, run, _, _ in members]
            methods = [
                row
                for m in method_order(runs)
                for row in (m, per_client_row(m))
                if any(key[0] == row for key in [*cells, *broken])
            ]
            silent = [m for m in method_order(runs) if m in detection.no_detection()]
            columns = sorted({where[i] for i in range(len(members))})
            tables.append(DetectionTable(dataset, threat, methods, columns, cells, silent, broken))
    return tables


def per_client_row(method: str) -> str:
    """The row of a rule's per-client counts."""
    return f"{method} (per client)"


def fmt(counts: DetectionCounts | None) -> str:
    if counts is None:
        return MISSING
    return " / ".join(MISSING if math.isnan(v) else f"{100 * v:.1f}" for v in (counts.dacc, counts.fpr, counts.fnr))


def header(table: DetectionTable) -> list[str]:
    return ["method"] + [label for _, label in table.columns]


def cell_text(table: DetectionTable, method: str, label: str) -> str:
    """A cell's figures, or ``n/a`` with the runs whose damaged records leave it without one."""
    if (method, label) in table.damaged:
        return f"n/a (unusable records: {', '.join(table.damaged[(method, label)])})"
    return fmt((table.cells.get((method, label)) or (None,))[0])


def grid(table: DetectionTable) -> list[list[str]]:
    return [[m] + [cell_text(table, m, label) for _, label in table.columns] for m in table.methods]


def to_markdown(table: DetectionTable) -> str:
    lines = [f"**{table.caption}**", "", "| " + " | ".join(header(table)) + " |", "|" + " --- |" * len(header(table))]
    lines += ["| " + " | ".join(row) + " |" for row in grid(table)] or ["| no method with detection ran |"]
    if table.no_detection:
        lines += ["", f"No detection (they exclude no sender): {', '.join(table.no_detection)}."]
    return "\n".join(lines) + "\n"


def write_table(table: DetectionTable, folder: str) -> list[str]:
    os.makedirs(folder, exist_ok=True)
    base = os.path.join(folder, table.stem)
    with open(base + ".csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header(table))
        writer.writerows(grid(table))
    with open(base + ".md", "w") as f:
        f.write(to_markdown(table))
    return [base + ".csv", base + ".md"]


LONG_COLUMNS = ("dataset", "threat", "scenario", "method", "runs", "tp", "fp", "tn", "fn", "dacc", "fpr", "fnr")


def write_long(tables: list[DetectionTable], path: str) -> str:
    """Every cell unscaled, one row each (:data:`LONG_COLUMNS`)."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(LONG_COLUMNS)
        for t in tables:
            for m in t.methods:
                for _, label in t.columns:
                    if (m, label) in t.cells:
                        c, n = t.cells[(m, label)]
                        ratios = ["" if math.isnan(v) else f"{v:.6g}" for v in (c.dacc, c.fpr, c.fnr)]
                        writer.writerow([t.dataset, t.threat, label, m, n, c.tp, c.fp, c.tn, c.fn, *ratios])
    return path


def detect_runs(runs: list[RunResult]) -> tuple[list[tuple], dict[str, str], list[tuple]]:
    """([(run, scenario, detection)], {run left out: why}, [(run, scenario) of those left out])."""
    items, left_out, damaged = [], {}, []
    for run in runs:
        try:
            records = detection.records_from_meta(
                os.path.join(run.folder, "job", "meta.json"), os.path.join(run.folder, "ws"), run.name
            )
            items.append((run, scenario(run), detection.run_detection(records)))
        except detection.DetectionError as exc:
            left_out[run.name] = str(exc)
            damaged.append((run, scenario(run)))
    return items, left_out, damaged


def write_detection(runs: list[RunResult], out: str, log=print) -> list[str]:
    """Write every run's ``detection.csv``, the tables, ``detection_results.csv`` and ``detection.md``; the paths."""
    items, left_out, damaged = detect_runs(runs)
    written = []
    for run, _, det in items:
        path = os.path.join(run.folder, "detection.csv")
        if det is None:
            continue
        if os.path.lexists(path) and not detection.is_detection_csv(path):
            log(f"detection: kept {path}, which lightyear did not write (move it away for the run's own)")
            continue
        written.append(detection.write_csv(det, path))
    tables = build_tables(items, damaged)
    for t in tables:
        written += write_table(t, os.path.join(out, "detection"))
    written.append(write_long(tables, os.path.join(out, "detection_results.csv")))
    written.append(write_section(tables, left_out, os.path.join(out, SECTION)))
    if left_out:
        log(
            f"detection: {len(left_out)} run(s) left out (their records are damaged or lack what the rule reads; "
            f"see {SECTION})"
        )
    return written


def write_section(tables: list[DetectionTable], left_out: dict[str, str], path: str) -> str:
    lines = [
        "## Detection",
        "",
        "DAcc / FPR / FNR (%, FedCAP Sec. VI-C) of the senders each method left out (docs/methods.md, "
        '"Detection metrics"): counts pooled over rounds, benign receivers and seeds; '
        "per run: `runs/<run>/detection.csv`.",
        "",
    ]
    lines += [to_markdown(t) for t in tables] or ["No finished run.", ""]
    if left_out:
        lines += ["Left out of the detection tables:", ""]
        lines += [f"- {name}: {why}" for name, why in sorted(left_out.items())] + [""]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path

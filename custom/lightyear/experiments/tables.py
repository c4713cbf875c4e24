"""The paper's result tables (Tables 2-21): rows methods, columns numbers of malfunctioning (or attacking) sites.

One table per dataset, threat (``<attack>_full`` under full knowledge) and metric, clean runs as column 0. A cell is
the mean and population std of the final test metric of every finished benign site, pooled over all runs (seeds), as
the paper's "average over all clients and all runs"; percent metrics have one decimal, ``results.csv`` is unscaled.
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass

from lightyear.algorithms.attacks.catalogue import names as attack_names
from lightyear.algorithms.attacks.updates import FULL, PARTIAL
from lightyear.algorithms.malfunctions import KINDS, NONE
from lightyear.experiments.results import RunResult, method_order
from lightyear.records import mean_std

PERCENT = {"acc", "dice", "ece", "conf"}
HIGHER_BETTER, LOWER_BETTER = {"acc", "dice"}, {"ece", "loss"}
LABELS = {"acc": "accuracy", "dice": "Dice", "ece": "ECE", "conf": "confidence", "loss": "loss"}
MISSING = "-"
CLEAN_ONLY = "clean"
CELL_COLUMNS = ["method", "faulty", "mean", "std", "runs", "values"]


def threats() -> list[str]:
    """Every threat a table can be about, in order: the malfunctions, then each attack with either knowledge."""
    return [k for k in KINDS if k != NONE] + [a + suffix for a in attack_names() for suffix in ("", "_full")]


@dataclass
class Cell:
    mean: float
    std: float
    runs: int
    values: int


@dataclass
class Table:
    dataset: str
    kind: str  # a malfunction kind, or "clean" for a dataset with clean runs only
    metric: str
    methods: list[str]
    counts: list[int]
    cells: dict  # (method, count) -> Cell
    attack: str = NONE  # an attack's table: the attack and the attackers' knowledge
    knowledge: str = ""

    @property
    def stem(self) -> str:
        return f"{self.dataset}_{self.kind}_{self.metric}"

    @property
    def role(self) -> str:
        """What the faulty sites of the table's runs do: ``attacking`` or ``malfunctioning``."""
        return "attacking" if self.attack != NONE else "malfunctioning"

    @property
    def caption(self) -> str:
        unit = " (%)" if self.metric in PERCENT else ""
        kind = f"attack {self.attack} ({self.knowledge} knowledge)" if self.attack != NONE else self.kind
        return (
            f"{self.dataset} - {kind}: test {LABELS.get(self.metric, self.metric)}{unit} of the benign sites, "
            f"mean ± std over benign sites and seeds, by number of {self.role} sites (0 = clean)"
        )


def pool(runs: list[RunResult], metric: str) -> Cell:
    """Mean and population std of the benign sites' values pooled over ``runs``."""
    values = [v for r in runs for v in r.benign_values(metric)]
    mean, std = mean_std(values)
    return Cell(mean, std, len(runs), len(values))


def build_tables(runs: list[RunResult], extra_metrics: tuple[str, ...] = ()) -> list[Table]:
    """Tables for every dataset, kind and metric (the main one, acc or dice, then ``extra_metrics``)."""
    finished = [r for r in runs if r.finished]
    tables = []
    for dataset in sorted({r.dataset for r in finished}):
        mine = [r for r in finished if r.dataset == dataset]
        main = mine[0].metric
        metrics = [main] + [m for m in extra_metrics if m != main and m in mine[0].rows[0]]
        kinds = [k for k in threats() if any(r.threat == k for r in mine)] or [CLEAN_ONLY]
        for kind in kinds:
            members = [r for r in mine if r.threat in (kind, NONE)]
            attack = kind.removesuffix("_full") if kind.removesuffix("_full") in attack_names() else NONE
            knowledge = (FULL if kind.endswith("_full") else PARTIAL) if attack != NONE else ""
            groups: dict[tuple[str, int], list[RunResult]] = {}
            for r in members:
                groups.setdefault((r.method, r.faulty), []).append(r)
            counts = sorted({k for _, k in groups})
            for metric in metrics:
                cells = {key: pool(group, metric) for key, group in groups.items()}
                tables.append(Table(dataset, kind, metric, method_order(members), counts, cells, attack, knowledge))
    return tables


def fmt(cell: Cell | None, metric: str) -> str:
    if cell is None or math.isnan(cell.mean):
        return MISSING
    scale, digits = (100.0, 1) if metric in PERCENT else (1.0, 3)
    return f"{cell.mean * scale:.{digits}f} ± {cell.std * scale:.{digits}f}"


def best_methods(table: Table, count: int) -> set[str]:
    """The methods with the best mean in a column (none for metrics without a better direction)."""
    means = {m: c.mean for (m, k), c in table.cells.items() if k == count and not math.isnan(c.mean)}
    if not means or table.metric not in HIGHER_BETTER | LOWER_BETTER:
        return set()
    best = (max if table.metric in HIGHER_BETTER else min)(means.values())
    return {m for m, v in means.items() if v == best}


def _grid(table: Table, bold) -> list[list[str]]:
    rows = []
    best = {k: best_methods(table, k) for k in table.counts}
    for method in table.methods:
        row = [method]
        for k in table.counts:
            text = fmt(table.cells.get((method, k)), table.metric)
            row.append(bold(text) if method in best[k] and text != MISSING else text)
        rows.append(row)
    return rows


def header(table: Table) -> list[str]:
    return ["method"] + [f"{k} (clean)" if k == 0 else str(k) for k in table.counts]


def to_markdown(table: Table) -> str:
    lines = [f"**{table.caption}**", "", "| " + " | ".join(header(table)) + " |", "|" + " --- |" * len(header(table))]
    lines += ["| " + " | ".join(row) + " |" for row in _grid(table, lambda t: f"**{t}**")]
    return "\n".join(lines) + "\n"


def to_latex(table: Table) -> str:
    def tex(text: str) -> str:
        return text.replace("_", r"\_").replace("%", r"\%").replace("&", r"\&").replace("±", r"$\pm$")

    cols = "l" + "c" * len(table.counts)
    head = " & ".join(["Method"] + [str(k) for k in table.counts])
    body = [" & ".join(tex(t) for t in row) + r" \\" for row in _grid(table, lambda t: rf"\textbf{{{t}}}")]
    return (
        "\n".join(
            [
                r"\begin{table}[t]",
                r"\centering",
                rf"\caption{{{tex(table.caption)}}}",
                rf"\label{{tab:{table.stem}}}",
                rf"\begin{{tabular}}{{{cols}}}",
                r"\toprule",
                rf" & \multicolumn{{{len(table.counts)}}}{{c}}{{Number of {table.role} sites}} \\",
                head + r" \\",
                r"\midrule",
                *body,
                r"\bottomrule",
                r"\end{tabular}",
                r"\end{table}",
            ]
        )
        + "\n"
    )


def write_table(table: Table, folder: str) -> list[str]:
    """``<stem>.csv`` (formatted cells), ``.md`` and ``.tex`` in ``folder``; return the paths."""
    os.makedirs(folder, exist_ok=True)
    base = os.path.join(folder, table.stem)
    with open(base + ".csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header(table))
        writer.writerows(_grid(table, lambda t: t))
    with open(base + ".md", "w") as f:
        f.write(to_markdown(table))
    with open(base + ".tex", "w") as f:
        f.write(to_latex(table))
    return [base + ext for ext in (".csv", ".md", ".tex")]


def write_long(tables: list[Table], path: str) -> str:
    """Every cell of every table, unscaled, a row each (an attack's with malfunction ``none``, and vice versa)."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["dataset", "malfunction", "attack", "knowledge", "metric"] + CELL_COLUMNS)
        for t in tables:
            scenario = [t.dataset, t.kind if t.attack == NONE else NONE, t.attack, t.knowledge, t.metric]
            for (method, k), c in sorted(t.cells.items(), key=lambda item: (t.methods.index(item[0][0]), item[0][1])):
                writer.writerow(scenario + [method, k, f"{c.mean:.6g}", f"{c.std:.6g}", c.runs, c.values])
    return path

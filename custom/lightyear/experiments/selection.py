"""Who selected whom: per-round peer selection and agreement scores of a run, and selection quality.

A run qualifies when its sites' ``rounds.csv`` have a ``selected`` column (``;``-separated) and ``site-J_score``
columns. A site had the *opportunity* to select peer J (never itself) in a round when J's model was scored or J is in
``selected``; selection quality counts opportunities and those taken over benign sites, faulty peers and rounds.
*Rounds to exclusion*: rounds before every benign site stopped selecting faulty peers for good (``never``: not by the
last round). Damaged records give a run no figures (:class:`~lightyear.records.RecordsError`).
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass

from lightyear.experiments.results import RunResult, site_key
from lightyear.records import RecordsError, record_file, table_rows

NAN = float("nan")
NO_ROWS = "no run with faulty sites logged a peer selection"


@dataclass
class Selection:
    run: str
    sites: list[str]  # sites that logged a selection, in order
    peers: list[str]  # every site of the run
    faulty: list[str]
    rounds: list[int]
    selected: dict  # site -> peer -> [1.0 selected | 0.0 candidate, not selected | nan no candidate] per round
    scores: dict  # site -> peer -> [agreement score | nan] per round

    @property
    def benign(self) -> list[str]:
        return [s for s in self.sites if s not in self.faulty]


def _float(text) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return NAN
    return value if math.isfinite(value) else NAN


def read_selection(run: str, rounds_csv: dict[str, str], peers: list[str], faulty: list[str]) -> Selection | None:
    """Selection and scores from each site's ``rounds.csv`` (``{site: path}``); None if none logged a selection."""
    tables, problems = {}, []
    for site, path in rounds_csv.items():
        if not record_file(path, f"{site}'s rounds.csv"):
            continue
        rows, bad = table_rows(path, f"{site}'s rounds.csv", allow_empty=True)
        problems += [f"{site}'s rounds.csv {path}: {p}" for p in bad]
        good = []
        for row in rows:
            if _round(row.get("round")) is None:
                problems.append(f"{site}'s rounds.csv {path}: round {row.get('round')!r:.40} is not a round number")
            else:
                good.append(row)
        if good and "selected" in good[0]:
            tables[site] = good
    if problems:
        raise RecordsError(f"{problems[0]}: the selection figures need every round's whole record; run the job again")
    if not tables:
        return None
    rounds = sorted({_round(r["round"]) for rows in tables.values() for r in rows})
    selected: dict = {}
    scores: dict = {}
    for site, rows in tables.items():
        by_round = {_round(r["round"]): r for r in rows}
        selected[site], scores[site] = {}, {}
        for peer in peers:
            sel, sc = [], []
            for rnd in rounds:
                row = by_round.get(rnd)
                chosen = set(filter(None, (row or {}).get("selected", "").split(";")))
                score = _float((row or {}).get(f"{peer}_score"))
                candidate = row is not None and peer != site and (not math.isnan(score) or peer in chosen)
                sel.append((1.0 if peer in chosen else 0.0) if candidate else NAN)
                sc.append(score if peer != site else NAN)
            selected[site][peer], scores[site][peer] = sel, sc
    sites = sorted(tables, key=site_key)
    return Selection(run, sites, sorted(peers, key=site_key), sorted(faulty, key=site_key), rounds, selected, scores)


def _round(text) -> int | None:
    try:
        value = int(text)
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def run_selection(run: RunResult) -> Selection | None:
    """The selection record of a sweep run, or None when its sites logged no selection."""
    return read_selection(run.name, {s: run.rounds_csv(s) for s in run.sites}, run.sites, run.faulty_sites)


def counts(sel: Selection) -> tuple[int, int, set[int]]:
    """(selections of faulty peers by benign sites, opportunities, rounds in which one happened)."""
    taken = chances = 0
    bad_rounds: set[int] = set()
    for site in sel.benign:
        for peer in sel.faulty:
            for rnd, value in zip(sel.rounds, sel.selected[site][peer]):
                if math.isnan(value):
                    continue
                chances += 1
                if value:
                    taken += 1
                    bad_rounds.add(rnd)
    return taken, chances, bad_rounds


def rounds_to_exclusion(sel: Selection) -> int | None:
    """Rounds until no benign site selected a faulty peer any more (0: never did; None: still did at the end)."""
    _, _, bad = counts(sel)
    if not bad:
        return 0
    last = max(bad)
    return None if last == sel.rounds[-1] else sel.rounds.index(last) + 1


def run_rows(items: list[tuple[RunResult, Selection]]) -> list[dict]:
    """One row per run with faulty sites: its selections, opportunities, fraction and rounds to exclusion."""
    rows = []
    for run, sel in items:
        if not sel.faulty:
            continue
        taken, chances, _ = counts(sel)
        rte = rounds_to_exclusion(sel)
        scenario = {"run": run.name, "method": run.method, "dataset": run.dataset, "malfunction": run.threat}
        scenario.update(faulty=run.faulty, seed=run.seed, rounds=len(sel.rounds))
        rows.append({**scenario, **_selections(taken, chances), "rounds_to_exclusion": "never" if rte is None else rte})
    return rows


def kind_rows(items: list[tuple[RunResult, Selection]], left_out: list[RunResult] = ()) -> list[dict]:
    """Per method, dataset and threat, pooled; a row that would pool a run of ``left_out`` reads ``n/a``."""
    groups: dict[tuple, list[dict]] = {}
    for row in run_rows(items):
        groups.setdefault((row["method"], row["dataset"], row["malfunction"]), []).append(row)
    missing: dict[tuple, list[str]] = {}
    for run in left_out:
        if run.faulty_sites:
            missing.setdefault((run.method, run.dataset, run.threat), []).append(run.name)
    out = []
    for key, rows in sorted(groups.items()):
        method, dataset, kind = key
        taken = sum(r["selections"] for r in rows)
        chances = sum(r["opportunities"] for r in rows)
        never = sum(r["rounds_to_exclusion"] == "never" for r in rows)
        row = {"method": method, "dataset": dataset, "malfunction": kind, "runs": len(rows)}
        row.update(_selections(taken, chances), runs_never_excluding=never, left_out="")
        if key in missing:
            row.update({k: "n/a" for k in ("selections", "opportunities", "fraction", "runs_never_excluding")})
            row["left_out"] = ", ".join(missing[key]) + " (unusable records)"
        out.append(row)
    return out


def _selections(taken: int, chances: int) -> dict:
    return {"selections": taken, "opportunities": chances, "fraction": round(taken / chances, 6) if chances else ""}


def write_rows(rows: list[dict], base: str, title: str) -> list[str]:
    """``base.csv`` and ``base.md`` (a titled Markdown table); nothing but a note when there are no rows."""
    os.makedirs(os.path.dirname(os.path.abspath(base)), exist_ok=True)
    cols = list(rows[0]) if rows else ["note"]
    with open(base + ".csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=cols)
        writer.writeheader()
        writer.writerows(rows or [{"note": NO_ROWS}])
    lines = [f"**{title}**", "", "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows] or [f"| {NO_ROWS} |"]
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    return [base + ".csv", base + ".md"]

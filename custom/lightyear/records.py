"""Per-round records and the end-of-run summary, written as rounds finish (no FLARE import)."""

from __future__ import annotations

import argparse
import csv
import glob
import io
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from lightyear.cli import UserError, command, read_text


def check_records_file(name) -> str:
    """``records_file`` must be a plain file name: it is written inside the run folder, nowhere else."""
    if not isinstance(name, str) or name in ("", ".", "..") or any(c in name for c in "/\\\0"):
        raise ValueError(
            f"records_file must be a plain file name such as 'rounds.csv' (written in the run folder), got {name!r}"
        )
    return name


def _umask() -> int:
    """The process's umask, read without changing it where Linux shows it (/proc/self/status)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1], 8) for line in f if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        mask = os.umask(0o022)
        os.umask(mask)
        return mask


def atomic_write(path: str, write) -> str:
    """Write ``path`` by ``write(file_object)`` into a temporary file beside it, then rename it into place: a crash
    leaves the previous version or the new one, never half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes it owner-only; the file gets what open() would give it
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def save_npz_atomic(path: str, arrays: Mapping[str, np.ndarray]) -> str:
    return atomic_write(path, lambda f: np.savez(f, **arrays))


class RoundLog:
    """Appends one CSV row per round at once, so a crash loses no finished round. The header is fixed by the first
    row or the existing file (a restarted site keeps its rows); later rows may leave columns out, not add new ones."""

    def __init__(self, path: str):
        self.path = path
        self.columns: list[str] | None = None
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        if os.path.exists(path):
            with open(path, newline="") as f:
                self.columns = next(csv.reader(f), None)

    def write(self, row: dict) -> None:
        row = {k: _cell(v) for k, v in row.items()}
        new = self.columns is None
        if new:
            self.columns = list(row)
        if extra := [k for k in row if k not in self.columns]:
            raise ValueError(f"round record has columns {extra} that the header lacks")
        with open(self.path, "a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns, restval="")
            if new:
                writer.writeheader()
            writer.writerow(row)


SITE_STATUS_FILE = "site_status.json"


def write_site_status(folder: str, site: str, status: str, reason: str, last_round: int, checkpoint: str) -> str:
    """Write how a site's run ended to its ``site_status.json``, known even when the server is gone."""
    blob = {"site": site, "status": status, "reason": reason, "last_round": last_round, "checkpoint": checkpoint}
    data = json.dumps(blob, indent=1).encode()
    return atomic_write(os.path.join(folder, SITE_STATUS_FILE), lambda f: f.write(data))


def _cell(value):
    if isinstance(value, (list, tuple, set)):
        return ";".join(str(v) for v in value)
    if isinstance(value, float):
        return round(value, 6)
    return value


def read_csv(path: str) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


class RecordsError(UserError):
    """A record file (summary, rounds) that cannot be read: not text, empty, cut or damaged."""


def record_file(path: str, what: str = "the file") -> bool:
    """Whether the record file ``path`` exists; a :class:`RecordsError` when something else is in its place."""
    if not os.path.lexists(path):
        return False
    if not os.path.exists(path):
        raise RecordsError(
            f"{what} {path} is a link that leads nowhere (or to itself): the records are damaged; run the job again"
        )
    if not os.path.isfile(path):
        raise RecordsError(f"{what} {path} is not a file (a folder?): the records are damaged; run the job again")
    return True


def table_rows(path: str, what: str = "the file", allow_empty: bool = False) -> tuple[list[dict], list[str]]:
    """(well-formed rows, [what is wrong with each other row]) of the CSV file ``path``: a row with more or fewer
    fields than the header is left out and described by its line. A file that is not UTF-8 text, or (unless
    ``allow_empty``) is empty or has only a header, is a :class:`RecordsError`."""
    text = read_text(path, what, "it is damaged: run the job again")
    try:
        return _table_rows(text, path, what, allow_empty)
    except csv.Error as exc:  # a stray quote makes the rest of the file one field, past csv's field limit
        raise RecordsError(
            f"{what} {path} is not a readable CSV table ({exc}): it is damaged; run the job again"
        ) from None


def _table_rows(text: str, path: str, what: str, allow_empty: bool) -> tuple[list[dict], list[str]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header or not any(h.strip() for h in header):
        if allow_empty:
            return [], []
        raise RecordsError(f"{what} {path} is empty: the run did not finish writing it (see the run's log.txt)")
    rows, problems = [], []
    for fields in reader:
        if not fields:
            continue
        if len(fields) != len(header):
            count = f"{len(fields)} field" + ("s" if len(fields) != 1 else "")
            problems.append(
                f"line {reader.line_num} has {count}, the header {len(header)} (the file is cut or damaged)"
            )
            continue
        rows.append(dict(zip(header, fields)))
    if not rows and not problems and not allow_empty:
        raise RecordsError(
            f"{what} {path} has a header and no rows: the run did not finish writing it (see the run's log.txt)"
        )
    return rows, problems


def read_table(path: str, what: str = "the file") -> list[dict]:
    """The rows of the CSV file ``path``; a :class:`RecordsError` naming the first bad row (:func:`table_rows`)."""
    rows, problems = table_rows(path, what)
    if problems:
        raise RecordsError(f"{what} {path}: {problems[0]}; run the job again or repair the file")
    return rows


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and population standard deviation; (nan, nan) for no values."""
    values = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not values:
        return float("nan"), float("nan")
    m = sum(values) / len(values)
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def summarize_sites(results: Iterable[dict], metrics: Sequence[str] = ("acc", "ece", "conf", "loss")) -> list[dict]:
    """Rows of final test metrics, one per site, then the mean and std over the finished benign sites (malfunction
    ``none``). Each result is ``{"site", "malfunction", "test": {metric: value}}`` with optional ``status``
    (``finished``, ``failed``, ``dropped``), ``last_round`` and ``reason``; Dice is included when present."""
    results = sorted(results, key=lambda r: r["site"])
    keys = list(metrics)
    if any("dice" in r.get("test", {}) for r in results):
        keys = ["dice"] + [k for k in keys if k != "dice"]
    rows = []
    for r in results:
        row = {"site": r["site"], "malfunction": r.get("malfunction", "none"), "status": r.get("status", "finished")}
        row.update({k: r.get("test", {}).get(k, float("nan")) for k in keys})
        row.update({"last_round": r.get("last_round", ""), "reason": r.get("reason", "")})
        rows.append(row)
    benign = [r for r in rows if r["malfunction"] == "none" and r["status"] == "finished"]
    stats = {k: mean_std([r[k] for r in benign]) for k in keys}
    for name, i in (("mean_benign", 0), ("std_benign", 1)):
        labels = {"site": name, "malfunction": f"n={len(benign)}", "status": ""}
        rows.append({**labels, **{k: v[i] for k, v in stats.items()}, "last_round": "", "reason": ""})
    return rows


SUMMARY_LABELS = ("site", "malfunction", "status", "last_round", "reason")
"""The summary columns that describe a site; every other one is a metric."""


def check_summary_metrics(rows: list[dict], path: str) -> None:
    """Refuse a summary with a metric that is not a number or infinite; an empty cell or NaN is no value."""
    for i, row in enumerate(rows):
        for column, text in row.items():
            if column not in SUMMARY_LABELS and not _finite_or_no_value(text):
                raise RecordsError(
                    f"the summary {path}: {row.get('site') or f'row {i + 1}'}: {column} {text!r:.40} is not a finite "
                    "number (the benign mean and std would be wrong): run the job again or repair the file"
                )


def _finite_or_no_value(text: str) -> bool:
    if not text.strip():
        return True
    try:
        return not math.isinf(float(text))
    except ValueError:
        return False


def write_summary(rows: list[dict], folder: str, stem: str = "summary") -> str:
    """Write ``<folder>/<stem>.csv`` and ``.json`` (each atomically); return the CSV path."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{stem}.csv")
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows({k: _cell(v) for k, v in r.items()} for r in rows)
    atomic_write(path, lambda f: f.write(text.getvalue().encode()))
    blob = json.dumps(rows, indent=1, default=float).encode()
    atomic_write(os.path.join(folder, f"{stem}.json"), lambda f: f.write(blob))
    return path


def format_table(rows: list[dict]) -> str:
    """A fixed-width text table of summary rows."""
    cols = list(rows[0])
    text = [[str(_cell(r.get(c, ""))) for c in cols] for r in rows]
    widths = [max(len(c), *(len(t[i]) for t in text)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(t, widths)) for t in text]
    return "\n".join(lines)


def find_summary(workspace: str) -> str | None:
    """The summary.csv a finished run wrote under a simulator workspace (or a run folder)."""
    for dirpath, dirs, files in os.walk(workspace):
        dirs.sort()
        if "summary.csv" in files:
            return os.path.join(dirpath, "summary.csv")
    return None


FINISHED = "finished"


def run_failure(workspace: str) -> str | None:
    """Why the simulator run in ``workspace`` has no result, or None when a site finished: by the summary's
    ``status`` column, else each site's ``site_status.json``. (FLARE's simulator exits 0 either way.)"""
    summary = find_summary(workspace)
    if summary is not None:
        try:
            rows = [r for r in read_table(summary, "the summary") if r.get("site") not in ("mean_benign", "std_benign")]
        except RecordsError as exc:
            return str(exc)
        if any(r.get("status", FINISHED) == FINISHED for r in rows):
            return None
        ended = _endings([(r.get("site"), r.get("status") or "?", r.get("reason")) for r in rows])
        return f"no site finished ({ended or 'no site rows'}; {summary})"
    statuses = {}
    for path in sorted(glob.glob(os.path.join(workspace, "*", "simulate_job", SITE_STATUS_FILE))):
        try:
            status = json.loads(read_text(path, "the site status"))
        except (UserError, ValueError):
            continue
        if isinstance(status, dict):
            statuses[status.get("site", path)] = status
    if any(s.get("status") == FINISHED for s in statuses.values()):
        return None
    ended = _endings([(site, s.get("status"), s.get("reason")) for site, s in statuses.items()])
    log = os.path.join(workspace, "server", "simulate_job", "log.txt")
    return f"no site finished and no summary.csv was written ({ended or 'no site reported'}; see {log})"


MAX_REASON = 600
"""Characters of one reason that are kept; a longer one keeps its start and its end (its cause)."""


def _endings(sites: list[tuple]) -> str:
    """``site-1, site-2 failed (reason), site-3 dropped``: how each site ended, sites that ended alike together."""
    groups: dict[tuple, list[str]] = {}
    for site, status, reason in sites:
        text = " ".join(str(reason or "").split())
        if len(text) > MAX_REASON:
            text = text[: MAX_REASON // 2 - 3] + " ... " + text[-(MAX_REASON // 2 - 2) :]
        groups.setdefault((status, text), []).append(str(site))
    return ", ".join(
        f"{', '.join(names)} {status}" + (f" ({text})" if text else "") for (status, text), names in groups.items()
    )


@command("lightyear-summary")
def summary_main(argv=None) -> int:
    """``lightyear-summary WORKSPACE``: print the summary table a run wrote; a damaged one ends in one line."""
    parser = argparse.ArgumentParser(
        prog="lightyear-summary", description="Print the final summary of a LIGHTYEAR toolkit run."
    )
    parser.add_argument("workspace", help="the simulator workspace (-w) or a job's run folder")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.workspace):
        raise RecordsError(f"no workspace folder at {args.workspace}: give the simulator's -w folder or a run folder")
    path = find_summary(args.workspace)
    if path is None:
        raise RecordsError(
            f"no summary.csv under {args.workspace}: the run has not finished (or ran elsewhere); see its log.txt"
        )
    rows = read_table(path, "the summary")
    check_summary_metrics(rows, path)
    print(path)
    print(format_table(rows))
    return 0

"""``lightyear-report SWEEP_DIR [--out DIR]``: the paper's tables and figures from a sweep folder.

Writes :data:`WRITES` under ``DIR`` (default ``SWEEP_DIR/report``; described in docs/jobs-and-settings.md,
"Experiments"). Unreadable runs, summary rows and ``rounds.csv`` are left out, each named with the reason on stderr and
in ``report.md``. An earlier report's files (listed in the :data:`MARK` file) are replaced; another's only with
``--force``.
"""

from __future__ import annotations

import argparse
import os
import sys

from lightyear.cli import UserError, command, folder_name, output_folder
from lightyear.experiments import detection_tables, figures, selection, selection_plots, tables
from lightyear.experiments.results import ReportError, scan_sweep

STATUS_HINT = "sweep_status.json"
PROG = "lightyear-report"
MARK = ".lightyear-report"
WRITES = (
    "report.md",
    "results.csv",
    "tables",
    "figures",
    "selection",
    "selection_quality.csv",
    "selection_quality.md",
    "selection_rounds.csv",
    "selection_rounds.md",
    "detection",
    "detection_results.csv",
    detection_tables.SECTION,
)
"""What a report writes in its folder, besides the mark."""
TITLE = "# Sweep report ("


def warn(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


def _written_here(out: str) -> bool:
    """Whether ``out`` is a report folder this command wrote (its mark, or a report.md of its own)."""
    if os.path.isfile(os.path.join(out, MARK)):
        return True
    try:
        with open(os.path.join(out, "report.md"), errors="replace") as f:
            return f.readline().startswith(TITLE)
    except OSError:
        return False


def check_report_folder(out: str, force: bool = False) -> None:
    """Refuse a report folder holding files of the report's names that this command did not write."""
    if force or not os.path.isdir(out) or _written_here(out):
        return
    if present := [name for name in WRITES if os.path.lexists(os.path.join(out, name))]:
        raise ReportError(
            f"--out {out} holds {', '.join(present[:4])} that lightyear-report did not write: "
            "choose another --out, or add --force to replace them"
        )


def report(
    sweep_dir: str, out: str | None = None, extra_metrics: tuple[str, ...] = (), log=print, force: bool = False
) -> dict:
    """Write the report of ``sweep_dir``; the paths written, by kind. Foreign files are replaced only if ``force``."""
    out = os.path.abspath(out or os.path.join(sweep_dir, "report"))
    check_report_folder(out, force)
    earlier = _listed(out)  # what an earlier report here wrote
    runs, skipped = scan_sweep(sweep_dir)
    left_out = [f"run {name} left out: {why}" for name, why in skipped]
    left_out += [f"run {r.name}: {p}" for r in runs for p in r.problems]
    for line in left_out:
        warn(line)
    finished = [r for r in runs if r.finished]
    if not finished:
        raise ReportError(
            f"none of the {len(runs) + len(skipped)} runs in {sweep_dir} has finished "
            "(no summary.csv with a usable row of a "
            f"finished benign site): see {os.path.join(sweep_dir, STATUS_HINT)} and the runs' log.txt"
        )
    out = output_folder(out)
    _mark(out, earlier)
    written: dict[str, list[str]] = {"tables": [], "figures": [], "selection": []}
    all_tables = tables.build_tables(runs, extra_metrics)
    groups: dict[tuple[str, str], list[tables.Table]] = {}  # a figure per dataset and metric
    for t in all_tables:
        written["tables"] += tables.write_table(t, os.path.join(out, "tables"))
        groups.setdefault((t.dataset, t.metric), []).append(t)
    written["tables"].append(tables.write_long(all_tables, os.path.join(out, "results.csv")))
    topology = {r.method: r.topology for r in runs}
    for (dataset, metric), group in groups.items():
        path = os.path.join(out, "figures", f"{dataset}_{metric}.png")
        written["figures"].append(figures.save(figures.metric_figure(group), path))
        if len(figures.topology_means(group[0], topology)) > 1:
            path = os.path.join(out, "figures", f"{dataset}_{metric}_topology.png")
            written["figures"].append(figures.save(figures.topology_figure(group, topology), path))
    items, unselected = [], []
    for run in finished:
        try:
            sel = selection.run_selection(run)
        except UserError as exc:
            left_out.append(f"run {run.name}: peer selection left out: {exc}")
            warn(left_out[-1])
            unselected.append(run)
            continue
        if sel is None:
            continue
        items.append((run, sel))
        base = os.path.join(out, "selection", run.name)
        tau = run.job_setting("tau")
        tau = tau if isinstance(tau, (int, float)) else None
        written["selection"] += [
            figures.save(selection_plots.selection_heatmap(sel), base + "_selection.png"),
            figures.save(selection_plots.score_plot(sel, tau), base + "_scores.png"),
        ]
    written["selection"] += selection.write_rows(
        selection.kind_rows(items, unselected),
        os.path.join(out, "selection_quality"),
        "How often benign sites selected faulty peers (selections / opportunities)",
    )
    written["selection"] += selection.write_rows(
        selection.run_rows(items),
        os.path.join(out, "selection_rounds"),
        "Per run: selections of faulty peers and rounds until every benign site stopped",
    )
    written["detection"] = detection_tables.write_detection(finished, out, log)
    written["report"] = [write_index(out, runs, all_tables, written, left_out, len(skipped))]
    _remove_stale(out, earlier, written, log)
    log(
        f"{len(finished)}/{len(runs) + len(skipped)} runs finished; "
        f"{len(all_tables)} tables, {len(written['figures'])} figures, "
        f"{len(items)} runs with peer selection -> {written['report'][0]}"
    )
    return written


def _listed(out: str) -> list[str]:
    """The files (relative to ``out``) an earlier report listed in its mark as written; [] if none."""
    try:
        with open(os.path.join(out, MARK), errors="replace") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return []
    return [rel for rel in lines if rel and not os.path.isabs(rel) and ".." not in rel.split("/")]


def _mark(out: str, files: list[str]) -> None:
    with open(os.path.join(out, MARK), "w") as f:
        f.write("lightyear-report writes this folder: running it again replaces what it wrote, listed below\n")
        f.writelines(f"{rel}\n" for rel in files)


def _remove_stale(out: str, earlier: list[str], written: dict, log) -> None:
    """Mark what this report wrote in ``out``; remove only what an earlier report wrote there and this one did not."""
    inside = [p for paths in written.values() for p in paths if os.path.abspath(p).startswith(out + os.sep)]
    kept = {os.path.relpath(p, out).replace(os.sep, "/") for p in inside}
    stale = [rel for rel in earlier if rel not in kept and os.path.isfile(os.path.join(out, rel))]
    for rel in stale:
        os.remove(os.path.join(out, rel))
    _mark(out, sorted(kept))
    if stale:
        log(f"removed {len(stale)} file(s) of the earlier report that this one does not hold")


def write_index(out: str, runs, all_tables, written, left_out: list[str] = (), unreadable: int = 0) -> str:
    """``report.md``: everything on one page, and what was left out (of which ``unreadable`` whole runs)."""
    missing = [r.name for r in runs if not r.finished]
    lines = [f"# Sweep report ({len(runs) - len(missing)}/{len(runs) + unreadable} runs finished)", ""]
    if missing:
        lines += [
            f"Not finished (no summary, or no benign site finished; left out): {', '.join(missing)}; "
            f"see `{STATUS_HINT}` in the sweep folder.",
            "",
        ]
    if left_out:
        lines += ["Unusable records (left out):", "", *[f"- {line}" for line in left_out], ""]
    lines += [
        "Cells: mean ± std of the benign sites' final test metric, pooled over all benign sites of all seeds.",
        "",
        "## Tables",
        "",
    ]
    for t in all_tables:
        lines += [tables.to_markdown(t)]
    lines += ["## Figures", ""]
    lines += [f"![{os.path.basename(p)}]({os.path.relpath(p, out)})" for p in written["figures"]] + [""]
    lines += ["## Peer selection", ""]
    for name in ("selection_quality.md", "selection_rounds.md"):
        with open(os.path.join(out, name)) as f:
            lines += [f.read()]
    lines += [
        f"- [{os.path.basename(p)}]({os.path.relpath(p, out)})" for p in written["selection"] if p.endswith(".png")
    ]
    with open(os.path.join(out, detection_tables.SECTION)) as f:
        lines += ["", f.read()]
    path = os.path.join(out, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


@command(PROG)
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Tables and figures (as in the LIGHTYEAR paper) from a lightyear-sweep folder."
    )
    parser.add_argument("sweep_dir", help="the folder given to lightyear-sweep --out")
    parser.add_argument("--out", help="where the report goes (default: SWEEP_DIR/report)")
    parser.add_argument(
        "--metrics", default="", help="more metrics to tabulate besides acc/dice, comma-separated: ece, conf, loss"
    )
    parser.add_argument(
        "--force", action="store_true", help="replace files in --out that lightyear-report did not write"
    )
    args = parser.parse_args(argv)
    extra = tuple(m.strip() for m in args.metrics.split(",") if m.strip())
    if unknown := [m for m in extra if m not in tables.LABELS]:
        parser.error(f"unknown metrics {', '.join(unknown)}; choose from {', '.join(tables.LABELS)}")
    if args.out is not None:
        folder_name(args.out)
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ReportError(f"--out {args.out} is a file: give a folder for the report (it is created if missing)")
    report(args.sweep_dir, args.out, extra, force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())

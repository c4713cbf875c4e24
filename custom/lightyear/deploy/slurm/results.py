"""Whether a SLURM run's results arrived: a ``summary.csv`` under its results folder listing every site as ``finished``.
Both batch modes end with it: FLARE reports a job as done even when its sites failed."""

from __future__ import annotations

import argparse
import sys

from lightyear.records import find_summary, format_table, read_csv

SUMMARY_ROWS = ("mean_benign", "std_benign")


def unfinished(folder: str, sites: list[str]) -> tuple[str | None, list[str]]:
    """(the summary found under ``folder`` or None, the sites it does not list as finished)."""
    path = find_summary(folder)
    if path is None:
        return None, list(sites)
    status = {r.get("site"): r.get("status", "finished") for r in read_csv(path) if r.get("site") not in SUMMARY_ROWS}
    return path, [s for s in sites if status.get(s) != "finished"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lightyear.deploy.slurm.results",
        description="Print a run's summary; exit 1 unless every site finished.",
    )
    ap.add_argument("folder", help="the results folder (a simulator workspace or a downloaded job)")
    ap.add_argument("sites", nargs="+", help="the sites the job deployed to")
    args = ap.parse_args(argv)
    path, missing = unfinished(args.folder, args.sites)
    if path is None:
        print(f"no summary.csv under {args.folder}: the job did not finish (see the logs there)", file=sys.stderr)
        return 1
    print(path)
    print(format_table(read_csv(path)))
    if missing:
        print(f"sites not finished: {', '.join(missing)}", file=sys.stderr)
        return 1
    print(f"all {len(args.sites)} sites finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())

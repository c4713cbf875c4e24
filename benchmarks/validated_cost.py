"""What LIGHTYEAR's validated aggregation costs beside the paper rule, and how many honest peers it keeps.

    python benchmarks/validated_cost.py                      # runs both digits jobs (8 sites, 12 rounds), in turn
    python benchmarks/validated_cost.py --validated WS1 --paper WS2   # reads two finished simulator workspaces

Runs the main job (``lightyear``, the validated aggregation) and the same job with the paper rule
(``lightyear_paper``, Eq. 18 as published) one after the other on this machine, or reads two finished
runs, and prints from their ``rounds.csv``:

* validation passes a site-round beyond scoring (``validation_evals``): mean, maximum, and the share of
  site-rounds within |S| + 2, |S| the peers selected that round;
* ``aggregate_s`` (seconds a site-round spends aggregating, scoring excluded), mean for each rule, and
  their ratio;
* the honest peers the validated rule left out of the peers it selected (every site of these jobs is
  honest unless ``--attackers`` names some), and the benign sites' mean final test accuracy for each rule.
"""

from __future__ import annotations

import argparse
import csv
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROG = "benchmarks/validated_cost.py"


def site_rows(workspace: str) -> dict[str, list[dict]]:
    """site -> its rounds.csv rows, from a simulator workspace."""
    out = {}
    for path in sorted(glob.glob(os.path.join(workspace, "site-*", "*", "rounds.csv"))):
        with open(path, newline="") as f:
            out[path.split(os.sep)[-3]] = list(csv.DictReader(f))
    return out


def names(cell: str) -> list[str]:
    return re.findall(r"site-\d+", cell or "")


def figures(rows: dict[str, list[dict]], attackers: set[str]) -> dict:
    """The printed figures of one run (module docstring)."""
    passes, within, aggregate, selected, kept, accuracy = [], 0, [], 0, 0, []
    for site, records in rows.items():
        if site in attackers:
            continue
        for r in records:
            if r.get("validation_evals", "") != "":
                passes.append(int(float(r["validation_evals"])))
                within += passes[-1] <= int(r["n_selected"]) + 2
            aggregate.append(float(r["aggregate_s"]))
            honest = [p for p in names(r["selected"]) if p not in attackers]
            selected += len(honest)
            kept += len([p for p in names(r.get("adopted", r["selected"])) if p in honest])
        if records:
            accuracy.append(float(records[-1]["test_acc"]))
    return {
        "passes": passes,
        "within": within,
        "aggregate_s": statistics.mean(aggregate) if aggregate else float("nan"),
        "selected": selected,
        "left_out": selected - kept,
        "accuracy": statistics.mean(accuracy) if accuracy else float("nan"),
    }


def run_job(method: str, seed: int, workspace: str) -> None:
    jobs = os.path.join(workspace, "jobs")
    subprocess.run(
        ["lightyear-jobs", "--method", method, "--dataset", "digits", "--seed", str(seed), "--out", jobs],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    job = os.path.join(jobs, f"{method}_digits")
    done = subprocess.run(
        ["lightyear-simulate", job, "-w", os.path.join(workspace, "ws"), "-t", "8"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    if done.returncode:
        raise SystemExit(f"{PROG}: the {method} job failed (exit {done.returncode}); see {workspace}/ws")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--validated", help="a finished workspace of the validated rule (default: run the job)")
    parser.add_argument("--paper", help="a finished workspace of the paper rule (default: run the job)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--attackers", default="", help="comma-separated attacking sites, left out of the figures")
    args = parser.parse_args(argv)
    if bool(args.validated) != bool(args.paper):
        parser.error("give both --validated and --paper, or neither (then both jobs run)")
    for given in (args.validated, args.paper):
        if given and not glob.glob(os.path.join(given, "site-*", "*", "rounds.csv")):
            parser.error(f"{given} holds no site-*/*/rounds.csv: give a finished simulator workspace")
    workspaces = {}
    with tempfile.TemporaryDirectory(prefix="validated_cost-") as scratch:
        for method, given in (("lightyear", args.validated), ("lightyear_paper", args.paper)):
            if given is None:
                given = os.path.join(scratch, method)
                run_job(method, args.seed, given)
                given = os.path.join(given, "ws")
            workspaces[method] = figures(site_rows(given), {a for a in args.attackers.split(",") if a})
    validated, paper = workspaces["lightyear"], workspaces["lightyear_paper"]
    passes = validated["passes"]
    if not passes:
        print("the validated run recorded no validation_evals: was it run with aggregation: validated?")
        return 1
    print(
        f"validation passes a site-round (validated): mean {statistics.mean(passes):.2f}, max {max(passes)}, "
        f"within |S| + 2 in {validated['within']} of {len(passes)} site-rounds"
    )
    ratio = validated["aggregate_s"] / paper["aggregate_s"] if paper["aggregate_s"] else float("nan")
    print(
        f"aggregate_s a site-round: validated {validated['aggregate_s']:.3f} s, paper {paper['aggregate_s']:.3f} s, "
        f"ratio {ratio:.2f}"
    )
    share = 100.0 * validated["left_out"] / validated["selected"] if validated["selected"] else 0.0
    print(f"honest peers selected {validated['selected']}, left out {validated['left_out']} ({share:.1f} %)")
    print(
        f"mean final test accuracy: validated {100 * validated['accuracy']:.2f} %, "
        f"paper {100 * paper['accuracy']:.2f} %"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

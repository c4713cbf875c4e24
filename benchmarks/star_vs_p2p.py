"""The same job as star FedAvg and as a peer-to-peer method, one after the other, side by side.

    python benchmarks/star_vs_p2p.py                                   # fedavg vs lightyear, digits, 8 sites, 12 rounds
    python benchmarks/star_vs_p2p.py --repeat 2                         # A B A B: two pairs, a ratio per pair
    python benchmarks/star_vs_p2p.py --set rounds=6 --p2p-set transfer_dtype=float32
    python benchmarks/star_vs_p2p.py --swarm --repeat 3                 # FLARE's Swarm Learning beside them

Both jobs are generated from the same dataset settings, seed and ``--set`` values
(``lightyear-jobs``'s settings path), written to a temporary folder and run with
``nvflare simulator JOB -w WS -t SITES`` (``-t`` = the number of sites, as a peer-to-peer job needs).
For each run the script prints:

* ``wall_s``: the simulator command from launch to exit, and the ratio p2p / star per pair;
* ``startup_s``: from launch to the start of the first round on the first site;
* the mean over sites of each phase's seconds summed over the rounds, every phase counted once:
  ``train`` (local training, compute only), ``slot_wait`` (queueing for a compute slot, see
  ``lightyear.training.compute_slots``), ``exchange`` (peer-to-peer: sending the own model and
  waiting for the neighbours'; star: from a site's result to its next task, which holds the
  transfer, the other sites and the server's aggregation), ``score`` and ``aggregate``
  (peer-to-peer rules on the site), ``eval`` (validation and test metrics);
* ``peak_pss_GiB``: the peak over time of the summed proportional set size of the simulator's
  processes (shared pages split among the processes that map them), sampled every second;
* ``acc``: the mean test accuracy of the sites (or Dice for segmentation).

With ``--swarm`` each pair also runs FLARE's Swarm Learning (``nvflare.app_common.ccwf``) on the
star job as it is (:func:`lightyear.star.swarm.swarm_job`: the same site executor, data, settings,
rounds and seed; a random site aggregates each round, the server only coordinates); its
``exchange`` is measured as the star job's, and its ``acc`` is the final model's mean test accuracy
over the sites (``swarm_model.npz`` evaluated on each site's test set), as the star job's summary
gives it for its final global model.

Timings come from the ``round_start``/``round_end`` and ``*_s`` columns of every site's
``rounds.csv``. This machine's other load changes absolute figures; the ratio of a pair, run one
right after the other, is the figure to quote.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "custom"))

from p2p_job_timing import tree_memory  # noqa: E402  (this folder is on sys.path when run as a script)

from lightyear.cli import command, output_folder  # noqa: E402
from lightyear.flare.component_policy import allow_package  # noqa: E402
from lightyear.jobs import generate  # noqa: E402
from lightyear.jobs.settings import SettingError, parse_set  # noqa: E402
from lightyear.star.swarm import swarm_job  # noqa: E402

PROG = "benchmarks/star_vs_p2p.py"
PHASES = ("train", "slot_wait", "exchange", "score", "aggregate", "eval")


def pairs(text: str) -> int:
    """An argparse ``type`` for ``--repeat``: a whole number of pairs >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give at least 1 pair (a ratio needs a star and a p2p run)")
    return value


def build_jobs(args, configs: str, folder: str) -> dict:
    """{role: (job folder, sites)} of the star and the peer-to-peer job; every setting checked first."""
    both = parse_set(args.set)
    jobs = {}
    for role, method, extra in (("star", args.star, args.star_set), ("p2p", args.p2p, args.p2p_set)):
        overrides = {**both, **parse_set(extra)}
        name, files = generate.build_job(configs, method, args.dataset, seed=args.seed, overrides=overrides)
        topology = files["meta.json"]["lightyear"]["topology"]
        if topology != role:
            raise SettingError(f"--{role} {method} is a {topology} method: give a {role} one")
        jobs[role] = (os.path.join(folder, name), len(files["meta.json"]["deploy_map"]["app"]) - 1, files)
    if getattr(args, "swarm", False):
        _, sites, files = jobs["star"]
        swarm = swarm_job(files, starting_client=files["meta.json"]["deploy_map"]["app"][1])
        jobs["swarm"] = (os.path.join(folder, swarm["meta.json"]["name"]), sites, swarm)
    return jobs


def run_job(job: str, sites: int, ws: str, allow: tuple[str, ...] = (), sample=None) -> dict:
    """Run ``job`` in the simulator; wall seconds, launch time (epoch), peak PSS and exit code.

    The workspace's component policy is the repository's (``workspace/local/resources.json``),
    admitting also the class-path prefixes ``allow`` (such as ``"cpu_profile."``). Every second
    ``sample(process)`` is called with the simulator's process and returns the PSS of it and its
    descendants (default :func:`p2p_job_timing.tree_memory`'s); a caller's own may record more."""
    os.makedirs(os.path.join(ws, "local"), exist_ok=True)
    shutil.copy(os.path.join(ROOT, "workspace", "local", "resources.json"), os.path.join(ws, "local"))
    if allow:
        allow_package(os.path.join(ws, "local"), tuple(allow))
    nvflare = os.path.join(os.path.dirname(sys.executable), "nvflare")
    launched = time.time()
    start = time.perf_counter()
    proc = subprocess.Popen(
        [nvflare, "simulator", job, "-w", ws, "-t", str(sites)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    peak = [0]
    tree = psutil.Process(proc.pid)
    sample = sample or (lambda process: tree_memory(process, proportional=True)[1])

    def sampling():
        while proc.poll() is None:
            peak[0] = max(peak[0], sample(tree))
            time.sleep(1.0)

    sampler = threading.Thread(target=sampling, daemon=True)
    sampler.start()
    rc = proc.wait()
    wall = time.perf_counter() - start
    sampler.join()
    return {"wall_s": wall, "launched": launched, "peak_pss_GiB": peak[0] / 2**30, "rc": rc}


def site_rows(ws: str) -> dict[str, list[dict]]:
    rows = {}
    for site in sorted(os.listdir(ws)):
        path = os.path.join(ws, site, "simulate_job", "rounds.csv")
        if os.path.isfile(path):
            with open(path, newline="") as f:
                rows[site] = list(csv.DictReader(f))
    return rows


def _f(row: dict, key: str) -> float:
    value = row.get(key, "")
    return float(value) if value not in ("", None) else 0.0


def phases(rows: dict[str, list[dict]], topology: str) -> dict:
    """Mean over sites of each phase's seconds summed over the site's rounds."""
    per_site = []
    for site_rows_ in rows.values():
        train_rows = [r for r in site_rows_ if r.get("train_loss", "") != ""]
        totals = dict.fromkeys(PHASES, 0.0)
        for r in site_rows_:
            totals["train"] += _f(r, "train_s")
            totals["slot_wait"] += _f(r, "slot_wait_s")
            totals["eval"] += _f(r, "eval_s")
            totals["score"] += _f(r, "score_s")
            totals["aggregate"] += _f(r, "aggregate_s")
            if topology == "p2p":
                totals["exchange"] += _f(r, "wait_s")
        if topology == "star":  # from a result to the next task
            ends = [_f(r, "round_end") for r in train_rows]
            starts = [_f(r, "round_start") for r in site_rows_]
            totals["exchange"] += sum(max(0.0, nxt - end) for end, nxt in zip(ends, starts[1:]))
        per_site.append(totals)
    return (
        {k: statistics.mean(t[k] for t in per_site) for k in PHASES}
        if per_site
        else dict.fromkeys(PHASES, float("nan"))
    )


def accuracy(ws: str) -> float:
    path = os.path.join(ws, "server", "simulate_job", "summary.csv")
    if not os.path.isfile(path):
        return float("nan")
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("site") == "mean_benign":
                return float(row.get("dice") or row.get("acc") or "nan")
    return float("nan")


def swarm_accuracy(ws: str, files: dict) -> float:
    """Mean over the sites of the test accuracy (or Dice) of the final Swarm model each site kept."""
    from lightyear.star.swarm import MODEL_FILE
    from lightyear.training.site_runtime import SiteRuntime

    args = next(
        e["executor"]["args"] for e in files["app/config/config_fed_client.json"]["executors"] if "train" in e["tasks"]
    )
    seed = files["meta.json"]["lightyear"]["seed"]
    found = []
    for site in sorted(os.listdir(ws)):
        path = os.path.join(ws, site, "simulate_job", MODEL_FILE)
        if site == "server" or not os.path.isfile(path):
            continue
        runtime = SiteRuntime(
            site,
            args["dataset"],
            args["model"],
            seed=seed,
            dataset_args=args.get("dataset_args"),
            model_args=args.get("model_args"),
            train_args=args.get("train_args"),
            data_root=args.get("data_root"),
            num_threads=1,
        )
        with np.load(path) as model:
            found.append(runtime.evaluate("test", {k: model[k] for k in model.files}))
    key = "dice" if found and "dice" in found[0] else "acc"
    return statistics.mean(f[key] for f in found) if found else float("nan")


def measure(job: str, topology: str, sites: int, keep: str | None, files: dict | None = None) -> dict:
    ws = tempfile.mkdtemp(prefix="lightyear-bench-")
    try:
        out = run_job(job, sites, ws)
        rows = site_rows(ws)
        first = min(
            (_f(r[0], "round_start") for r in rows.values() if r and r[0].get("round_start")), default=float("nan")
        )
        out["startup_s"] = first - out["launched"]
        out.update(phases(rows, "star" if topology == "swarm" else topology))
        out["acc"] = swarm_accuracy(ws, files) if topology == "swarm" else accuracy(ws)
        if keep:
            shutil.copytree(ws, os.path.join(keep, os.path.basename(job)), dirs_exist_ok=True)
        return out
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def job_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that say which pair of jobs to build (:func:`build_jobs`), shared with the profile."""
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--star", default="fedavg", help="the star method (default fedavg)")
    parser.add_argument("--p2p", default="lightyear", help="the peer-to-peer method (default lightyear)")
    parser.add_argument("--seed", type=generate.seed_arg, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=JSON", help="a setting of both jobs")
    parser.add_argument(
        "--p2p-set", action="append", default=[], metavar="KEY=JSON", help="a setting of the peer-to-peer job only"
    )
    parser.add_argument(
        "--star-set", action="append", default=[], metavar="KEY=JSON", help="a setting of the star job only"
    )


@command(PROG)
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    job_arguments(parser)
    parser.add_argument("--repeat", type=pairs, default=1, help="pairs to run, star then p2p each time (at least 1)")
    parser.add_argument("--keep", help="copy each run's workspace here")
    parser.add_argument(
        "--swarm", action="store_true", help="run FLARE's Swarm Learning on the star job too, in every pair"
    )
    args = parser.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="lightyear-bench-jobs-")
    try:  # every setting, and --keep, checked before anything runs
        jobs = build_jobs(args, os.path.join(ROOT, "app_configs"), folder)
        if args.keep is not None:
            args.keep = output_folder(args.keep, "--keep")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    for role, (path, sites, files) in jobs.items():
        generate.write_job(files, path)
        jobs[role] = (path, sites, files)
    both = parse_set(args.set)
    columns = ["wall_s", "startup_s", *(f"{p}_s" for p in PHASES), "peak_pss_GiB", "acc"]
    print(
        f"{os.cpu_count()} CPUs; jobs {', '.join(os.path.basename(p) for p, *_ in jobs.values())} "
        f"({jobs['p2p'][1]} sites); settings {both}"
    )
    print(f"{'run':<22}" + "".join(f"{c:>13}" for c in columns))
    ratios, swarm_ratios = [], []
    for pair in range(args.repeat):
        results = {}
        for role in jobs:
            path, sites, files = jobs[role]
            r = measure(path, role, sites, args.keep, files)
            r.update({f"{p}_s": r.pop(p) for p in PHASES})
            results[role] = r
            label = f"{os.path.basename(path)}#{pair + 1}" + ("" if r["rc"] == 0 else f" rc={r['rc']}")
            print(f"{label:<22}" + "".join(f"{r[c]:>13.2f}" for c in columns), flush=True)
        ratios.append(results["p2p"]["wall_s"] / results["star"]["wall_s"])
        if "swarm" in results:
            swarm_ratios.append(results["swarm"]["wall_s"] / results["star"]["wall_s"])
    for name, found in (("p2p/star", ratios), ("swarm/star", swarm_ratios)):
        if found:
            median = f"; median {statistics.median(found):.2f}" if len(found) > 1 else ""
            print(f"wall ratio {name} per pair: " + ", ".join(f"{x:.2f}" for x in found) + median)
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

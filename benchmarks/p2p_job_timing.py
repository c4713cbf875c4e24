"""Run a peer-to-peer job in FLARE's simulator and print where the time and memory go.

    python benchmarks/p2p_job_timing.py                      # jobs/lightyear_digits, 8 sites
    python benchmarks/p2p_job_timing.py --job /tmp/jobs/lightyear_digits_dynamic3

Prints the whole job's wall time, the peak memory of all its processes together (sampled every
0.2 s: the sum of resident sizes, which counts a shared library once per process, and the sum of
proportional set sizes, which splits shared pages among the processes that map them: what the
job really takes), and per round the median over sites of: local training, waiting for the
peers' models, sending the own model to every peer (the transport), scoring, aggregation and
evaluation, with the bytes each site sent.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tree_memory(proc: psutil.Process, proportional: bool) -> tuple[int, int]:
    """(sum of RSS, sum of PSS or 0) over ``proc`` and its descendants."""
    rss = pss = 0
    for p in [proc] + proc.children(recursive=True):
        try:
            if proportional:
                info = p.memory_full_info()
                pss += info.pss
            else:
                info = p.memory_info()
            rss += info.rss
        except psutil.Error:
            pass
    return rss, pss


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", default=os.path.join(ROOT, "jobs", "lightyear_digits"))
    parser.add_argument("--workspace", help="simulator workspace (default: a temporary folder)")
    args = parser.parse_args(argv)
    meta = json.load(open(os.path.join(args.job, "meta.json")))
    sites = sorted({s for targets in meta["deploy_map"].values() for s in targets if s != "server"})
    ws = args.workspace or tempfile.mkdtemp(prefix="lightyear-bench-")
    os.makedirs(os.path.join(ws, "local"), exist_ok=True)
    shutil.copy(os.path.join(ROOT, "workspace", "local", "resources.json"), os.path.join(ws, "local"))
    nvflare = os.path.join(os.path.dirname(sys.executable), "nvflare")
    cmd = [nvflare, "simulator", args.job, "-w", ws, "-t", str(len(sites))]
    print(" ".join(cmd))
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    peak = [0, 0]
    ps = psutil.Process(proc.pid)

    def sample():
        tick = 0
        while proc.poll() is None:
            rss, pss = tree_memory(ps, proportional=tick % 5 == 0)  # PSS reads smaps: once a second
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            tick += 1
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    rc = proc.wait()
    wall = time.perf_counter() - start
    sampler.join()
    print(
        f"exit code {rc}; wall {wall:.1f} s; peak memory of all processes: {peak[1] / 2**30:.2f} GiB proportional "
        f"(PSS), {peak[0] / 2**30:.2f} GiB summed resident (RSS)"
    )

    rows = []
    for site in sites:
        path = os.path.join(ws, site, "simulate_job", "rounds.csv")
        if os.path.exists(path):
            rows += list(csv.DictReader(open(path)))
    if not rows:
        print("no rounds.csv written: see", os.path.join(ws, "server", "simulate_job", "log.txt"))
        return 1
    cols = ["train_s", "wait_s", "send_s", "score_s", "aggregate_s", "eval_s"]
    print(f"\nper round, median over {len(sites)} sites (seconds; MB sent by one site)")
    print("round  " + "  ".join(f"{c:>11}" for c in cols) + "   MB_sent")
    rounds = sorted({int(r["round"]) for r in rows})
    for rnd in rounds:
        mine = [r for r in rows if int(r["round"]) == rnd]
        med = [
            statistics.median(float(r[c]) for r in mine if r.get(c) not in ("", None))
            if any(r.get(c) for r in mine)
            else float("nan")
            for c in cols
        ]
        mb = statistics.median(float(r["sent_bytes"]) for r in mine) / 1e6
        print(f"{rnd:>5}  " + "  ".join(f"{v:11.3f}" for v in med) + f"   {mb:7.1f}")
    later = [r for r in rows if int(r["round"]) >= 1]
    if later:
        print(
            "\nrounds 1+: median "
            + ", ".join(
                f"{c} {statistics.median(float(r[c]) for r in later if r.get(c)):.3f}"
                for c in cols
                if any(r.get(c) for r in later)
            )
        )
    print("summary:", os.path.join(ws, "server", "simulate_job", "summary.csv"))
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

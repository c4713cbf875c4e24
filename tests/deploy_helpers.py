"""Shared by the deployment tests: small generated jobs, the records they leave, leftover processes."""

import csv
import json
import os
import subprocess

from lightyear.jobs import generate

from repo import ROOT, start_timeouts

CONFIGS = os.path.join(ROOT, "app_configs")
SITES = ["site-1", "site-2", "site-3"]


def make_job(folder, method, **overrides):
    """A digits job of ``method`` for three sites and two rounds, written under ``folder``."""
    # generous start timeouts: a loaded 2-core machine can take over a minute to start the sites
    settings = {"sites": SITES, "rounds": 2, **start_timeouts(method), **overrides}
    name, files = generate.build_job(CONFIGS, method, "digits", seed=0, overrides=settings)
    path = os.path.join(str(folder), name)
    generate.write_job(files, path)
    return path


def summary_rows(run_folder):
    """{site: row} of the summary a run left in a simulator-layout folder."""
    with open(os.path.join(str(run_folder), "server", "simulate_job", "summary.json")) as f:
        return {row["site"]: row for row in json.load(f)}


def round_rows(run_folder, site):
    with open(os.path.join(str(run_folder), site, "simulate_job", "rounds.csv"), newline="") as f:
        return list(csv.DictReader(f))


def assert_finished(run_folder, sites=SITES, rows_per_site=2):
    """Every site finished, with ``rows_per_site`` rows in its rounds.csv (a P2P job writes one per
    round; a star job's sites also record the global model they receive after the last round)."""
    rows = summary_rows(run_folder)
    for site in sites:
        assert rows[site]["status"] == "finished", rows[site]
        assert [int(r["round"]) for r in round_rows(run_folder, site)] == list(range(rows_per_site))
    assert rows["mean_benign"]["malfunction"] == f"n={len(sites)}"


def processes_with(marker):
    """Lines of ``ps`` naming ``marker`` (a folder only this test's deployment uses)."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid,stat,args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if marker in line and " Z " not in line and "ps -ww" not in line]


def kill_marked(marker):
    """Last resort after a failed test: end this user's processes with an argument that is ``marker``
    (a folder only this test's deployment uses) or a path in it; never one that merely contains it."""
    import psutil

    def names(arg):
        return arg == marker or arg.startswith(marker.rstrip(os.sep) + os.sep)

    procs = [
        p
        for p in psutil.process_iter(["pid", "uids", "cmdline"])
        if p.info["pid"] != os.getpid()
        and p.info["uids"]
        and p.info["uids"].real == os.getuid()
        and any(names(a) for a in p.info["cmdline"] or [])
    ]
    for proc in procs:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=5)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass

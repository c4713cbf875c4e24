"""The batch scripts submitted to a real single-node SLURM on loopback (CPU mode): the simulator
template and the provisioned deployment run a tiny digits job (3 sites, 2 rounds) to the end, and
a cancelled deployment leaves no FLARE process behind."""

import os
import re
import subprocess
import sys
import time

import pytest

from lightyear.deploy.slurm.results import unfinished
from lightyear.jobs import generate

from repo import ROOT
from slurm_cluster import INSTALL, Cluster, missing_programs

CONFIGS = os.path.join(ROOT, "app_configs")
SITES = ["site-1", "site-2", "site-3"]

pytestmark = [pytest.mark.deployment, pytest.mark.extended]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    missing = missing_programs()
    if missing:
        pytest.skip(f"SLURM is not installed (missing {', '.join(missing)}): {INSTALL}")
    c = Cluster(str(tmp_path_factory.mktemp("slurm")))
    try:
        try:
            c.start()
        except (RuntimeError, OSError) as e:
            pytest.skip(f"SLURM could not be started on this machine: {e}")
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """A 3-site, 2-round LIGHTYEAR digits job; generous start timeouts for a loaded 2-core machine."""
    out = tmp_path_factory.mktemp("jobs")
    settings = {"sites": SITES, "rounds": 2, "start_timeout": 240.0, "ready_timeout": 240.0}
    name, files = generate.build_job(CONFIGS, "lightyear", "digits", "none", 0, seed=0, overrides=settings)
    generate.write_job(files, str(out / name))
    return str(out / name)


def lightyear_slurm(cluster, *args, timeout=480):
    env = dict(cluster.env, PYTHONPATH=os.path.join(ROOT, "custom") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "lightyear.deploy.slurm.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )


def submitted(proc):
    match = re.search(r"^results: (\S+)\s+log: (\S+)$", proc.stdout, re.M)
    assert match, f"no job id printed:\n{proc.stdout}\n{proc.stderr}"
    return match.group(1), match.group(2)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def test_the_cpu_simulator_template_runs_every_site_to_the_end(cluster, job, tmp_path):
    proc = lightyear_slurm(cluster, "cpu", job, "--cpus", "1", "--time", "00:10:00", "--out", str(tmp_path), "--wait")
    results, log = submitted(proc)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n{read(log)[-4000:]}"
    assert "-gpu" not in read(os.path.join(tmp_path, os.path.basename(job) + "-cpu.sbatch"))
    path, missing = unfinished(os.path.join(results, "workspace"), SITES)
    assert path and missing == [], read(log)[-4000:]
    assert "all 3 sites finished" in read(log)


def test_a_provisioned_deployment_in_one_allocation_finishes_and_shuts_down(cluster, job, tmp_path):
    proc = lightyear_slurm(
        cluster, "deploy_cpu", job, "--cpus", "1", "--time", "00:10:00", "--out", str(tmp_path), "--wait"
    )
    results, log = submitted(proc)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n{read(log)[-4000:]}"
    path, missing = unfinished(os.path.join(results, "server"), SITES)
    assert path and missing == [], read(log)[-4000:]
    assert path.startswith(os.path.join(results, "server", read(os.path.join(results, "flare_job_id")).strip()))
    for site in SITES:  # every site ran from its own provisioned kit, with its own round records
        assert "Shutting down client" in read(os.path.join(results, "logs", f"{site}.log"))
    assert flare_processes(results) == []


def flare_processes(results):
    out = subprocess.run(["ps", "-eww", "-o", "pid=,args="], capture_output=True, text=True).stdout
    return [
        line
        for line in out.splitlines()
        if results in line and ("client_train" in line or "server_train" in line or "sub_start" in line)
    ]


def test_scancel_of_a_deployment_stops_every_flare_process(cluster, job, tmp_path):
    proc = lightyear_slurm(cluster, "deploy_cpu", job, "--cpus", "1", "--time", "00:10:00", "--out", str(tmp_path))
    results, log = submitted(proc)
    job_id = re.search(r"^submitted SLURM job (\d+)", proc.stdout, re.M).group(1)
    deadline = time.monotonic() + 240
    while not os.path.exists(os.path.join(results, "flare_job_id")) and time.monotonic() < deadline:
        time.sleep(1)
    assert os.path.exists(os.path.join(results, "flare_job_id")), read(log)[-4000:] if os.path.exists(log) else "no log"
    running = flare_processes(results)
    assert len(running) >= 4, (
        results,
        subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout[-6000:],
    )
    cluster.run("scancel", job_id)
    assert cluster.wait_idle(90), cluster.run("squeue", check=False).stdout
    assert flare_processes(results) == []
    assert "stopped by SLURM" in read(log)

"""The server of a real FLARE POC is killed mid-run: every P2P site stops on its own, keeps its
checkpoint, and its FLARE job process ends instead of retrying for ever."""

import json
import os
import signal
import time

import pytest

from lightyear.deploy.poc import SERVER, Poc

from deploy_helpers import SITES, kill_marked, make_job, processes_with


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return time.monotonic()
        time.sleep(2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def finished_rounds(run_dir):
    try:
        with open(os.path.join(run_dir, "rounds.csv")) as f:
            return max(len(f.read().splitlines()) - 1, 0)
    except FileNotFoundError:
        return 0


def site_status(run_dir):
    try:
        with open(os.path.join(run_dir, "site_status.json")) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return {}


@pytest.mark.extended
@pytest.mark.deployment
def test_killing_the_server_mid_run_stops_every_site_and_ends_their_job_processes(tmp_path):
    job = make_job(tmp_path / "jobs", "lightyear", rounds=40, peer_deadline=10.0, max_isolated_rounds=2)
    poc = Poc(str(tmp_path / "poc"), list(SITES))
    try:
        poc.prepare()
        poc.start(timeout=400)
        job_id = poc.cli.submit(job)
        run_dirs = poc.site_run_dirs(job_id)
        wait_for(lambda: all(finished_rounds(d) >= 2 for d in run_dirs.values()), 600, "round 1 on every site")

        def site_jobs():  # FLARE's client job processes of this job
            return [line for line in processes_with(job_id) if "worker_process" in line]

        assert len(site_jobs()) == len(SITES), site_jobs()

        # the server's parent process, its job process and the script that started it, all at once:
        # a parent that outlives its job process aborts the job on the sites itself
        server = processes_with(os.path.join(poc.prod, SERVER))
        assert len(server) >= 2, server
        for line in server:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        killed = time.monotonic()

        stopped = wait_for(
            lambda: all(site_status(d).get("status") == "stopped" for d in run_dirs.values()), 400, "every site to stop"
        )
        ended = wait_for(lambda: not site_jobs(), 400, "every site's job process to end")
        print(
            f"server killed; every site stopped {stopped - killed:.0f} s later, "
            f"their job processes ended {ended - killed:.0f} s later"
        )

        for site, run_dir in run_dirs.items():
            status = site_status(run_dir)
            assert (
                "no neighbour reached for 2 rounds in a row" in status["reason"] and "resume_from" in status["reason"]
            ), site
            assert status["last_round"] >= 1 and os.path.isfile(status["checkpoint"]), site
            with open(os.path.join(run_dir, "log.txt"), errors="replace") as f:
                assert "has not reached the server" in f.read(), site
    finally:
        poc.stop()
        kill_marked(poc.workspace)

"""``lightyear-poc JOB [JOB ...] --out DIR``: run jobs on a FLARE POC deployment and bring back the records.

As docs/deployment.md's *POC mode*: a POC for the jobs' sites in a new folder (own ``HOME``, ``NVFLARE_POC_WORKSPACE``,
server ``localhost`` on free ports, this toolkit allowed), each job run and collected into ``DIR`` (``DIR/<job name>/``
for several) in a simulator run's layout, every process stopped, also on Ctrl-C or SIGTERM, the folder deleted unless
``--keep-workspace``. Exit status 0: every job finished, 1: one did not, 2: bad arguments."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time

from lightyear.cli import UserError, command, folder_name, seconds
from lightyear.deploy.collect import collect
from lightyear.deploy.flare_cli import FINISHED_OK, FlareCli, FlareCommandError, flare_env, nvflare_command
from lightyear.deploy.job_folder import JobFolder, JobFolderError, read_job, site_sort_key
from lightyear.deploy.processes import ProcessSet, terminate_as_interrupt
from lightyear.deploy.project import write_project
from lightyear.flare.component_policy import AllowListError, allow_package, local_folder
from lightyear.flare.process_tree import adopting_orphans
from lightyear.jobs import registry

PROJECT = "lightyear"
SERVER = "localhost"


def log(message: str) -> None:
    print(f"lightyear-poc: {message}", file=sys.stderr, flush=True)


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on 127.0.0.1 now (the system picks them)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def check_out_dir(path: str) -> str:
    """Create ``path`` if needed and make sure files can be written in it."""
    folder_name(path)
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".lightyear-poc-check-"):
            pass
    except OSError as e:
        raise PermissionError(f"--out {path} is not a writable folder ({e.strerror}): choose another --out") from None
    return os.path.abspath(path)


class Poc:
    """An isolated POC deployment in ``root``: prepared, started, stopped."""

    def __init__(self, root: str, sites: list[str]):
        self.root = root
        self.sites = sites
        self.home = os.path.join(root, "home")
        self.workspace = os.path.join(root, "poc")
        os.makedirs(self.home, exist_ok=True)
        self.env = flare_env(HOME=self.home, NVFLARE_POC_WORKSPACE=self.workspace)
        self.cli = FlareCli(self.env)
        self.processes = ProcessSet(own_descendants=True)  # run under adopting_orphans: see main
        self.prod = os.path.join(self.workspace, PROJECT, "prod_00")

    def prepare(self) -> None:
        fed_port, admin_port = free_ports(2)
        project = os.path.join(self.root, "project.yml")
        write_project(project, self.sites, server=SERVER, name=PROJECT, fed_learn_port=fed_port, admin_port=admin_port)
        self.cli.run(["poc", "prepare", "-i", project, "--force"], timeout=180)
        for participant in [SERVER, *self.sites]:
            allow_package(local_folder(os.path.join(self.prod, participant)), registry.plugin_packages())
        log(f"POC for {', '.join(self.sites)} in {self.workspace}; server on 127.0.0.1:{fed_port} (admin {admin_port})")

    def start(self, timeout: float) -> None:
        console = os.path.join(self.root, "poc_start.log")
        proc = self.processes.start(self.cli.base + ["poc", "start", "--timeout", str(int(timeout))], self.env, console)
        try:
            rc = proc.wait(timeout=timeout + 60)
        except Exception:
            proc.kill()
            raise
        if rc != 0:
            with open(console, errors="replace") as f:
                tail = f.read()[-3000:]
            raise FlareCommandError(
                f"`nvflare poc start` failed (exit {rc}):\n{tail.strip()}\n(participant logs: {self.prod}/*/log.txt)"
            )

    def site_run_dirs(self, job_id: str) -> dict[str, str]:
        return {site: os.path.join(self.prod, site, job_id) for site in self.sites}

    def stop(self) -> list[int]:
        return self.processes.stop(grace=10.0)


def run_job(poc: Poc, job: JobFolder, out: str, timeout: float) -> bool:
    """Submit, wait, download and collect one job; True when it finished without error."""
    started = time.monotonic()
    job_id = poc.cli.submit(job.path)
    log(f"{job.name}: submitted as {job_id}; waiting (at most {timeout:g} s)")
    status = poc.cli.wait(job_id, timeout)
    log(f"{job.name}: {status} after {time.monotonic() - started:.0f} s")
    download = poc.cli.download(job_id, os.path.join(poc.root, "downloads"))
    try:
        written = collect(download, poc.site_run_dirs(job_id), out)
    except FileNotFoundError as e:
        log(f"{job.name}: {e}")
        return False
    missing = [s for s in job.sites if s not in written]
    if missing:
        log(
            f"{job.name}: no run folder of {', '.join(missing)}: the job never started there "
            "(rerun with --keep-workspace and read the POC's <site>/log.txt)"
        )
    log(f"{job.name}: records and logs in {out} (lightyear-summary {out})")
    return FINISHED_OK in status and not missing


def run_all(poc: Poc, jobs: list[JobFolder], out: str, args) -> bool:
    """Start the POC, run every job, and stop every process it started, whatever happens; True if every job finished."""
    ok = False
    try:
        # SIGINT too: a background job inherits SIGINT ignored, and `kill -INT` must still stop the POC
        with terminate_as_interrupt((signal.SIGINT, signal.SIGTERM, signal.SIGHUP)):
            poc.prepare()
            started = time.monotonic()
            poc.start(args.start_timeout)
            log(f"POC started in {time.monotonic() - started:.0f} s")
            ok = True
            for job in jobs:
                target = out if len(jobs) == 1 else os.path.join(out, job.name)
                ok = run_job(poc, job, target, args.timeout) and ok
    except KeyboardInterrupt as e:
        log(f"interrupted ({e or 'Ctrl-C'}): stopping the POC")
        ok = False
    except (FlareCommandError, AllowListError, OSError, ValueError) as e:
        log(f"error: {e}")
        ok = False
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave processes behind
        log("stopping every POC process")
        survivors = poc.stop()
        if survivors:
            log(f"could not stop processes {survivors}: end them by hand (kill {' '.join(map(str, survivors))})")
        else:
            log("every POC process stopped")
        if args.keep_workspace:
            log(f"POC folder kept: {poc.root}")
        else:
            shutil.rmtree(poc.root, ignore_errors=True)
    return ok


@command("lightyear-poc")
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="lightyear-poc", description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    ap.add_argument(
        "jobs", nargs="+", metavar="JOB", help="job folders (made by lightyear-jobs); several run in turn on one POC"
    )
    ap.add_argument("--out", required=True, help="where the records go (a simulator workspace's layout)")
    ap.add_argument(
        "--timeout", type=seconds(positive=True), default=3600.0, help="seconds each job may run (default 3600)"
    )
    ap.add_argument(
        "--start-timeout", type=seconds(positive=True), default=180.0, help="seconds the POC may start in (default 180)"
    )
    ap.add_argument("--keep-workspace", action="store_true", help="keep the POC folder (logs, kits) for debugging")
    args = ap.parse_args(argv)
    try:
        jobs = [read_job(j) for j in args.jobs]
        names = [j.name for j in jobs]
        if len(set(names)) != len(names):
            raise JobFolderError(f"job names must differ (their records go to --out/<name>), got {names}")
        out = check_out_dir(args.out)
        nvflare_command()
    except (JobFolderError, PermissionError, FlareCommandError) as e:
        raise UserError(str(e)) from None
    sites = sorted({s for j in jobs for s in j.sites}, key=site_sort_key)
    root = tempfile.mkdtemp(prefix="lightyear-poc-")
    with adopting_orphans():  # a process orphaned below this one stays within reach of poc.stop()
        ok = run_all(Poc(root, sites), jobs, out, args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

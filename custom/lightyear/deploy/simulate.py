"""``lightyear-simulate``: FLARE's simulator on a job folder, in any workspace.

It allows this toolkit in ``<workspace>/local/resources.json`` (else FLARE 2.9's simulator refuses its components),
runs ``nvflare simulator`` with the same arguments, exits 1 when FLARE's status is 0 but no site finished, starts a run
failed only by FLARE's start race (:mod:`lightyear.flare.start_race`) again once in a fresh workspace (keeping the
failed one in ``<ws>.failed-start``), and on Ctrl-C or SIGTERM stops the simulator and what it started (by kinship)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys

from lightyear.cli import UserError, command, folder_name, terminate_as_interrupt
from lightyear.deploy.flare_cli import FlareCommandError, nvflare_command
from lightyear.deploy.job_folder import read_job
from lightyear.flare import process_tree
from lightyear.flare.start_race import never_started, set_aside
from lightyear.records import run_failure

PROG = "lightyear-simulate"
GRACE_S = 20.0


def simulator_command(argv=None) -> tuple[list[str], str, set[str]]:
    """Allow this toolkit in the ``-w`` workspace; (the simulator's command, the workspace, the entries it held)."""
    from lightyear.jobs.simulator_workspace import prepare_simulator_workspace

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Allow this toolkit's components in the workspace, then run nvflare simulator on the job.",
        epilog="Every other option (-t, -n, -c, -gpu, -l, ...) goes to nvflare simulator unchanged.",
    )
    parser.add_argument("job_folder", help="a job folder (jobs/<job> or one written by lightyear-jobs --out)")
    parser.add_argument("-w", "--workspace", required=True, help="the simulator's workspace (created if missing)")
    args, rest = parser.parse_known_args(argv)
    folder_name(args.workspace, "-w")
    read_job(args.job_folder)  # a folder with a readable meta.json that names its sites
    if os.path.exists(args.workspace) and not os.path.isdir(args.workspace):
        raise UserError(f"the workspace {args.workspace} is a file: give a folder (it is created if missing)")
    workspace = os.path.abspath(args.workspace)
    command_line = [*nvflare_command(), "simulator", args.job_folder, "-w", workspace, *rest]
    before = set(os.listdir(workspace)) if os.path.isdir(workspace) else set()
    resources = prepare_simulator_workspace(workspace)
    print(f"{resources}: this toolkit's components are allowed in this workspace", flush=True)
    return command_line, workspace, before


def run_to_the_end(cmd: list[str]) -> int:
    """Run the simulator; on Ctrl-C or SIGTERM pass Ctrl-C on, then end what is left. Its exit status (130: stopped)."""
    with process_tree.adopting_orphans():  # a worker whose simulator died stays this command's descendant
        return _run(cmd)


def _run(cmd: list[str]) -> int:
    # FLARE's simulator ends its workers on Ctrl-C: let it, even when started with SIGINT ignored (a background job)
    proc = subprocess.Popen(cmd, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    family = process_tree.Family()
    try:
        with terminate_as_interrupt():
            return proc.wait()
    except KeyboardInterrupt as exc:
        print(f"{PROG}: stopping the simulator ({exc or 'Ctrl-C'})", file=sys.stderr, flush=True)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not leave workers behind
        family.members()  # remember every worker while the simulator, their parent, still runs
        if proc.poll() is None and exc.args:  # SIGTERM: FLARE's own way out is Ctrl-C (a terminal's reached it already)
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=GRACE_S)
        survivors = process_tree.stop_tree(family)
        if survivors:
            print(f"{PROG}: could not stop processes {survivors}: end them by hand", file=sys.stderr)
        return 130


def start_again(workspace: str, before: set[str]) -> bool:
    """Whether a failed run failed only by FLARE's start race and its workspace was made fresh again; says so."""
    why = never_started(workspace)
    if why is None:
        return False
    aside = set_aside(workspace, before)
    then = (
        "-w held other files before the run, so it is not started again here: run it again in an empty workspace"
        if aside is None
        else f"the failed attempt is kept in {aside}, and the run starts again once in a fresh workspace"
    )
    print(f"{PROG}: {why}: FLARE's start race, not the job; {then}", file=sys.stderr, flush=True)
    return aside is not None


@command(PROG)
def main(argv=None) -> int:
    try:
        cmd, workspace, before = simulator_command(argv)
    except FlareCommandError as e:
        raise UserError(str(e)) from None
    for attempt in (1, 2):
        status = run_to_the_end(cmd)
        failure = run_failure(workspace) if status == 0 else None
        if status == 130 or (status == 0 and failure is None) or attempt == 2 or not start_again(workspace, before):
            break
    if status != 0 or failure is None:
        return status
    print(f"{PROG}: the run failed: {failure}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

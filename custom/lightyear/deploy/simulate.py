"""``lightyear-simulate``: FLARE's simulator on a job folder, in any workspace.

FLARE 2.9 builds a component only when the participant's ``class_allow_list`` admits its class,
and the simulator reads that list from ``<workspace>/local/resources.json``; with no file there it
uses FLARE's default list, which lacks this toolkit, and refuses the job at its first component.
This command writes the list into the workspace (:func:`lightyear.flare.component_policy.allow_package`:
``lightyear.`` and the FLARE classes the jobs use are appended, every other setting kept) and then
runs ``nvflare simulator`` with the same arguments, so FLARE's output and options (``-t``, ``-n``,
``-c``, ``-gpu``, ``-l``, ...) are FLARE's own.

Three things FLARE's simulator does not do, this command does:

- its exit status says whether the run worked: FLARE's is kept when it is not 0; when it is 0 but
  no site finished (the summary's ``status`` column, or each site's ``site_status.json``), the
  command says so and exits with status 1;
- a run that failed only because a site never started (FLARE's start race,
  :mod:`lightyear.flare.start_race`) starts again once in a fresh workspace, and the command
  says so; the failed attempt is kept in ``<workspace>.failed-start``;
- Ctrl-C and SIGTERM stop the simulator and every site worker it started: FLARE ends them on
  Ctrl-C only, so SIGTERM is passed on as Ctrl-C, and whatever is left after a grace period is
  ended. "Left" means started by this command, found by kinship (descendants, also those
  orphaned meanwhile, their sessions), never by a command line that names the workspace:
  :mod:`lightyear.flare.process_tree`.

Usage::

    lightyear-simulate jobs/lightyear_digits -w /tmp/ws -t 8
"""

from __future__ import annotations

import argparse
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
    """Allow this toolkit in the workspace ``-w`` names; the ``nvflare simulator`` command to run,
    the workspace's absolute path and the entries it held before."""
    from lightyear.jobs.simulator_workspace import prepare_simulator_workspace

    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Allow this toolkit's components in the simulator workspace, "
        "then run nvflare simulator on the job.",
        epilog="Every other option (-t, -n, -c, -gpu, -l, ...) goes to nvflare simulator unchanged.",
    )
    parser.add_argument("job_folder", help="a job folder (jobs/<job> or one written by lightyear-jobs --out)")
    parser.add_argument(
        "-w", "--workspace", required=True, help="the simulator's workspace folder (created if missing)"
    )
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
    """Run the simulator; on Ctrl-C or SIGTERM pass Ctrl-C on, then end what is left. Its exit status
    (130 when stopped)."""
    with process_tree.adopting_orphans():  # a worker whose simulator died stays this command's descendant
        return _run(cmd)


def _run(cmd: list[str]) -> int:
    # Ctrl-C is how FLARE's simulator ends its workers: let it act on it even when this command was
    # started with SIGINT ignored (a background job of a shell)
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
            try:
                proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        survivors = process_tree.stop_tree(family)
        if survivors:
            print(f"{PROG}: could not stop processes {survivors}: end them by hand", file=sys.stderr)
        return 130


def start_again(workspace: str, before: set[str]) -> bool:
    """After a failed run: whether it failed only because a site never started (FLARE's start race,
    :mod:`lightyear.flare.start_race`) and the workspace was made fresh for one more attempt; says so."""
    why = never_started(workspace)
    if why is None:
        return False
    aside = set_aside(workspace, before)
    if aside is None:
        print(
            f"{PROG}: {why}: FLARE's start race, not the job; -w held other files before the run, so it is not "
            "started again here: run it again in an empty workspace",
            file=sys.stderr,
            flush=True,
        )
        return False
    print(
        f"{PROG}: {why}: FLARE's start race, not the job; the failed attempt is kept in {aside}, "
        "and the run starts again once in a fresh workspace",
        file=sys.stderr,
        flush=True,
    )
    return True


@command(PROG)
def main(argv=None) -> int:
    try:
        cmd, workspace, before = simulator_command(argv)
    except FlareCommandError as e:
        raise UserError(str(e)) from None
    for attempt in (1, 2):
        status = run_to_the_end(cmd)
        failure = run_failure(workspace) if status == 0 else None
        if status == 130 or (status == 0 and failure is None):
            return status
        if attempt == 1 and start_again(workspace, before):
            continue
        break
    if status != 0:
        return status
    print(f"{PROG}: the run failed: {failure}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

"""``lightyear-simulate``: FLARE's simulator on a job folder, in any workspace.

FLARE 2.9 builds a component only when the participant's ``class_allow_list`` admits its class,
and the simulator reads that list from ``<workspace>/local/resources.json``; with no file there it
uses FLARE's default list, which lacks this toolkit, and refuses the job at its first component.
This command writes the list into the workspace (:func:`lightyear.flare.component_policy.allow_package`:
``lightyear.`` and the FLARE classes the jobs use are appended, every other setting kept) and then
hands over to ``nvflare simulator`` with the same arguments, so FLARE's output, exit status and
options (``-t``, ``-n``, ``-c``, ``-gpu``, ``-l``, ...) are FLARE's own.

Usage::

    lightyear-simulate jobs/lightyear_digits -w /tmp/ws -t 8
"""

from __future__ import annotations

import argparse
import os
import sys

from lightyear.deploy.flare_cli import FlareCommandError, nvflare_command
from lightyear.flare.component_policy import AllowListError


def simulator_command(argv=None) -> list[str]:
    """Allow this toolkit in the workspace ``-w`` names and return the ``nvflare simulator`` command to run."""
    from lightyear.jobs.environments import prepare_simulator_workspace

    parser = argparse.ArgumentParser(
        prog="lightyear-simulate",
        description="Allow this toolkit's components in the simulator workspace, then run nvflare simulator on the job.",
        epilog="Every other option (-t, -n, -c, -gpu, -l, ...) goes to nvflare simulator unchanged.",
    )
    parser.add_argument("job_folder", help="a job folder (jobs/<job> or one written by lightyear-jobs --out)")
    parser.add_argument("-w", "--workspace", required=True, help="the simulator's workspace folder (created if missing)")
    args, rest = parser.parse_known_args(argv)
    if not os.path.isfile(os.path.join(args.job_folder, "meta.json")):
        raise FileNotFoundError(f"{args.job_folder} is not a job folder (it has no meta.json): give one of jobs/ or a folder lightyear-jobs --out wrote")
    if os.path.exists(args.workspace) and not os.path.isdir(args.workspace):
        raise NotADirectoryError(f"the workspace {args.workspace} is a file: give a folder (it is created if missing)")
    resources = prepare_simulator_workspace(args.workspace)
    print(f"{resources}: this toolkit's components are allowed in this workspace", flush=True)
    return [*nvflare_command(), "simulator", args.job_folder, "-w", args.workspace, *rest]


def main(argv=None) -> int:
    try:
        cmd = simulator_command(argv)
    except (OSError, AllowListError, FlareCommandError) as e:
        print(f"lightyear-simulate: {e}", file=sys.stderr)
        return 2
    os.execv(cmd[0], cmd)


if __name__ == "__main__":
    sys.exit(main())

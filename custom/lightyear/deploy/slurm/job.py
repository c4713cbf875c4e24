"""The FLARE job a SLURM script runs: its folder checked, its name and the sites it deploys to.

A job folder holds ``meta.json``; its ``deploy_map`` names the participants each app goes to
(``{"app": ["server", "site-1", ...]}`` in every generated job). FLARE's simulator takes the site
names from there (``nvflare/private/fed/app/simulator/simulator_runner.py``), and a provisioned
deployment needs one startup kit per name. ``@ALL`` names no site, so such a job cannot be sized
from its folder and is refused here.

The batch scripts call this module at run time to learn the site count of the job they were
given (``python -m lightyear.deploy.slurm.job sites JOB`` prints one name a line).
"""

from __future__ import annotations

import sys

from lightyear.deploy.job_folder import JobFolderError, read_job

__all__ = ["JobFolderError", "job_name", "site_names"]


def site_names(job: str) -> list[str]:
    """The sites the job deploys to (site-2 before site-10), each once."""
    return list(read_job(job).sites)


def job_name(job: str) -> str:
    """The job's name (meta.json ``name``, else the folder name)."""
    return read_job(job).name


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("sites", "name"):
        print("usage: python -m lightyear.deploy.slurm.job {sites|name} JOB", file=sys.stderr)
        return 2
    try:
        print("\n".join(site_names(args[1])) if args[0] == "sites" else job_name(args[1]))
    except JobFolderError as e:
        print(f"slurm_job: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

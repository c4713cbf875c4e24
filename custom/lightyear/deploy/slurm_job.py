"""The FLARE job a SLURM script runs: its folder checked, its name and the sites it deploys to.

A job folder holds ``meta.json``; its ``deploy_map`` names the participants each app goes to
(``{"app": ["server", "site-1", ...]}`` in every generated job). FLARE's simulator takes the site
names from there (``nvflare/private/fed/app/simulator/simulator_runner.py``), and a provisioned
deployment needs one startup kit per name. ``@ALL`` names no site, so such a job cannot be sized
from its folder and is refused here.

The batch scripts call this module at run time to learn the site count of the job they were
given (``python -m lightyear.deploy.slurm_job sites JOB`` prints one name a line).
"""

from __future__ import annotations

import json
import os
import sys

SERVER = "server"


class JobFolderError(ValueError):
    """A job folder is missing or does not say which sites it deploys to."""


def read_meta(job: str) -> dict:
    """The job's ``meta.json``, with an error that names the folder and the fix."""
    if not os.path.isdir(job):
        raise JobFolderError(f"job folder {job!r} does not exist: give a folder under jobs/ "
                             "(or generate one with python -m lightyear.jobs.generate --out DIR)")
    path = os.path.join(job, "meta.json")
    if not os.path.isfile(path):
        raise JobFolderError(f"{job!r} has no meta.json: it is not a FLARE job folder")
    try:
        with open(path) as f:
            meta = json.load(f)
    except ValueError as e:
        raise JobFolderError(f"{path} is not valid JSON ({e})") from None
    if not isinstance(meta, dict):
        raise JobFolderError(f"{path} must hold a JSON object")
    return meta


def site_names(job: str) -> list[str]:
    """The sites the job deploys to, in ``deploy_map`` order, each once."""
    meta = read_meta(job)
    deploy_map = meta.get("deploy_map")
    if not isinstance(deploy_map, dict) or not deploy_map:
        raise JobFolderError(f"{job}/meta.json has no deploy_map: the sites cannot be known")
    sites: list[str] = []
    for targets in deploy_map.values():
        for name in targets if isinstance(targets, list) else []:
            if name == "@ALL":
                raise JobFolderError(f"{job}/meta.json deploys to @ALL: name the sites in deploy_map (as lightyear-jobs does)")
            if name != SERVER and name not in sites:
                sites.append(name)
    if not sites:
        raise JobFolderError(f"{job}/meta.json deploys to no site")
    return sites


def job_name(job: str) -> str:
    """The job's name (meta.json ``name``, else the folder name)."""
    name = read_meta(job).get("name")
    return name if isinstance(name, str) and name else os.path.basename(os.path.abspath(job))


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in ("sites", "name"):
        print("usage: python -m lightyear.deploy.slurm_job {sites|name} JOB", file=sys.stderr)
        return 2
    try:
        print("\n".join(site_names(args[1])) if args[0] == "sites" else job_name(args[1]))
    except JobFolderError as e:
        print(f"slurm_job: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

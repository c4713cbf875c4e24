"""Gather a deployed run's records into a simulator run's layout (``nvflare simulator -w DIR``): the server's run folder
(``nvflare job download``) and each site's (``<site workspace>/<job id>/``) go to ``DIR/<participant>/simulate_job``."""

from __future__ import annotations

import os
import shutil

RUN_FOLDER = "simulate_job"
SERVER = "server"


def server_records(download: str) -> str:
    """The server's run folder inside what ``nvflare job download`` wrote (``<job_id>/workspace``)."""
    for candidate in (os.path.join(download, "workspace"), download):
        if os.path.isfile(os.path.join(candidate, "summary.csv")):
            return candidate
    raise FileNotFoundError(
        f"no summary.csv in the downloaded job {download}: the run did not finish (see its log.txt)"
    )


def collect(download: str, site_run_dirs: dict[str, str], out: str) -> dict[str, str]:
    """Copy the records into ``out``; {participant: folder written} (a site without its run folder is left out)."""
    written = {SERVER: os.path.join(out, SERVER, RUN_FOLDER)}
    _copy_tree(server_records(download), written[SERVER], skip_dirs=("app_server",))
    for site, run_dir in sorted(site_run_dirs.items()):
        if os.path.isdir(run_dir):
            written[site] = os.path.join(out, site, RUN_FOLDER)
            _copy_tree(run_dir, written[site], skip_dirs=(f"app_{site}", "app"))
    return written


def _copy_tree(src: str, dst: str, skip_dirs: tuple[str, ...]) -> None:
    """Copy ``src`` into ``dst`` (replacing files of the same name), leaving out the job's app code."""
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        path = os.path.join(src, name)
        if os.path.isdir(path):
            if name not in skip_dirs and not os.path.islink(path):
                shutil.copytree(path, os.path.join(dst, name), dirs_exist_ok=True)
        elif os.path.isfile(path) and not os.path.islink(path):
            shutil.copy2(path, os.path.join(dst, name))

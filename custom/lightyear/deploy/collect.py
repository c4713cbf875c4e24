"""Gather a deployed run's records into the layout a simulator run leaves (``nvflare simulator -w DIR``).

The server's run folder (``summary.csv``/``.json``, ``progress.jsonl``, ``tb_events/``, the global
model of star jobs) comes from ``nvflare job download``, which returns the server's workspace of
the job only. Each site writes ``rounds.csv`` (and its checkpoint and logs) into its own run folder,
``<site workspace>/<job id>/``; FLARE 2.9 does not send it to the server, so it is read where the
site runs (every site of a POC runs on this machine). Both are copied to::

    DIR/server/simulate_job/summary.csv ...
    DIR/site-N/simulate_job/rounds.csv ...

so that ``lightyear-summary DIR`` and the experiment readers find them as after a simulator run.
"""

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
    """Copy the server's records and each site's run folder files into ``out``; returns
    {participant: folder written}. A site whose run folder is missing is left out (see its log)."""
    written = {}
    src = server_records(download)
    dst = os.path.join(out, SERVER, RUN_FOLDER)
    _copy_tree(src, dst, skip_dirs=("app_server",))
    written[SERVER] = dst
    for site, run_dir in sorted(site_run_dirs.items()):
        if not os.path.isdir(run_dir):
            continue
        dst = os.path.join(out, site, RUN_FOLDER)
        _copy_tree(run_dir, dst, skip_dirs=(f"app_{site}", "app"))
        written[site] = dst
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

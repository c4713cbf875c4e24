"""What a deployment needs to know of a FLARE job folder: its name, its sites (from ``meta.json``'s ``deploy_map``;
``@ALL`` names none, so it cannot size a deployment), its min_clients."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from lightyear.checks import int_in, raising
from lightyear.cli import UserError, read_text

SERVER = "server"
ALL = "@ALL"
JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


class JobFolderError(UserError):
    """The folder is not a FLARE job folder a deployment can run."""


@dataclass(frozen=True)
class JobFolder:
    path: str
    name: str
    sites: tuple[str, ...]
    min_clients: int


def read_job(path: str) -> JobFolder:
    """The job folder at ``path``, checked; a JobFolderError says what is wrong and how to fix it."""
    meta_path = os.path.join(path, "meta.json")
    if not os.path.isdir(path):
        raise JobFolderError(
            f"{path} is not a folder: "
            "give a job folder (e.g. jobs/lightyear_digits, or one made with lightyear-jobs --out)"
        )
    if not os.path.isfile(meta_path):
        raise JobFolderError(
            f"{path} is not a FLARE job folder: it has no meta.json (generate one with lightyear-jobs)"
        )
    try:
        meta = json.loads(read_text(meta_path, "the job's meta.json", "regenerate the job with lightyear-jobs"))
    except UserError as e:
        raise JobFolderError(str(e)) from None
    except ValueError as e:
        raise JobFolderError(f"{meta_path} is not valid JSON ({e}): regenerate the job with lightyear-jobs") from None
    deploy_map = meta.get("deploy_map") if isinstance(meta, dict) else None
    if not isinstance(deploy_map, dict) or not all(isinstance(v, list) for v in deploy_map.values()):
        raise JobFolderError(f"{meta_path} has no deploy_map of app -> [participants]")
    names = [n for targets in deploy_map.values() for n in targets]
    if ALL in names:
        raise JobFolderError(f"{meta_path} deploys to {ALL}: name the sites in its deploy_map (generated jobs do)")
    sites = tuple(sorted({n for n in names if n != SERVER}, key=site_sort_key))
    if not sites:
        raise JobFolderError(f"{meta_path} deploys to no site")
    for app in deploy_map:
        if not os.path.isdir(os.path.join(path, app)):
            raise JobFolderError(f"{path} lacks the app folder {app!r} that its deploy_map names")
    min_clients = meta.get("min_clients", len(sites))
    with raising(JobFolderError):
        int_in(f"{meta_path}: min_clients", min_clients, 1, len(sites), note="its sites")
    name = meta.get("name") or os.path.basename(os.path.abspath(path))
    if not isinstance(name, str) or not JOB_NAME.fullmatch(name):
        raise JobFolderError(
            f"{meta_path}: the job name {name!r:.80} must be letters, digits, '_', '.' or '-' "
            "(it names folders): regenerate the job"
        )
    return JobFolder(os.path.abspath(path), name, sites, min_clients)


def site_sort_key(name: str):
    """Sort key putting site-2 before site-10."""
    head, _, tail = name.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (name, -1)

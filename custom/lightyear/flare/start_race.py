"""A simulator run that failed because a site never started: FLARE's start race, told apart from
every other failure, and a failed attempt moved aside so that the run can start again fresh.

FLARE 2.9's simulator gives each site worker a control port it found free and closed
(``SimulatorRunner.do_one_task``); until the worker binds it, any connection on the machine may
take it. The worker then dies at start ("Address already in use", or its control connection is
reset), the server log says "Subprocess died for client <site> before send", and a peer-to-peer
run stops with that site ``dropped``: at once, because its worker "died before the site started"
(:mod:`lightyear.flare.worker_deaths`), or after ``start_timeout`` because it "did not start". Nothing
of the job itself went wrong, and the same run started again normally works.

:func:`never_started` says so from a run's records, only when no site finished. :func:`set_aside`
moves what the failed attempt wrote in a workspace into a new sibling folder, so that the next
attempt starts from a workspace holding nothing but its ``local/`` settings; it refuses (None)
when the workspace held anything else before the attempt, which a fresh start would disturb.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil

from lightyear.cli import UserError, read_text
from lightyear.flare.worker_deaths import WORKER_DIED
from lightyear.records import SITE_STATUS_FILE, find_summary, table_rows

DID_NOT_START = "did not start within start_timeout"
DIED_AT_START = re.compile(r"Subprocess died for client (\S+?),? before send")
PORT_TAKEN = "Address already in use"
KEEP = ("local",)
"""What a workspace keeps for the next attempt: its settings (FLARE's allow list, logging)."""


def _ended(workspace: str) -> dict[str, tuple[str, str]]:
    """site -> (status, reason), from the summary, else from each site's site_status.json."""
    found: dict[str, tuple[str, str]] = {}
    summary = find_summary(workspace)
    if summary is not None:
        try:
            rows, _ = table_rows(summary, "the summary")
        except UserError:
            rows = []
        for row in rows:
            if row.get("site") not in (None, "mean_benign", "std_benign"):
                found[row["site"]] = (row.get("status") or "", row.get("reason") or "")
    for path in sorted(glob.glob(os.path.join(workspace, "*", "simulate_job", SITE_STATUS_FILE))):
        try:
            status = json.loads(read_text(path, "the site status"))
        except (UserError, ValueError):
            continue
        if isinstance(status, dict) and isinstance(status.get("site"), str):
            found.setdefault(status["site"], (str(status.get("status") or ""), str(status.get("reason") or "")))
    return found


def _text(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def never_started(workspace: str, log: str | None = None) -> str | None:
    """Which site never started and how that shows, when the run failed for that reason only (no
    site finished); None otherwise. ``log``: the simulator's output, when it was kept elsewhere too."""
    ended = _ended(workspace)
    if any(status == "finished" for status, _ in ended.values()):
        return None
    dropped = sorted(site for site, (_, reason) in ended.items() if DID_NOT_START in reason)
    if dropped:
        return f"{', '.join(dropped)} never started ({DID_NOT_START})"
    dead = sorted(site for site, (_, reason) in ended.items() if WORKER_DIED in reason)
    if dead:
        return f"{', '.join(dead)} never started ({WORKER_DIED})"
    texts = _text(os.path.join(workspace, "server", "log.txt")) + "\n" + (log or "")
    died = sorted(set(DIED_AT_START.findall(texts)))
    if died:
        return f"{', '.join(died)} never started (FLARE: 'Subprocess died for client ... before send')"
    taken = []
    for path in glob.glob(os.path.join(workspace, "*", "log.txt")):
        site = os.path.dirname(path)
        if PORT_TAKEN in _text(path) and not os.path.exists(os.path.join(site, "simulate_job", "rounds.csv")):
            taken.append(os.path.basename(site))
    taken.sort()
    if taken:
        return f"{', '.join(taken)} never started (its worker's port was taken: '{PORT_TAKEN}')"
    return None


def fresh(entries: set[str]) -> bool:
    """Whether a workspace that held ``entries`` before an attempt may be made fresh again."""
    return set(entries) <= set(KEEP)


def set_aside(workspace: str, before: set[str]) -> str | None:
    """Move what an attempt wrote in ``workspace`` (every entry but ``local/``) into a new sibling
    folder ``<workspace>.failed-start[-N]``; its path, or None when ``before`` (the entries the
    workspace held before the attempt) shows it was not fresh, and nothing is moved."""
    if not fresh(before):
        return None
    workspace = os.path.abspath(workspace)
    target, n = f"{workspace}.failed-start", 1
    while os.path.lexists(target):
        n += 1
        target = f"{workspace}.failed-start-{n}"
    os.makedirs(target)
    for name in sorted(os.listdir(workspace)):
        if name not in KEEP:
            shutil.move(os.path.join(workspace, name), os.path.join(target, name))
    return target

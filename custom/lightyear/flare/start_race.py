"""A simulator run that failed because a site never started, told apart from other failures, and moved aside to start
again fresh. FLARE 2.9's simulator gives a worker a control port it found free and closed (its start race: another
connection may take it first and the worker dies), though nothing of the job went wrong and a fresh start works."""

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


def read_log(path: str) -> str:
    """A log file's text (undecodable bytes replaced), or "" when it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def never_started(workspace: str, log: str | None = None) -> str | None:
    """Which site never started and how it shows, when that alone failed the run (no site finished), else None;
    ``log``: the simulator's output, when it was kept elsewhere too."""
    ended = _ended(workspace)
    if any(status == "finished" for status, _ in ended.values()):
        return None
    for words in (DID_NOT_START, WORKER_DIED):
        dropped = sorted(site for site, (_, reason) in ended.items() if words in reason)
        if dropped:
            return f"{', '.join(dropped)} never started ({words})"
    texts = read_log(os.path.join(workspace, "server", "log.txt")) + "\n" + (log or "")
    died = sorted(set(DIED_AT_START.findall(texts)))
    if died:
        return f"{', '.join(died)} never started (FLARE: 'Subprocess died for client ... before send')"
    taken = []
    for path in glob.glob(os.path.join(workspace, "*", "log.txt")):
        site = os.path.dirname(path)
        if PORT_TAKEN in read_log(path) and not os.path.exists(os.path.join(site, "simulate_job", "rounds.csv")):
            taken.append(os.path.basename(site))
    return f"{', '.join(sorted(taken))} never started (its worker's port was taken: '{PORT_TAKEN}')" if taken else None


def fresh(entries: set[str]) -> bool:
    """Whether a workspace that held ``entries`` before an attempt may be made fresh again."""
    return set(entries) <= set(KEEP)


def set_aside(workspace: str, before: set[str]) -> str | None:
    """Move what an attempt wrote in ``workspace`` (all but ``local/``) into a new ``<workspace>.failed-start[-N]``; its
    path, or None (nothing moved) when ``before``, the entries the workspace held before, shows it was not fresh."""
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

"""One run of a sweep: its folder, its FLARE job and workspace, the simulator process and its outcome. A run is finished
when its ``summary.csv`` has a benign site that finished: the simulator exits 0 even when a job fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from lightyear.cli import UserError
from lightyear.experiments.sweep_spec import Run
from lightyear.flare import component_policy
from lightyear.flare.process_tree import Family
from lightyear.flare.start_race import never_started, read_log
from lightyear.jobs import generate
from lightyear.jobs.folders import load_json
from lightyear.records import table_rows

RUNS = "runs"
NOISE = ("unknown aux message topic",)  # ERROR lines FLARE prints in healthy runs too


def run_dir(out: str, name: str) -> str:
    return os.path.join(out, RUNS, name)


def summary_path(folder: str) -> str:
    return os.path.join(folder, "ws", "server", "simulate_job", "summary.csv")


def summary_rows(folder: str) -> list[dict] | None:
    """The site rows of the run's summary; None when there is none or it cannot be read (the run is not finished)."""
    path = summary_path(folder)
    if not os.path.isfile(path):
        return None
    try:
        rows, _ = table_rows(path, "the summary")
    except UserError:
        return None
    return [r for r in rows if r.get("site") not in ("mean_benign", "std_benign")]


def unfinished_sites(folder: str) -> list[str] | None:
    """Sites the summary lists as not finished (dropped, failed); None when there is no summary."""
    rows = summary_rows(folder)
    return None if rows is None else [r["site"] for r in rows if r.get("status", "finished") != "finished"]


def is_finished(folder: str) -> bool:
    """A summary exists and a benign site (not in the job's ``faulty_sites``, whatever its row says) finished."""
    rows = summary_rows(folder)
    if rows is None:
        return False
    faulty = faulty_sites(folder)
    return any(
        r.get("malfunction") == "none" and r.get("status", "finished") == "finished" and r.get("site") not in faulty
        for r in rows
    )


def faulty_sites(folder: str) -> set[str]:
    """The faulty or attacking sites of the run's job (``job/meta.json``); none when it cannot be read."""
    try:
        info = load_json(os.path.join(folder, "job", "meta.json")).get("lightyear", {})
        return {s for s in info.get("faulty_sites", []) if isinstance(s, str)}
    except (OSError, ValueError, AttributeError, TypeError):
        return set()


def job_files(run: Run, configs: str) -> dict:
    """The generated job (``{relative path: JSON}``), named after the run."""
    _, files = generate.build_job(
        configs,
        run.method,
        run.dataset,
        run.malfunction,
        run.faulty,
        run.seed,
        run.overrides,
        attack=run.attack,
        attackers=run.attackers,
        knowledge=run.knowledge,
        unset=run.unset,
    )
    files["meta.json"]["name"] = run.name
    return files


def matches_job(folder: str, files: dict) -> bool:
    """Whether the job already in ``folder`` is the one ``files`` describes (same settings)."""
    for rel, obj in files.items():
        path = os.path.join(folder, "job", rel)
        try:
            if load_json(path) != json.loads(json.dumps(obj)):
                return False
        except (OSError, ValueError):
            return False
    return True


def resources_file(configs: str) -> dict:
    """The repository's ``workspace/local/resources.json`` beside ``configs``, or FLARE's default plus this package."""
    path = os.path.join(os.path.dirname(os.path.abspath(configs)), "workspace", "local", "resources.json")
    return load_json(path) if os.path.isfile(path) else component_policy.with_package({})[0]


def prepare(folder: str, files: dict, resources: dict) -> None:
    """Write the job, an empty workspace and an empty log (whatever an earlier attempt left is removed)."""
    generate.write_job(files, os.path.join(folder, "job"))
    shutil.rmtree(os.path.join(folder, "ws"), ignore_errors=True)
    os.makedirs(os.path.join(folder, "ws", "local"))
    with open(os.path.join(folder, "ws", "local", "resources.json"), "w") as f:
        json.dump(resources, f, indent=2)
    open(os.path.join(folder, "log.txt"), "w").close()


def nvflare_command() -> str:
    """``$LIGHTYEAR_NVFLARE`` if set, else the ``nvflare`` next to this Python, else the one on PATH."""
    if os.environ.get("LIGHTYEAR_NVFLARE"):
        return os.environ["LIGHTYEAR_NVFLARE"]
    beside = os.path.join(os.path.dirname(sys.executable), "nvflare")
    found = beside if os.path.isfile(beside) else shutil.which("nvflare")
    if not found:
        raise UserError(
            "no nvflare command next to this Python or on PATH: pip install nvflare==2.9.* (or set LIGHTYEAR_NVFLARE)"
        )
    return found


def activity(folder: str) -> tuple[int, int]:
    """The sizes of a live run's ``log.txt`` and ``progress.jsonl``; a run whose sizes stop changing has stalled."""
    sizes = []
    progress_file = os.path.join(folder, "ws", "server", "simulate_job", "progress.jsonl")
    for path in (os.path.join(folder, "log.txt"), progress_file):
        try:
            sizes.append(os.path.getsize(path))
        except OSError:
            sizes.append(-1)
    return sizes[0], sizes[1]


def child_env() -> dict:
    """This environment with the folder holding ``lightyear`` first on PYTHONPATH (for FLARE's processes)."""
    import lightyear

    custom = os.path.dirname(os.path.dirname(os.path.abspath(lightyear.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (custom, env.get("PYTHONPATH", "")) if p)
    return env


def start(run: Run, folder: str) -> subprocess.Popen:
    """Start ``nvflare simulator`` for a prepared run in its own process group, output to ``log.txt``."""
    ws = os.path.join(folder, "ws")
    cmd = [nvflare_command(), "simulator", os.path.join(folder, "job"), "-w", ws, "-t", str(run.sites)]
    with open(os.path.join(folder, "log.txt"), "ab") as log:
        log.write(("$ " + " ".join(cmd) + "\n").encode())
        log.flush()
        return subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=folder,
            env=child_env(),
            start_new_session=True,
        )


def stop(proc: subprocess.Popen, grace: float = 10.0) -> list[int]:
    """End the simulator, its process group and the site workers FLARE starts in sessions of their own
    (:class:`~lightyear.flare.process_tree.Family`): TERM, then KILL; the pids still alive."""
    family = Family(own_descendants=False)
    family.add_leader(proc.pid)
    family.members()  # every worker, remembered while the simulator, their parent, still runs
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        for pid in family.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and (_group_alive(proc) or family.alive()):
            time.sleep(0.2)
        if not (_group_alive(proc) or family.alive()):
            break
    if proc.poll() is None:
        proc.wait(timeout=5)
    return family.alive()


def _group_alive(proc: subprocess.Popen) -> bool:
    proc.poll()  # reap the leader so it does not linger as a zombie
    try:
        os.killpg(proc.pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def start_race(folder: str) -> str | None:
    """The site that never started when only that failed the run (:func:`lightyear.flare.start_race.never_started`)."""
    return never_started(os.path.join(folder, "ws"), read_log(os.path.join(folder, "log.txt")))


def set_aside(folder: str) -> str:
    """Keep a failed attempt as ``ws.failed-start[-N]`` and ``log.failed-start[-N].txt``; the workspace's path."""
    n, suffix = 1, ".failed-start"
    while os.path.lexists(os.path.join(folder, "ws" + suffix)):
        n += 1
        suffix = f".failed-start-{n}"
    os.replace(os.path.join(folder, "ws"), os.path.join(folder, "ws" + suffix))
    if os.path.exists(os.path.join(folder, "log.txt")):
        os.replace(os.path.join(folder, "log.txt"), os.path.join(folder, f"log{suffix}.txt"))
    return os.path.join(folder, "ws" + suffix)


def failure_reason(folder: str, returncode: int | None, lines: int = 2) -> str:
    """Why a run did not finish: the last ERROR lines of its log (else its last line)."""
    text = read_log(os.path.join(folder, "log.txt")).splitlines()
    errors = [ln.strip() for ln in text if ("ERROR" in ln or "Error:" in ln) and not any(n in ln for n in NOISE)]
    picked = errors[-lines:] or [ln.strip() for ln in text if ln.strip()][-1:]
    reason = " | ".join(picked) or "no output"
    if returncode:
        reason = f"exit code {returncode}: {reason}"
    return reason[:600]

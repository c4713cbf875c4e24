"""FLARE 2.9's ``nvflare`` command line, run for one deployment (its environment and a time limit): submit a job,
wait, download; a failing call raises :class:`FlareCommandError` with its output."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

FINISHED_OK = "FINISHED:COMPLETED"


class FlareCommandError(RuntimeError):
    """An ``nvflare`` command failed, timed out or answered something unexpected."""


def nvflare_command() -> list[str]:
    """How to run ``nvflare`` with this interpreter's installation; a clear error when it is missing."""
    if importlib.util.find_spec("nvflare") is None:
        raise FlareCommandError(
            f"nvflare is not installed for {sys.executable}: install this package with its dependencies "
            "(pip install -e .) or pip install nvflare==2.9.*"
        )
    beside = os.path.join(os.path.dirname(sys.executable), "nvflare")
    return [beside] if os.access(beside, os.X_OK) else [sys.executable, "-m", "nvflare.cli"]


def flare_env(base: dict | None = None, **extra: str) -> dict:
    """``base`` (default ``os.environ``) with this Python first on PATH, absolute PYTHONPATH entries, ``extra`` set."""
    env = dict(os.environ if base is None else base)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    if env.get("PYTHONPATH"):  # FLARE's processes run in other folders: a relative entry would point elsewhere
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) if p else p for p in env["PYTHONPATH"].split(os.pathsep))
    env.update(extra)
    return env


class FlareCli:
    def __init__(self, env: dict, startup_kit: str | None = None, log=print):
        self.env = env
        self.kit = ["--startup-kit", startup_kit] if startup_kit else []
        self.log = log
        self.base = nvflare_command()

    def run(self, args: list[str], timeout: float, json_output: bool = False, check: bool = True) -> str:
        argv = self.base + (["--format", "json"] if json_output else []) + args
        try:
            done = subprocess.run(
                argv, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise FlareCommandError(f"`nvflare {' '.join(args)}` did not finish within {timeout:g} s") from None
        out = (done.stdout or "") + (done.stderr or "")
        if check and done.returncode != 0:
            raise FlareCommandError(
                f"`nvflare {' '.join(args)}` failed (exit {done.returncode}):\n{out.strip()[-3000:]}"
            )
        return out

    def submit(self, job_folder: str, timeout: float = 120.0) -> str:
        out = self.run(["job", "submit", "-j", job_folder, *self.kit], timeout, json_output=True)
        job_id = _find(out, "job_id")
        if not job_id:
            raise FlareCommandError(f"`nvflare job submit` printed no job id:\n{out.strip()[-2000:]}")
        return job_id

    def wait(self, job_id: str, timeout: float) -> str:
        """Wait until the job ends, at most ``timeout`` s; returns its final status (e.g. FINISHED:COMPLETED)."""
        # a job that ended badly makes `nvflare job wait` exit non-zero, still printing its status
        args = ["job", "wait", job_id, "--timeout", str(int(max(1, timeout))), "--interval", "2", *self.kit]
        out = self.run(args, timeout + 60, json_output=True, check=False)
        status = _find(out, "status")
        if not status:
            raise FlareCommandError(f"`nvflare job wait {job_id}` printed no job status:\n{out.strip()[-2000:]}")
        return status

    def download(self, job_id: str, out_dir: str, timeout: float = 300.0) -> str:
        """Download the job's server workspace; returns the folder holding it (``<out_dir>/<job_id>``)."""
        self.run(["job", "download", job_id, "-o", out_dir, "--force", *self.kit], timeout)
        folder = os.path.join(out_dir, job_id)
        if not os.path.isdir(folder):
            raise FlareCommandError(f"`nvflare job download` left no {folder}")
        return folder


def _find(output: str, key: str) -> str | None:
    """``key``'s value in the ``data`` of ``nvflare --format json``'s envelope, else in ``key: value`` text."""
    start = output.find("{")
    if start >= 0:
        try:
            envelope = json.loads(output[start:])
        except ValueError:
            envelope = None
        if isinstance(envelope, dict):
            found = _search(envelope.get("data"), key)
            return str(found) if found else None
    match = re.search(rf"\b{re.escape(key)}\b[\"']?\s*[:=]\s*[\"']?([\w:.\-]+)", output)
    return match.group(1) if match else None


def _search(obj, key: str):
    """The first non-empty str or int under ``key`` in the nested dicts and lists ``obj``, else None."""
    if isinstance(obj, dict) and isinstance(obj.get(key), (str, int)) and obj[key] != "":
        return obj[key]
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else ()
    return next((found for value in values if (found := _search(value, key))), None)

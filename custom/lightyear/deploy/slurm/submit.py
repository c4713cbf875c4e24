"""Handing a batch script to ``sbatch``: the script saved beside its results, the job id read back,
and optionally the job waited for (``sbatch --wait`` returns the job's exit status)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from lightyear.deploy.slurm.script import WRITTEN_MARK, carries

_JOB_ID = re.compile(r"^(\d+)(;\S+)?$")


class SubmitError(RuntimeError):
    """sbatch is missing, refused the script, or answered something that is not a job id."""


def sbatch_command() -> str:
    """The ``sbatch`` on PATH, else :class:`SubmitError` saying what to do."""
    path = shutil.which("sbatch")
    if not path:
        raise SubmitError(
            "sbatch not found on PATH: run on a SLURM login node (or install SLURM's client), "
            "or print the script with --dry-run and submit it yourself"
        )
    return path


def save_script(text: str, results_root: str, name: str) -> str:
    """Write ``<results_root>/<name>.sbatch``, replacing only a script lightyear-slurm wrote (``WRITTEN_MARK``)."""
    os.makedirs(results_root, exist_ok=True)
    path = os.path.join(results_root, f"{name}.sbatch")
    if os.path.lexists(path) and not carries(path, WRITTEN_MARK):
        raise SubmitError(f"{path} exists and lightyear-slurm did not write it: move it away or choose another --out")
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


def submit(script: str, wait: bool = False, on_id=None) -> tuple[str, int]:
    """Run ``sbatch --parsable [--wait] script``; (job id, sbatch's or with ``wait`` the job's exit status).
    ``on_id(job_id)`` is called as soon as the id is known."""
    cmd = [sbatch_command(), "--parsable", *(["--wait"] if wait else []), script]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stdout.readline().strip()
    match = _JOB_ID.match(first)
    if match and on_id:
        on_id(match.group(1))
    rest, err = proc.communicate()
    if not match:
        raise SubmitError(f"sbatch refused the script (exit {proc.returncode}): {(err or first or rest).strip()}")
    return match.group(1), proc.returncode

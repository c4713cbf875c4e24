"""The parts every SLURM batch script of this toolkit shares: ``#SBATCH`` lines, the Python it runs, its results folder.
A script is *committed* (``slurm/<template>.sbatch``: no machine's paths, the job as first argument) or *generated for
one job* by ``lightyear-slurm MODE JOB``; both honour ``LIGHTYEAR_PYTHON`` and ``LIGHTYEAR_RESULTS``."""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys

from lightyear.cli import control_characters
from lightyear.deploy.slurm.params import SlurmInputError

q = shlex.quote

COMMITTED_MARK = "# Committed template"
"""What the header of every committed template says, and what marks a script in ``slurm/`` as one."""
WRITTEN_MARK = "# Written by lightyear-slurm"
"""The line that marks a job's batch script as one lightyear-slurm wrote (and may write again)."""


def carries(path: str, mark: str) -> bool:
    """Whether a header line of the batch script at ``path`` starts with ``mark``; False when it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return any(line.startswith(mark) for line in f.read(4096).splitlines())
    except OSError:
        return False


def sbatch_lines(options: dict) -> list[str]:
    """``#SBATCH --key=value`` for each option not None; a value with white space (sbatch splits there) or a control
    character (it could add lines to the script) is refused."""
    given = {key: str(value) for key, value in options.items() if value is not None}
    for key, value in given.items():
        if control_characters(value):
            raise SlurmInputError(
                f"the #SBATCH --{key} value {value!r:.80} holds a line break or control character: remove it"
            )
        if any(c.isspace() for c in value):
            raise SlurmInputError(
                f"the #SBATCH --{key} value {value!r:.80} holds a space, which ends an #SBATCH value: "
                "choose a folder (--out) and names without spaces"
            )
    return [f"#SBATCH --{k}={v}" for k, v in given.items()]


def sbatch_options(p, nodes: int, tasks: dict, cpus: int, **extra) -> dict:
    """Template ``p``'s ``#SBATCH`` options, in the order every script writes them."""
    return {
        "partition": p.partition,
        "account": p.account,
        "time": p.time,
        "nodes": nodes,
        **tasks,
        "cpus-per-task": cpus,
        "mem-per-cpu": p.mem_per_cpu,
        "gres": p.gres,
        **extra,
    }


def python_lines(python: str, custom: str | None) -> list[str]:
    """Shell lines setting ``$PYTHON`` (``$LIGHTYEAR_PYTHON`` wins), and ``custom`` first on ``PYTHONPATH`` if given."""
    pythonpath = [f"export PYTHONPATH={q(custom)}${{PYTHONPATH:+:$PYTHONPATH}}"] if custom else []
    return [*pythonpath, f"PYTHON=${{LIGHTYEAR_PYTHON:-{q(python)}}}"]


def package_folder() -> str:
    """The folder that holds the ``lightyear`` package (``custom/`` in a checkout)."""
    import lightyear

    return os.path.dirname(os.path.dirname(os.path.abspath(lightyear.__file__)))


@dataclasses.dataclass(frozen=True)
class Target:
    """What a script runs and where it writes: the committed form has ``job=None`` (first argument)."""

    job: str | None = None
    results: str | None = None
    python: str | None = None
    custom: str | None = None
    job_name: str | None = None

    @classmethod
    def for_job(cls, job: str, results: str, name: str) -> Target:
        return cls(os.path.abspath(job), os.path.abspath(results), sys.executable, package_folder(), name)


def header(target: Target, template: str, options: dict) -> list[str]:
    """The shebang, the ``#SBATCH`` lines and a comment saying how to submit."""
    name = f"ly-{target.job_name}" if target.job_name else f"lightyear-{template}"
    output = os.path.join(target.results, "%x-%j.out") if target.results else "slurm-%x-%j.out"
    lines = ["#!/bin/bash", *sbatch_lines({"job-name": name, "output": output, **options})]
    if target.job is not None:
        lines.append(f"{WRITTEN_MARK} for {target.job_name or os.path.basename(target.job)}")
    else:
        lines += [
            f"{COMMITTED_MARK} (lightyear-slurm writes it from app_configs/slurm/templates.yaml; do not edit).",
            "# Submit from the repository with the virtual environment active:",
            f"#   sbatch slurm/{template}.sbatch jobs/lightyear_digits",
            "# or let lightyear-slurm fill in a job and your cluster's settings:",
            f"#   lightyear-slurm {template} jobs/lightyear_digits --partition P --account A --dry-run",
        ]
    return lines


def preamble(target: Target) -> list[str]:
    """Strict mode, ``$JOB``, ``$PYTHON`` first on PATH (FLARE calls ``python3``), ``nvflare``, ``$RESULTS`` created."""
    job = f"${{1:-{q(target.job)}}}" if target.job else "${1:?give the job folder: sbatch SCRIPT jobs/<job>}"
    root = q(target.results) if target.results else '"${SLURM_SUBMIT_DIR:-$PWD}/slurm_results"'
    return [
        "set -euo pipefail",
        f"JOB={job}",
        'case "$JOB" in /*) ;; *) JOB="${SLURM_SUBMIT_DIR:-$PWD}/$JOB" ;; esac',
        *python_lines(target.python or "python3", target.custom),
        (
            'FOUND=$(command -v "$PYTHON") || '
            '{ echo "no Python $PYTHON: activate the environment or set LIGHTYEAR_PYTHON" >&2; exit 2; }'
        ),
        "PYTHON=$FOUND",
        'export PATH="$(dirname "$PYTHON"):$PATH"',
        'nvflare() { "$PYTHON" -m nvflare.cli "$@"; }',
        'SITES=($("$PYTHON" -m lightyear.deploy.slurm.job sites "$JOB")) || exit 2',
        'NAME=$("$PYTHON" -m lightyear.deploy.slurm.job name "$JOB")',
        f'RESULTS="${{LIGHTYEAR_RESULTS:-{root}}}/$NAME-${{SLURM_JOB_ID:-local}}"',
        'mkdir -p "$RESULTS"',
        'echo "job $JOB: ${#SITES[@]} sites; results in $RESULTS"',
    ]

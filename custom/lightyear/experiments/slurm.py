"""A SLURM job-array script for a sweep: one array task per run, each running
``python -m lightyear.experiments.sweep <sweep>/spec.json --out <sweep> --task $SLURM_ARRAY_TASK_ID``, so a task
skips a finished run and records its outcome like a local sweep. (One job's batch scripts:
:mod:`lightyear.deploy.slurm.cli`; both build their lines with :mod:`lightyear.deploy.slurm.script`.)
"""

from __future__ import annotations

import os
import shlex
import sys

from lightyear.cli import control_characters
from lightyear.deploy.slurm.params import SlurmInputError, check_gres, check_time
from lightyear.deploy.slurm.script import package_folder, python_lines, sbatch_lines

SCRIPT = "sweep.sbatch"


def script_text(
    name: str,
    n_runs: int,
    out: str,
    configs: str,
    cpus: int,
    time_limit: str = "08:00:00",
    gres: str | None = None,
    parallel: int | None = None,
    python: str | None = None,
) -> str:
    """The sbatch script's text, every value checked first (:class:`~lightyear.deploy.slurm.params.SlurmInputError`)."""
    if n_runs < 1:
        raise SlurmInputError("a SLURM script needs at least one run")
    check_time(time_limit)
    if gres is not None:
        check_gres(gres)
    out, configs = os.path.abspath(out), os.path.abspath(configs)
    for option, path in (("--out", out), ("--configs", configs)):
        if control_characters(path):
            raise SlurmInputError(
                f"{option} {path!r:.80} holds a line break or control character: choose a folder name without one"
            )
    array = f"0-{n_runs - 1}" + (f"%{parallel}" if parallel and parallel > 0 else "")
    lines = [
        "#!/bin/bash",
        *sbatch_lines(
            {
                "job-name": name,
                "array": array,
                "cpus-per-task": cpus,
                "time": time_limit,
                "output": os.path.join(out, "slurm", "%A_%a.out"),
                "gres": gres,
            }
        ),
    ]
    if not gres:
        lines.append(
            "# no --gres here: pass one when submitting, e.g. sbatch --gres=gpu:1 "
            + shlex.quote(os.path.join(out, SCRIPT))
        )
    q = shlex.quote
    lines += [
        "set -euo pipefail",
        *python_lines(python or sys.executable, package_folder()),
        f'"$PYTHON" -m lightyear.experiments.sweep {q(os.path.join(out, "spec.json"))} --out {q(out)} '
        f'--configs {q(configs)} --task "$SLURM_ARRAY_TASK_ID"',
    ]
    return "\n".join(lines) + "\n"


def write_script(text: str, out: str) -> str:
    os.makedirs(os.path.join(out, "slurm"), exist_ok=True)
    path = os.path.join(out, SCRIPT)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path

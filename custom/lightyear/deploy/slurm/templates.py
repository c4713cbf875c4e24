"""The committed batch templates in ``slurm/``: rendered from ``app_configs/slurm/templates.yaml``,
written, or compared with what is committed (like ``lightyear-jobs --check``)."""

from __future__ import annotations

import os

from lightyear.deploy.slurm import deployment as slurm_deploy
from lightyear.deploy.slurm import simulator as slurm_simulator
from lightyear.deploy.slurm.params import SlurmParams, load_description
from lightyear.deploy.slurm.script import COMMITTED_MARK, Target, carries

FOLDER = "slurm"
SUFFIX = ".sbatch"


def render(p: SlurmParams, target: Target) -> str:
    """The batch script of template ``p`` for ``target`` (committed when ``target.job`` is None)."""
    module = slurm_simulator if p.mode == "simulator" else slurm_deploy
    return module.script(p, target)


def committed_texts(description: str) -> dict[str, str]:
    """{file name: text} of every template in the description, in committed form."""
    return {name + SUFFIX: render(p, Target()) for name, p in load_description(description).items()}


def write(description: str, folder: str) -> list[str]:
    """Write every committed template into ``folder``, removing the stale ones (``.sbatch`` files that
    say they are committed templates; any other script there is the user's and stays); the paths written."""
    texts = committed_texts(description)
    os.makedirs(folder, exist_ok=True)
    for stale in sorted(set(f for f in os.listdir(folder) if f.endswith(SUFFIX)) - set(texts)):
        if carries(os.path.join(folder, stale), COMMITTED_MARK):
            os.remove(os.path.join(folder, stale))
    paths = []
    for name, text in texts.items():
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)
        paths.append(path)
    return paths


def differences(description: str, folder: str) -> list[str]:
    """File names in ``folder`` that are missing, stale or differ from the description's output."""
    texts = committed_texts(description)
    present = set(f for f in os.listdir(folder) if f.endswith(SUFFIX)) if os.path.isdir(folder) else set()
    out = sorted(n for n in present - set(texts) if carries(os.path.join(folder, n), COMMITTED_MARK))
    for name, text in texts.items():
        path = os.path.join(folder, name)
        if name not in present:
            out.append(name)
            continue
        with open(path) as f:
            if f.read() != text:
                out.append(name)
    return out

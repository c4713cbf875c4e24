"""The committed batch templates in ``slurm/``: rendered from ``app_configs/slurm/templates.yaml``, written, or compared
with what is committed (like ``lightyear-jobs --check``)."""

from __future__ import annotations

import os
from pathlib import Path

from lightyear.deploy.slurm import deployment as slurm_deploy
from lightyear.deploy.slurm import simulator as slurm_simulator
from lightyear.deploy.slurm.params import SlurmParams, load_description
from lightyear.deploy.slurm.script import COMMITTED_MARK, Target, carries

FOLDER = "slurm"
SUFFIX = ".sbatch"


def render(p: SlurmParams, target: Target) -> str:
    """The batch script of template ``p`` for ``target`` (committed when ``target.job`` is None)."""
    return (slurm_simulator if p.mode == "simulator" else slurm_deploy).script(p, target)


def committed_texts(description: str) -> dict[str, str]:
    """{file name: text} of every template in the description, in committed form."""
    return {name + SUFFIX: render(p, Target()) for name, p in load_description(description).items()}


def _stale(folder: str, texts: dict[str, str]) -> list[str]:
    """The ``.sbatch`` files in ``folder`` that say they are committed templates but are none of ``texts``."""
    present = {f for f in os.listdir(folder) if f.endswith(SUFFIX)} if os.path.isdir(folder) else set()
    return sorted(n for n in present - set(texts) if carries(os.path.join(folder, n), COMMITTED_MARK))


def write(description: str, folder: str) -> list[str]:
    """Write every committed template into ``folder``, removing stale ones (not the user's); the paths written."""
    texts = committed_texts(description)
    os.makedirs(folder, exist_ok=True)
    for stale in _stale(folder, texts):
        os.remove(os.path.join(folder, stale))
    paths = []
    for name, text in texts.items():
        path = os.path.join(folder, name)
        Path(path).write_text(text)
        os.chmod(path, 0o755)
        paths.append(path)
    return paths


def differences(description: str, folder: str) -> list[str]:
    """File names in ``folder`` that are missing, stale or differ from the description's output."""
    texts = committed_texts(description)
    out = _stale(folder, texts)
    for name, text in texts.items():
        path = os.path.join(folder, name)
        if not os.path.lexists(path) or Path(path).read_text() != text:
            out.append(name)
    return out

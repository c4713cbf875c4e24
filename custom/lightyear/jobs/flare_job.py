"""A generated job folder as an object of FLARE's Job API: every export, simulation and submission writes the folder
through ``FedJobConfig.generate_job_config``, here exactly the files of :func:`lightyear.jobs.generate.build_job`.
"""

from __future__ import annotations

import json
import os

from nvflare.apis.job_def import SERVER_SITE_NAME
from nvflare.job_config.api import FedJob
from nvflare.job_config.fed_job_config import FedJobConfig
from nvflare.recipe.spec import Recipe

from lightyear.jobs.folders import JobFolderExists, write_job
from lightyear.jobs.generate import build_job

META = "meta.json"


def job_sites(files: dict) -> list[str]:
    """The sites of a generated job, in deploy-map order (every participant but the server)."""
    sites: list[str] = []
    for participants in files[META]["deploy_map"].values():
        sites.extend(p for p in participants if p != SERVER_SITE_NAME and p not in sites)
    return sites


class GeneratedJobConfig(FedJobConfig):
    """FLARE's job configuration whose folder is the generator's files, unchanged."""

    def __init__(self, name: str, files: dict):
        meta = files[META]
        if meta.get("name") != name:
            raise ValueError(f"meta.json names the job {meta.get('name')!r}, not {name!r}")
        super().__init__(job_name=name, min_clients=meta["min_clients"])
        self.files = files

    def generate_job_config(self, job_root: str) -> None:
        """Write ``job_root/<name>``, replacing an existing folder only when it holds this job (by meta.json)."""
        folder = os.path.join(os.path.abspath(job_root), self.job_name)
        if os.path.exists(folder) and not _holds_job(folder, self.job_name):
            raise JobFolderExists(
                f"{folder} exists and is not the folder of job {self.job_name}: choose another --export-dir"
            )
        write_job(self.files, folder)


def _holds_job(folder: str, name: str) -> bool:
    try:
        with open(os.path.join(folder, META)) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("name") == name


class GeneratedJob(FedJob):
    """A ``FedJob`` of the generator's files, whose clients are the job's sites (for ``simulator_run``)."""

    def __init__(self, name: str, files: dict):
        super().__init__(name=name, min_clients=files[META]["min_clients"])
        self.job = GeneratedJobConfig(name, files)
        self.sites = job_sites(files)
        self.clients = list(self.sites)


class GeneratedRecipe(Recipe):
    """A FLARE recipe for one generated job: ``GeneratedRecipe.build(configs, method, dataset, ...)``
    takes the arguments of :func:`lightyear.jobs.generate.build_job`."""

    def __init__(self, name: str, files: dict):
        super().__init__(GeneratedJob(name, files))
        self.files = files
        self.sites = self._job.sites

    @classmethod
    def build(cls, configs: str, method: str, dataset: str, **kwargs) -> GeneratedRecipe:
        name, files = build_job(configs, method, dataset, **kwargs)
        return cls(name, files)

    def process_env(self, env) -> None:
        """Refuse a simulator environment that names other sites than the job's (FLARE would run those)."""
        from nvflare.recipe.sim_env import SimEnv

        if isinstance(env, SimEnv) and list(env.clients or []) != self.sites:
            raise ValueError(
                f"SimEnv must name this job's sites: SimEnv(clients={self.sites!r}), got clients={env.clients!r} "
                f"(num_clients={env.num_clients})"
            )

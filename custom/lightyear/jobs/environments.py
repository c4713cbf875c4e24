"""FLARE execution environments (``nvflare.recipe``) that let the participants build this toolkit's components.

FLARE builds a component only when its class path is in the participant's ``class_allow_list``, checked before the
class is imported, so the package must be allowed before the participant starts
(:func:`lightyear.flare.component_policy.allow_package`); ``ProdEnv`` sites run ``lightyear-allow`` once.
"""

from __future__ import annotations

import os
import time

from nvflare.recipe.poc_env import PocEnv
from nvflare.recipe.sim_env import SimEnv

from lightyear.flare.component_policy import allow_package
from lightyear.jobs import registry
from lightyear.jobs.simulator_workspace import LOCAL, prepare_simulator_workspace


class LightyearSimEnv(SimEnv):
    """FLARE's ``SimEnv`` whose workspace (``<workspace_root>/<job name>/local``) allows this toolkit's components."""

    def deploy(self, job) -> str:
        prepare_simulator_workspace(os.path.join(self.workspace_root, job.name))
        return super().deploy(job)


def poc_participant_dirs(poc_workspace: str) -> list[str]:
    """The server's and the clients' folders of the POC prepared in ``poc_workspace`` (no admins)."""
    from nvflare.tool.poc.poc_commands import get_prod_dir, setup_service_config
    from nvflare.tool.poc.service_constants import FlareServiceConstants as SC

    project, service = setup_service_config(poc_workspace)
    prod = get_prod_dir(poc_workspace, project.get("name"))
    names = [service[SC.FLARE_SERVER], *service.get(SC.FLARE_CLIENTS, [])]
    return [os.path.join(prod, n) for n in names]


def allow_in_poc(poc_workspace: str) -> list[str]:
    """Allow the package in every participant of the prepared POC; returns the files written."""
    return [
        allow_package(os.path.join(d, LOCAL), registry.plugin_packages())[0]
        for d in poc_participant_dirs(poc_workspace)
    ]


class LightyearPocEnv(PocEnv):
    """FLARE's ``PocEnv`` whose participants allow this toolkit's components, between preparing and starting the POC
    in ``deploy``; ``workspace``: the POC folder (default: FLARE's)."""

    def __init__(self, *, workspace: str | None = None, **kwargs):
        super().__init__(**kwargs)
        if workspace:
            self.poc_workspace = os.path.abspath(workspace)

    def deploy(self, job) -> str:
        from nvflare.recipe import poc_env as flare_poc

        if self._check_poc_running():
            self.stop(clean_up=True)
        flare_poc.prepare_poc_provision(
            clients=self.clients or [],
            number_of_clients=self.num_clients,
            workspace=self.poc_workspace,
            docker_image=self.docker_image,
            use_he=self.use_he,
            project_conf_path=self.project_conf_path,
            examples_dir=None,
        )
        allow_in_poc(self.poc_workspace)
        flare_poc._start_poc(
            poc_workspace=self.poc_workspace, gpu_ids=self.gpu_ids, excluded=[self.username], services_list=[]
        )
        time.sleep(flare_poc.SERVICE_START_TIMEOUT)
        return self._get_session_manager().submit_job(job)

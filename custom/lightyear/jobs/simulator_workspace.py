"""Let the participants of a simulator workspace build this toolkit's components: FLARE's simulator copies
``<workspace>/local/`` into every participant (:mod:`lightyear.flare.component_policy`). No FLARE recipe and no
PyTorch here: ``lightyear-simulate`` runs this before the simulator starts."""

from __future__ import annotations

import os

from lightyear.flare.component_policy import allow_package
from lightyear.jobs import registry

LOCAL = "local"


def prepare_simulator_workspace(workspace: str) -> str:
    """Write ``workspace/local/resources.json`` allowing this toolkit's components (FLARE's other settings kept)."""
    local = os.path.join(workspace, LOCAL)
    os.makedirs(local, exist_ok=True)
    path, _ = allow_package(local, registry.plugin_packages())
    return path

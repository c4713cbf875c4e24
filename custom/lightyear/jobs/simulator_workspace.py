"""Let the participants of a simulator workspace build this toolkit's components.

FLARE's simulator copies ``<workspace>/local/`` into every participant's folder
(``nvflare/private/fed/app/simulator/simulator_runner.py``), and a participant builds a job
component only when its class path is in the ``class_allow_list`` of its ``local/resources.json``
(:mod:`lightyear.flare.component_policy`). No FLARE recipe and no PyTorch import here: this runs
in ``lightyear-simulate`` before the simulator starts.
"""

from __future__ import annotations

import os

from lightyear.flare.component_policy import allow_package
from lightyear.jobs import registry

LOCAL = "local"


def prepare_simulator_workspace(workspace: str) -> str:
    """Create ``workspace/local/`` if needed and let the simulator's participants build this
    toolkit's components (``resources.json`` there, FLARE's other settings kept). Returns the file."""
    local = os.path.join(workspace, LOCAL)
    os.makedirs(local, exist_ok=True)
    path, _ = allow_package(local, registry.plugin_packages())
    return path

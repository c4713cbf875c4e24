"""Where the repository is, for tests in any folder of ``tests/``."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_timeouts(method: str) -> dict:
    """Generous start timeouts for a peer-to-peer job (a loaded 2-core machine can take over a
    minute to start its sites); a star job has no such settings."""
    from lightyear.jobs import registry

    p2p = registry.method(method).topology == "p2p"
    return {"start_timeout": 240.0, "ready_timeout": 240.0} if p2p else {}


def console_scripts() -> dict:
    """The console scripts pyproject.toml installs, name -> ``module:function`` ([project.scripts])."""
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        section = f.read().split("[project.scripts]", 1)[1].split("\n[", 1)[0]  # tomllib is Python 3.11+
    return dict(re.findall(r'^([\w-]+)\s*=\s*"([\w.:]+)"', section, re.M))

"""Where the repository is, for tests in any folder of ``tests/``."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_timeouts(method: str) -> dict:
    """Generous start timeouts for a peer-to-peer job (a loaded 2-core machine can take over a
    minute to start its sites); a star job has no such settings."""
    from lightyear.jobs import registry

    p2p = registry.method(method).topology == "p2p"
    return {"start_timeout": 240.0, "ready_timeout": 240.0} if p2p else {}

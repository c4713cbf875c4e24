"""``local``: every site trains alone (LIGHTYEAR's site with no neighbour, the topology ``none``): the
bar any collaboration must clear."""

from __future__ import annotations

from lightyear.flare.declarations import P2P, Method
from lightyear.p2p.methods.lightyear import LightyearExecutor

METHOD = Method(
    "local",
    P2P,
    "every site trains alone: the bar any collaboration must clear",
    site=LightyearExecutor,
    fixed={"topology": "none"},
    omit=("sample_neighbours", "ready_timeout", "topology_args", "start_timeout", "secure_messages"),
)
"""Local training: LIGHTYEAR's site with no neighbour (the topology ``none``)."""

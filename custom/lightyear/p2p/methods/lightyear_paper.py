"""``lightyear_paper``: LIGHTYEAR's site with Eq. 18 exactly as published ("Don't Reach for the Stars",
Eqs. 12-18), for reproducing the paper: the same selection as ``lightyear``, no validated aggregation."""

from __future__ import annotations

from lightyear.algorithms.p2p.lightyear_rule import PAPER
from lightyear.flare.declarations import ORACLE, P2P, Detection, Method
from lightyear.p2p.methods.lightyear import SETTINGS, LightyearExecutor, lightyear_labels

METHOD = Method(
    "lightyear_paper",
    P2P,
    "the same selection and Eq. 18 exactly as published, for reproducing the paper",
    site=LightyearExecutor,
    settings=SETTINGS,
    fixed={"aggregation": PAPER},
    detection=Detection(
        lightyear_labels,
        ("round", "selected", "rejected"),
        "_score",
        "not selected (agreement score < tau or below the skill floor) or rejected",
    ),
    adaptive=ORACLE,
)

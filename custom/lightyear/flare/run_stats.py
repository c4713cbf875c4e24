"""A controller's answer to FLARE's stats collection (``show_stats JOB server``, ``nvflare job monitor``): on its event
each component may add a JSON-able dict under its name; ``nvflare job monitor`` prints the first ``current_round``."""

from __future__ import annotations

from collections.abc import Callable

from nvflare.apis.fl_component import FLComponent
from nvflare.apis.fl_context import FLContext
from nvflare.widgets.info_collector import GroupInfoCollector, InfoCollector

STARTING, TRAINING, EVALUATING = "starting", "training", "evaluating"
FINISHED, ABORTED, FAILED = "finished", "aborted", "failed"
"""Phases a controller reports: ``starting`` until the sites are sent work, ``training``, ``evaluating`` (the star
topology's final evaluation), then ``finished``, ``aborted`` (stopped) or ``failed`` (the run could not go on)."""

REASON_CHARS = 200
"""A site's failure or drop reason is cut to this length in the stats (the log and ``summary.json`` hold it whole)."""


def short(reason: str) -> str:
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 3] + "..."


def add_stats(component: FLComponent, event_type: str, fl_ctx: FLContext, stats: Callable[[], dict]) -> bool:
    """On FLARE's stats request, add ``stats()`` under the component's (class) name; True if it did."""
    if event_type != InfoCollector.EVENT_TYPE_GET_STATS:
        return False
    collector = fl_ctx.get_prop(InfoCollector.CTX_KEY_STATS_COLLECTOR, None)
    if not isinstance(collector, GroupInfoCollector):
        return False
    collector.add_info(group_name=component.name, info=stats())
    return True

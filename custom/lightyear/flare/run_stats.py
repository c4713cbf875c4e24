"""A controller's answer to FLARE's stats collection (``show_stats``, ``nvflare job monitor``).

FLARE's server keeps an ``InfoCollector`` widget (``nvflare/widgets/info_collector.py``). The
admin command ``show_stats JOB server`` (``nvflare/private/fed/server/info_coll_cmd.py``, also
``Session.show_stats`` of ``nvflare/fuel/flare_api``) makes the job's server process fire
``InfoCollector.EVENT_TYPE_GET_STATS`` with a ``GroupInfoCollector`` in the context under
``InfoCollector.CTX_KEY_STATS_COLLECTOR``; each component may add a dict under its own name
(FLARE's ScatterAndGather adds ``phase``, ``current_round`` and ``num_rounds`` this way, and the
workflow communicator adds the controller's open ``tasks`` to the same group). The answer
reaches the admin as JSON, so every value here is a string, a number, None, a list or a dict.
``nvflare job monitor`` (``nvflare/tool/job/job_cli.py``) asks for it every 10 s while the job
runs and prints the first ``current_round`` it finds as ``round=``.
"""

from __future__ import annotations

from collections.abc import Callable

from nvflare.apis.fl_component import FLComponent
from nvflare.apis.fl_context import FLContext
from nvflare.widgets.info_collector import GroupInfoCollector, InfoCollector

STARTING, TRAINING, EVALUATING, FINISHED, ABORTED, FAILED = (
    "starting",
    "training",
    "evaluating",
    "finished",
    "aborted",
    "failed",
)
"""Phases a controller reports: ``starting`` until the sites are sent work, ``training``,
``evaluating`` (the star topology's final evaluation), then ``finished``, ``aborted`` (the job
was stopped) or ``failed`` (the run could not go on: no usable topology, sites that never
started, an error in the controller)."""

REASON_CHARS = 200
"""A site's failure or drop reason is cut to this many characters in the stats (the full text
is in the log and ``summary.json``)."""


def short(reason: str) -> str:
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 3] + "..."


def add_stats(component: FLComponent, event_type: str, fl_ctx: FLContext, stats: Callable[[], dict]) -> bool:
    """If ``event_type`` is FLARE's stats request, add ``stats()`` under the component's name
    (its class name, as FLARE names it); True if it did."""
    if event_type != InfoCollector.EVENT_TYPE_GET_STATS:
        return False
    collector = fl_ctx.get_prop(InfoCollector.CTX_KEY_STATS_COLLECTOR, None)
    if not isinstance(collector, GroupInfoCollector):
        return False
    collector.add_info(group_name=component.name, info=stats())
    return True

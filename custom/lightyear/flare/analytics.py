"""Per-round metrics streamed to TensorBoard through FLARE's analytics streaming.

A site executor hands each finished round's record to :func:`stream_round`, which sends every
metric worth plotting through FLARE's ``AnalyticsSender`` widget on the site; FLARE's
``ConvertToFedEvent`` widget relays it to the server, whose ``TBAnalyticsReceiver`` writes
TensorBoard event files under the run folder (``tb_events/<site>/``), live, while the run goes on:

    tensorboard --logdir workspace/server/simulate_job/tb_events

The generator adds the three components to every job (setting ``tensorboard``, default true).
Streaming is monitoring: a failure to stream is logged and never stops a round.
"""

from __future__ import annotations

import math

ANALYTICS_SENDER_ID = "analytics_sender"
EVENT = "analytix_log_stats"
FED_EVENT_PREFIX = "fed."

_PREFIXES = ("val_", "test_")
_NAMES = ("train_loss", "n_selected", "own_skill", "train_s", "wait_s", "score_s", "sent_bytes")
_SUFFIXES = ("_score",)


def metrics_to_stream(row: dict) -> dict[str, float]:
    """The finite numeric entries of a round record worth a TensorBoard curve."""
    out = {}
    for key, value in row.items():
        if not (key.startswith(_PREFIXES) or key in _NAMES or key.endswith(_SUFFIXES)):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        out[key] = float(value)
    return out


def stream_round(component, row: dict, fl_ctx, sender_id: str | None = ANALYTICS_SENDER_ID) -> int:
    """Send a round record's metrics (global step = the round); returns how many were sent."""
    if not sender_id:
        return 0
    try:
        from nvflare.apis.analytix import AnalyticsDataType

        sender = fl_ctx.get_engine().get_component(sender_id)
        if sender is None or not hasattr(sender, "add"):
            return 0
        step = int(row["round"])
        metrics = metrics_to_stream(row)
        for tag, value in metrics.items():
            sender.add(tag=tag, value=value, data_type=AnalyticsDataType.SCALAR, global_step=step)
        return len(metrics)
    except Exception as exc:  # noqa: BLE001 - monitoring never stops training
        component.log_warning(fl_ctx, f"could not stream round metrics to TensorBoard: {type(exc).__name__}: {exc}")
        return 0


def client_components() -> list[dict]:
    """The site components of the streaming: the sender and the relay to the server."""
    return [
        {"id": ANALYTICS_SENDER_ID, "path": "nvflare.app_common.widgets.streaming.AnalyticsSender", "args": {}},
        {
            "id": "analytics_to_server",
            "path": "nvflare.app_common.widgets.convert_to_fed_event.ConvertToFedEvent",
            "args": {"events_to_convert": [EVENT], "fed_event_prefix": FED_EVENT_PREFIX},
        },
    ]


def server_components() -> list[dict]:
    """The server component that writes TensorBoard event files under the run folder."""
    return [
        {
            "id": "tensorboard",
            "path": "nvflare.app_opt.tracking.tb.tb_receiver.TBAnalyticsReceiver",
            "args": {"events": [FED_EVENT_PREFIX + EVENT]},
        }
    ]

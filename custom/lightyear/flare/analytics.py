"""Per-round metrics to TensorBoard: one message a round from each site, written on the server.

A site's :class:`RoundMetricsSender` (via :func:`stream_round`; failures logged, never raised) sends a round's metrics
in one fire-and-forget message, not as FLARE's ``AnalyticsSender`` events (one a metric, whose runner held the run's end
for its ``grace_period``). The server's :class:`RoundBoard` writes it in ``<run folder>/tb_events/<site>/`` only whole,
from an authenticated site of the run, with at most :data:`MAX_TAGS` finite tags, for a round it has not reported."""

from __future__ import annotations

import os
import threading

from nvflare.apis.event_type import EventType
from nvflare.apis.fl_component import FLComponent
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.shareable import Shareable, make_reply

from lightyear.checks import is_finite_number
from lightyear.flare import constants as C
from lightyear.flare.round_ledger import RoundLedger

ROUND_METRICS_SENDER_ID = "round_metrics_sender"
TB_FOLDER = "tb_events"
MAX_TAGS = 1024
"""The most metrics one round message may carry (a site reports one score per peer)."""
MAX_TAG_LENGTH = 200

_PREFIXES = ("val_", "test_")
_NAMES = ("train_loss", "n_selected", "own_skill", "train_s", "wait_s", "score_s", "sent_bytes")
_SUFFIXES = ("_score",)


def metrics_to_stream(row: dict) -> dict[str, float]:
    """The finite numeric entries of a round record worth a TensorBoard curve."""
    return {
        key: float(value)
        for key, value in row.items()
        if (key.startswith(_PREFIXES) or key in _NAMES or key.endswith(_SUFFIXES)) and is_finite_number(value)
    }


def metrics_problem(metrics) -> str | None:
    """Why the metrics of a received round message cannot be written, or None."""
    if not isinstance(metrics, dict):
        return f"metrics must be a mapping of tag to number, got {type(metrics).__name__}"
    if len(metrics) > MAX_TAGS:
        return f"{len(metrics)} metrics, more than {MAX_TAGS}"
    for tag, value in metrics.items():
        if not isinstance(tag, str) or not 0 < len(tag) <= MAX_TAG_LENGTH:
            return f"a tag must be a string of 1 to {MAX_TAG_LENGTH} characters, got {str(tag)[:40]!r}"
        if not is_finite_number(value):
            return f"metric {tag!r} is not a finite number"
    return None


class RoundMetricsSender(FLComponent):
    """Site side: sends a round record's metrics to the server's :class:`RoundBoard`."""

    def send(self, row: dict, fl_ctx) -> int:
        """Send the metrics of ``row`` (global step = ``row["round"]``); how many were sent."""
        metrics = metrics_to_stream(row)
        message = Shareable({C.KEY_ROUND: int(row["round"]), C.KEY_METRICS: metrics})
        fl_ctx.get_engine().send_aux_request(
            targets=["server"], topic=C.TOPIC_ROUND_METRICS, request=message, timeout=0.0, fl_ctx=fl_ctx
        )
        return len(metrics)


def stream_round(component, row: dict, fl_ctx, sender_id: str = ROUND_METRICS_SENDER_ID) -> int:
    """Stream a round record's metrics (none without a sender); how many. A failure is logged on ``component``."""
    try:
        sender = fl_ctx.get_engine().get_component(sender_id)
        return sender.send(row, fl_ctx) if isinstance(sender, RoundMetricsSender) else 0
    except Exception as exc:  # noqa: BLE001 - monitoring never stops training
        component.log_warning(fl_ctx, f"could not stream round metrics to TensorBoard: {type(exc).__name__}: {exc}")
        return 0


class RoundBoard(FLComponent):
    """Server side: writes each site's round metrics to ``<run folder>/<tb_folder>/<site>/``, once a round."""

    def __init__(self, rounds: int, tb_folder: str = TB_FOLDER):
        super().__init__()
        self.ledger = RoundLedger(rounds)
        if not isinstance(tb_folder, str) or not tb_folder or os.path.isabs(tb_folder) or ".." in tb_folder:
            raise ValueError(f"tb_folder must be a folder name inside the run folder, got {tb_folder!r}")
        self.tb_folder = tb_folder
        self.root = ""
        self._writers: dict = {}
        self._closed = False
        self._lock = threading.Lock()

    def handle_event(self, event_type: str, fl_ctx):
        if event_type == EventType.START_RUN:
            engine = fl_ctx.get_engine()
            self.root = os.path.join(engine.get_workspace().get_run_dir(fl_ctx.get_job_id()), self.tb_folder)
            engine.register_aux_message_handler(topic=C.TOPIC_ROUND_METRICS, message_handle_func=self._on_metrics)
            self.log_info(fl_ctx, f"TensorBoard curves of every site: tensorboard --logdir {self.root}")
        elif event_type == EventType.END_RUN:
            self.close()

    def _on_metrics(self, topic: str, request: Shareable, fl_ctx) -> Shareable:
        site = request.get_peer_prop(key=ReservedKey.IDENTITY_NAME, default=None)
        sites = {c.name for c in fl_ctx.get_engine().get_clients()}
        problem = "not a site of this run" if site not in sites else None
        problem = problem or metrics_problem(request.get(C.KEY_METRICS))
        problem = problem or self.ledger.claim(site, request.get(C.KEY_ROUND))
        if problem:
            self.log_warning(fl_ctx, f"round metrics from {str(site)[:80]!r} not written: {problem}")
            return make_reply(ReturnCode.BAD_REQUEST_DATA)
        try:
            self.write(site, request[C.KEY_ROUND], request[C.KEY_METRICS])
        except Exception as exc:  # noqa: BLE001 - monitoring never stops the run
            self.log_warning(fl_ctx, f"could not write {site}'s round metrics: {type(exc).__name__}: {exc}")
            return make_reply(ReturnCode.EXECUTION_EXCEPTION)
        return make_reply(ReturnCode.OK)

    def write(self, site: str, round_num: int, metrics: dict[str, float]) -> None:
        from nvflare.app_opt.tracking.tb.tb_event_writer import TensorBoardEventWriter

        with self._lock:
            if self._closed:
                raise ValueError("the run has ended: its curves are closed")
            writer = self._writers.get(site)
            if writer is None:
                writer = self._writers[site] = TensorBoardEventWriter(log_dir=os.path.join(self.root, site))
            for tag, value in metrics.items():
                writer.add_scalar(tag, float(value), round_num)
            writer.flush()

    def close(self) -> None:
        """Close every site's event file; nothing is written after (a late message is refused)."""
        with self._lock:
            self._closed = True
            for writer in self._writers.values():
                writer.close()
            self._writers.clear()


def client_components() -> list[dict]:
    return [{"id": ROUND_METRICS_SENDER_ID, "path": "lightyear.flare.analytics.RoundMetricsSender", "args": {}}]


def server_components(rounds: int) -> list[dict]:
    return [{"id": "tensorboard", "path": "lightyear.flare.analytics.RoundBoard", "args": {"rounds": rounds}}]

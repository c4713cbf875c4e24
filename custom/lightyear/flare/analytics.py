"""Per-round metrics to TensorBoard: one message a round from each site, written on the server.

A site executor hands each finished round's record to :func:`stream_round`; the site's
:class:`RoundMetricsSender` sends the metrics worth a curve (:func:`metrics_to_stream`) to the
server in one fire-and-forget message, and the server's :class:`RoundBoard` writes them as
TensorBoard scalars (global step = the round) under the run folder, ``tb_events/<site>/``, live:

    tensorboard --logdir workspace/server/simulate_job/tb_events

One message a site and round, not one FLARE analytics event a metric relayed as a federated event
(``AnalyticsSender`` and ``ConvertToFedEvent``): a run sent one such event per metric, site and
round (counted in docs/results.md, "Waits taken off the two ends of a run"), and once a run had
received one, FLARE's federated-event runner held the server's end of the run for 2 s more (its
``grace_period``, ``nvflare/widgets/fed_event.py``).
The generator adds the two components to every job (setting ``tensorboard``, default true).

Streaming is monitoring: a failure to send is logged and never stops a round. What the server
receives is a site's report, hostile like any other message: the site is FLARE's authenticated
identity of the sender (never a name in the message), only a site of the run gets a folder, and a
message is written only whole, when it holds at most :data:`MAX_TAGS` short tags of finite numbers
for a round of the job that this site has not reported yet; anything else is refused and logged.
So a site can never make the server write more than its rounds times :data:`MAX_TAGS` scalars.
"""

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
    out = {}
    for key, value in row.items():
        if not (key.startswith(_PREFIXES) or key in _NAMES or key.endswith(_SUFFIXES)):
            continue
        if not is_finite_number(value):
            continue
        out[key] = float(value)
    return out


def metrics_problem(metrics) -> str | None:
    """Why the metrics of a received round message cannot be written (see the module docstring), or None."""
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
        message = Shareable()
        message[C.KEY_ROUND] = int(row["round"])
        message[C.KEY_METRICS] = metrics
        fl_ctx.get_engine().send_aux_request(
            targets=["server"], topic=C.TOPIC_ROUND_METRICS, request=message, timeout=0.0, fl_ctx=fl_ctx
        )
        return len(metrics)


def stream_round(component, row: dict, fl_ctx, sender_id: str = ROUND_METRICS_SENDER_ID) -> int:
    """Send a round record's metrics to TensorBoard (nothing when the job has no sender); how many were
    sent. A failure is logged on ``component`` (the site's executor) and never raised."""
    try:
        sender = fl_ctx.get_engine().get_component(sender_id)
        if not isinstance(sender, RoundMetricsSender):
            return 0
        return sender.send(row, fl_ctx)
    except Exception as exc:  # noqa: BLE001 - monitoring never stops training
        component.log_warning(fl_ctx, f"could not stream round metrics to TensorBoard: {type(exc).__name__}: {exc}")
        return 0


class RoundBoard(FLComponent):
    """Server side: writes each site's round metrics to ``<run folder>/<tb_folder>/<site>/``, one message
    a site and round of the job's ``rounds``."""

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
        """Add the scalars of one site's round and flush them to its event file."""
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
    """The site component of the streaming."""
    return [{"id": ROUND_METRICS_SENDER_ID, "path": "lightyear.flare.analytics.RoundMetricsSender", "args": {}}]


def server_components(rounds: int) -> list[dict]:
    """The server component that writes TensorBoard event files under the run folder."""
    return [{"id": "tensorboard", "path": "lightyear.flare.analytics.RoundBoard", "args": {"rounds": rounds}}]

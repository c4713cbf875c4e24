"""One round of a peer-to-peer site, and what an aggregation rule returns.

:class:`RoundStep` is the part of :class:`~lightyear.p2p.site.executor.P2PExecutor` that runs a
single round: local training, the send to this round's out-neighbours, the wait for this round's
in-neighbours (:mod:`lightyear.p2p.site.exchange`), the rule's :meth:`aggregate`, evaluation,
the round's record row and the progress report to the server.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal

from lightyear.flare import constants as C
from lightyear.flare.analytics import stream_round
from lightyear.p2p.site.exchange import Inbox
from lightyear.training.weights import num_bytes

@dataclass
class Aggregation:
    """What an aggregation rule returns: the new weights, record fields, seconds spent scoring,
    and peers it refused while scoring (peer -> reason)."""

    weights: dict
    fields: dict = field(default_factory=dict)
    score_s: float = 0.0
    rejected: dict = field(default_factory=dict)


class RoundStep:
    """The round of a :class:`~lightyear.p2p.site.executor.P2PExecutor` (a mixin: it uses the executor's
    runtime, exchange, slots, malfunction and settings)."""

    def _round(self, round_num: int, fl_ctx: FLContext, abort_signal: Signal) -> dict | None:
        rt, exchange = self.runtime, self.exchange
        self.slots.waited_s = 0.0
        senders, receivers = self.round_senders(round_num), self.round_receivers(round_num)
        t0 = time.perf_counter()
        with self.slots.hold(self._abort):
            train_stats = self.local_update(round_num)
            own = rt.get_weights()
        t1 = time.perf_counter()

        outgoing, applied = own, "none"
        if self.malfunction is not None:
            outgoing, applied = self.malfunction.corrupt(own, round_num, self.site)
            self.log_info(fl_ctx, f"round {round_num}: malfunction sends a {applied} model")
        outgoing = exchange.codec.encode(outgoing)
        sent = exchange.send(round_num, outgoing, fl_ctx.get_engine(), targets=receivers)

        inbox: Inbox = exchange.collect(round_num, self._abort, senders=senders, wait_for=self.awaited_senders(round_num, senders))
        self.inbox = inbox
        if abort_signal.triggered:
            return None
        t2 = time.perf_counter()
        if inbox.late:
            self.log_warning(fl_ctx, f"round {round_num}: no model from {inbox.late} within peer_deadline={self.peer_deadline:g} s; skipped this round")
        for peer, reason in inbox.rejected.items():
            self.log_warning(fl_ctx, f"round {round_num}: rejected the model of {peer}: {reason}")

        with self.slots.hold(self._abort):
            outcome = self.aggregate(round_num, own, inbox.valid)
        t3 = time.perf_counter()
        self.inbox = None  # the received models are not kept past their round
        exchange.release(round_num)
        for peer, reason in outcome.rejected.items():
            self.log_warning(fl_ctx, f"round {round_num}: rejected the model of {peer} while scoring it: {reason}")
        with self.slots.hold(self._abort):
            rt.set_weights(outcome.weights)
            val, test = rt.evaluate("val"), rt.evaluate("test")
        t4 = time.perf_counter()

        row = {"round": round_num, "site": self.site, "malfunction": applied}
        row.update(outcome.fields)
        rejected = sorted(set(inbox.rejected) | set(outcome.rejected))
        row.update({"late": inbox.late, "rejected": rejected, "not_waited_for": inbox.not_waited_for})
        row.update({"senders": senders, "receivers": receivers})
        row["train_loss"] = train_stats["train_loss"]
        row.update({f"val_{k}": v for k, v in val.items()})
        row.update({f"test_{k}": v for k, v in test.items()})
        exchange.wait_last_send(2.0)  # so that the record has the bytes this round delivered
        self.isolation.update(bool(senders or receivers), bool(inbox.heard), sent["bytes"] > 0)
        row.update(
            {
                "train_s": t1 - t0,
                "wait_s": t2 - t1,
                "score_s": outcome.score_s,
                "aggregate_s": (t3 - t2) - outcome.score_s,
                "eval_s": t4 - t3,
                "slot_wait_s": self.slots.waited_s,
                "model_bytes": num_bytes(outgoing),
                "sent_bytes": sent["bytes"],
                "send_s": sent["send_s"],
                "neighbours": len(self.neighbours),
                "isolated_rounds": self.isolation.count,
            }
        )
        row["_val"], row["_test"] = val, test
        self.log_info(
            fl_ctx,
            f"round {round_num}: selected {outcome.fields.get('selected', '-')}, val "
            + ", ".join(f"{k} {v:.4f}" for k, v in val.items())
            + ", test "
            + ", ".join(f"{k} {v:.4f}" for k, v in test.items()),
        )
        return row

    def _report(self, row: dict, fl_ctx: FLContext) -> None:
        """Send the round's record to the server (fire and forget: the server only monitors),
        and its metrics to TensorBoard (:mod:`lightyear.flare.analytics`)."""
        stream_round(self, row, fl_ctx)
        message = Shareable()
        message[C.KEY_PROGRESS] = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in row.items()}
        try:
            fl_ctx.get_engine().send_aux_request(
                targets=["server"], topic=C.TOPIC_PROGRESS, request=message, timeout=0.0, fl_ctx=fl_ctx
            )
        except Exception as exc:  # noqa: BLE001 - monitoring must never stop training
            self.log_warning(fl_ctx, f"could not report progress to the server: {exc}")

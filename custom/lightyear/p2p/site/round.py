"""One round of a peer-to-peer site, and what an aggregation rule returns.

:class:`SiteRound` runs a single round of a site from what it is given: local training, the send
to this round's out-neighbours, the wait for this round's in-neighbours
(:mod:`lightyear.p2p.site.exchange`), the rule's ``aggregate``, evaluation and the round's record
row. The rule (the site's :class:`~lightyear.p2p.site.executor.P2PExecutor` subclass) supplies
what differs between methods (:class:`RoundRule`). :func:`report_round` sends the row to the server.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal

from lightyear.algorithms.attacks.updates import LF
from lightyear.flare import constants as C
from lightyear.flare.analytics import stream_round
from lightyear.p2p.site.attack_round import AttackInputs
from lightyear.p2p.site.exchange import Inbox, PeerExchange, PerReceiver
from lightyear.p2p.site.isolation import IsolationWatch
from lightyear.training.compute_slots import ComputeSlots
from lightyear.training.weights import num_bytes


@dataclass
class Aggregation:
    """What an aggregation rule returns: the new weights, record fields, seconds spent scoring,
    peers it refused while scoring (peer -> reason), and, when the rule evaluated exactly these
    weights on the validation set already, their metrics (``evaluate("val")``'s), which the round
    then records instead of evaluating them again."""

    weights: dict
    fields: dict = field(default_factory=dict)
    score_s: float = 0.0
    rejected: dict = field(default_factory=dict)
    val_metrics: dict | None = None


class Runtime(Protocol):
    """A site's data, model and trainer as a round uses them (:class:`~lightyear.training.site_runtime.SiteRuntime`)."""

    def get_weights(self) -> dict: ...

    def set_weights(self, weights: dict) -> None: ...

    def evaluate(self, split: str, weights: dict | None = None) -> dict: ...


class Malfunction(Protocol):
    """What a faulty site sends instead of its model
    (:class:`~lightyear.flare.malfunction_filter.MalfunctionFilter`)."""

    def corrupt(self, weights: dict, round_num: int, site: str) -> tuple[dict, str]: ...


class Attack(Protocol):
    """What an attacking site sends (:class:`~lightyear.p2p.site.attacker.PeerAttacker`)."""

    kind: str

    def outgoing(self, inputs: AttackInputs) -> tuple[dict, dict]: ...


class RoundRule(Protocol):
    """What a peer-to-peer method decides in a round (implemented by each P2P executor)."""

    def round_senders(self, round_num: int) -> list[str]: ...

    def round_receivers(self, round_num: int) -> list[str]: ...

    def local_update(self, round_num: int) -> dict: ...

    def awaited_senders(self, round_num: int, senders: list[str]) -> list[str]: ...

    def aggregate(
        self, round_num: int, own: dict, received: dict[str, dict], inbox: Inbox | None = None
    ) -> Aggregation: ...


@dataclass
class SiteRound:
    """One round of one site, with every collaborator named.

    ``runtime``: the site's data, model and trainer; ``exchange``: the peer exchange of this run;
    ``slots``: the compute slots shared by the sites of one machine; ``isolation``: counts rounds
    without any neighbour; ``malfunction``: the faulty site's filter (None: benign); ``log(level,
    message)``; ``abort()``: whether the run is being stopped; ``attack``: the attacking site's
    :class:`~lightyear.p2p.site.attacker.PeerAttacker` (None: no attack), which decides what is
    sent; ``flip_labels``: the site trains on flipped labels (recorded as the attack ``lf``).
    """

    site: str
    rule: RoundRule
    runtime: Runtime
    exchange: PeerExchange
    slots: ComputeSlots
    isolation: IsolationWatch
    malfunction: Malfunction | None
    peer_deadline: float
    neighbours: int
    log: Callable[[str, str], None]
    abort: Callable[[], bool]
    attack: Attack | None = None
    flip_labels: bool = False
    before_send: Callable[[], None] | None = None
    """Called once training is done and before anything is sent (the first round: the start handshake)."""

    def run(self, round_num: int, engine, abort_signal: Signal) -> dict | None:
        """Run round ``round_num``; its record row (``_val``/``_test`` hold the metrics), or None when aborted."""
        rt, exchange, rule = self.runtime, self.exchange, self.rule
        self.slots.waited_s = 0.0
        senders, receivers = rule.round_senders(round_num), rule.round_receivers(round_num)
        round_start = time.time()
        with self.slots.hold(self.abort):
            w0 = time.perf_counter()
            start = rt.get_weights() if self.attack is not None else None  # the round-start model
            train_stats = rule.local_update(round_num)
            own = rt.get_weights()
            train_s = time.perf_counter() - w0
        if self.before_send is not None:
            self.before_send()
        t1 = time.perf_counter()

        outgoing, applied, attack_fields = own, LF if self.flip_labels else "none", {}
        if self.malfunction is not None:
            outgoing, applied = self.malfunction.corrupt(own, round_num, self.site)
            self.log("info", f"round {round_num}: malfunction sends a {applied} model")
        if self.attack is not None:  # the own model stays honest: only what is sent is crafted
            inputs = AttackInputs(
                round_num,
                start,
                own,
                senders,
                engine,
                exchange,
                rule,
                lambda: self.slots.hold(self.abort),
                self.abort,
                receivers=receivers,
            )
            outgoing, attack_fields = self.attack.outgoing(inputs)
            applied = self.attack.kind
        outgoing = encoded(exchange.codec, outgoing)
        sent = exchange.send(round_num, outgoing, engine, targets=receivers)

        inbox: Inbox = exchange.collect(
            round_num, self.abort, senders=senders, wait_for=rule.awaited_senders(round_num, senders)
        )
        if abort_signal.triggered:
            return None
        t2 = time.perf_counter()
        if inbox.late:
            self.log(
                "warning",
                f"round {round_num}: no model from {inbox.late} within peer_deadline={self.peer_deadline:g} s; "
                "skipped this round",
            )
        for peer, reason in inbox.rejected.items():
            self.log("warning", f"round {round_num}: rejected the model of {peer}: {reason}")

        with self.slots.hold(self.abort):  # one slot for aggregation and evaluation: one queueing, not two
            a0 = time.perf_counter()
            outcome = rule.aggregate(round_num, own, inbox.valid, inbox=inbox)
            aggregate_s = time.perf_counter() - a0 - outcome.score_s
            exchange.release(round_num)
            e0 = time.perf_counter()
            rt.set_weights(outcome.weights)
            val = dict(outcome.val_metrics) if outcome.val_metrics is not None else rt.evaluate("val")
            test = rt.evaluate("test")
            eval_s = time.perf_counter() - e0
        for peer, reason in outcome.rejected.items():
            self.log("warning", f"round {round_num}: rejected the model of {peer} while scoring it: {reason}")

        row = {"round": round_num, "site": self.site, "malfunction": applied}
        row.update(outcome.fields)
        row.update(attack_fields)
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
                "train_s": train_s,
                "wait_s": t2 - t1,
                "score_s": outcome.score_s,
                "aggregate_s": aggregate_s,
                "eval_s": eval_s,
                "slot_wait_s": self.slots.waited_s,
                "round_start": round_start,
                "round_end": time.time(),
                "model_bytes": num_bytes(
                    next(iter(outgoing.values()), {}) if isinstance(outgoing, PerReceiver) else outgoing
                ),
                "sent_bytes": sent["bytes"],
                "send_s": sent["send_s"],
                "neighbours": self.neighbours,
                "isolated_rounds": self.isolation.count,
            }
        )
        row["_val"], row["_test"] = val, test
        self.log(
            "info",
            f"round {round_num}: selected {outcome.fields.get('selected', '-')}, val "
            + ", ".join(f"{k} {v:.4f}" for k, v in val.items())
            + ", test "
            + ", ".join(f"{k} {v:.4f}" for k, v in test.items()),
        )
        return row


def encoded(codec, outgoing):
    """``outgoing`` as it goes on the wire: a model encoded by ``codec``, or a
    :class:`~lightyear.p2p.site.exchange.PerReceiver` of encoded models (each distinct model once)."""
    if not isinstance(outgoing, PerReceiver):
        return codec.encode(outgoing)
    done: dict[int, dict] = {}
    for model in outgoing.values():
        if id(model) not in done:
            done[id(model)] = codec.encode(model)
    return PerReceiver({receiver: done[id(model)] for receiver, model in outgoing.items()})


def report_round(component, row: dict, fl_ctx: FLContext) -> None:
    """Send a round's record to the server (fire and forget: the server only monitors), and its
    metrics to TensorBoard (:mod:`lightyear.flare.analytics`); ``component`` is the site's executor."""
    stream_round(component, row, fl_ctx)
    message = Shareable()
    message[C.KEY_PROGRESS] = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in row.items()}
    try:
        fl_ctx.get_engine().send_aux_request(
            targets=["server"], topic=C.TOPIC_PROGRESS, request=message, timeout=0.0, fl_ctx=fl_ctx
        )
    except Exception as exc:  # noqa: BLE001 - monitoring must never stop training
        component.log_warning(fl_ctx, f"could not report progress to the server: {exc}")

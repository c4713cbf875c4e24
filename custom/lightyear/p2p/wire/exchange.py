"""One site's side of the model exchange between peers: send, receive, check, wait.

Every peer message is hostile: a model is checked on arrival (:mod:`lightyear.p2p.wire.arrival`), only in-neighbours
are heard. Models go ``via_server`` (the sender named by :mod:`lightyear.p2p.server.model_relay`) or ``direct`` (the
sender is FLARE's peer identity, which modified FLARE code could fake; docs/reliability.md, "Identity").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.shareable import Shareable, make_reply

from lightyear.flare import constants as C
from lightyear.p2p.wire import buffer as peer_buffer
from lightyear.p2p.wire.arrival import checked_model, num_samples_problem, open_sealed
from lightyear.p2p.wire.buffer import PeerModelBuffer
from lightyear.p2p.wire.latest_models import LatestModelStore
from lightyear.p2p.wire.payload import PayloadCodec
from lightyear.training.weights import num_bytes


class PerReceiver(dict):
    """Receiver -> the model (payload) sent to it: a sender that sends each receiver its own."""


@dataclass(frozen=True)
class Rejected:
    """Stands in the buffer for a model that failed its checks: the round records why."""

    reason: str


@dataclass(frozen=True)
class Delivery:
    """A model that passed its checks, with the training-set size its sender claimed (None: not sent)."""

    weights: dict
    num_samples: int | None = None


@dataclass
class Inbox:
    """What one round received (valid models cast to the own dtypes); ``heard``: the senders whose message for it
    (asynchronous: any new one) arrived, valid or not."""

    valid: dict = field(default_factory=dict)
    rejected: dict = field(default_factory=dict)
    late: list = field(default_factory=list)
    not_waited_for: list = field(default_factory=list)
    num_samples: dict = field(default_factory=dict)
    sent_round: dict = field(default_factory=dict)
    heard: list = field(default_factory=list)


class PeerExchange:
    def __init__(
        self,
        send_to: list[str],
        receive_from: list[str],
        rounds: int,
        peer_deadline: float,
        send_timeout: float,
        max_missed_rounds: int,
        max_abs_weight: float | None,
        log: Callable[[str, str], None],
        start_round: int = 0,
        asynchronous: bool = False,
        async_wait: float = 5.0,
        reference: dict | None = None,
        codec: PayloadCodec | None = None,
        secure: bool = False,
        num_samples: int | None = None,
        topic: str = C.TOPIC_MODEL,
        via_server: bool = False,
        token: str | None = None,
        sealer=None,
    ):
        """``reference``: this site's model, which received models are checked against (None: not ready);
        ``sealer``: with ``via_server`` and ``secure``, seals models sent and opens those received."""
        self.send_to = sorted(send_to)
        self.receive_from = sorted(receive_from)
        self.peer_deadline = peer_deadline
        self.send_timeout = send_timeout
        self.max_missed_rounds = max_missed_rounds
        self.max_abs_weight = max_abs_weight
        self.log = log
        self.buffer = PeerModelBuffer()
        self.buffer.start(rounds, current=start_round)
        self.asynchronous = bool(asynchronous)
        self.async_wait = float(async_wait)
        self.latest = LatestModelStore(self.receive_from, rounds)
        self.missed = {peer: 0 for peer in self.receive_from}
        self.reference: dict | None = reference
        self.num_samples: int | None = num_samples
        self.secure = bool(secure)
        self.codec = codec or PayloadCodec()
        self.topic = topic
        self.via_server = bool(via_server)
        self.token = token
        self.sealer = sealer if self.via_server else None
        self._threads: list[threading.Thread] = []
        self._stop_last_send = threading.Event()

    # ------------------------------------------------------------------ receiving
    def on_model(self, request: Shareable, topic: str | None = None) -> Shareable:
        """Handle one model message on ``topic``; the reply only tells the sender whether to send it again."""
        forwarded = topic == C.TOPIC_FORWARD
        if forwarded != (self.via_server and self.topic == C.TOPIC_MODEL):
            route = "through the server" if self.via_server else "from site to site"
            self.log("warning", f"refused a model on {str(topic)[:40]}: this run's models go {route}")
            return make_reply(ReturnCode.BAD_REQUEST_DATA)
        sender = request.get(C.KEY_SENDER) if forwarded else request.get_peer_prop(ReservedKey.IDENTITY_NAME, None)
        round_num = request.get(C.KEY_ROUND)
        if sender not in self.missed:
            self.log("warning", f"refused a model from {repr(sender)[:80]}: not an in-neighbour of this site")
            return make_reply(ReturnCode.BAD_REQUEST_DATA)
        if self.reference is None or (not self.asynchronous and self.buffer.ahead(round_num)):
            return make_reply(ReturnCode.SERVICE_UNAVAILABLE)  # not ready yet: the sender tries again later
        payload, sealed_problem = request.get(C.KEY_WEIGHTS), ""
        if forwarded and self.sealer is not None:
            if not self.asynchronous and self.buffer.holds(round_num, sender):
                return make_reply(ReturnCode.OK)  # a second copy of a model held: refused unopened, as below
            payload, sealed_problem, signed = open_sealed(request, self.sealer, self.reference)
            if not signed:  # made by the server or spoilt on the way: nothing it says is the sender's doing
                why = f"refused a model forwarded as {sender}'s that {sender} did not sign: {sealed_problem}"
                self.log("warning", why)
                return make_reply(ReturnCode.BAD_REQUEST_DATA)
        if sealed_problem:  # signed, but not a model: rejected as the sender's, with the reason
            weights, problems = None, [sealed_problem]
        else:
            weights, problems = checked_model(
                payload, request.get(C.KEY_PAYLOAD), self.reference, self.codec, self.max_abs_weight
            )
        claimed = request.get(C.KEY_NUM_SAMPLES)
        size_problem = None if claimed is None else num_samples_problem(claimed)
        if size_problem:
            problems.append(size_problem)
        item = (
            Rejected("; ".join(problems)) if problems else Delivery(weights, None if claimed is None else int(claimed))
        )
        if self.asynchronous:
            status = self.latest.put(round_num, sender, item, rejected_reason=getattr(item, "reason", None))
        else:
            status = self.buffer.put(round_num, sender, item)
        if status == peer_buffer.EARLY:  # still more than a round behind: sent again later
            return make_reply(ReturnCode.SERVICE_UNAVAILABLE)
        if status != peer_buffer.STORED:  # late, duplicate, stale or bad round: acknowledged, so not sent again
            self.log("warning", f"model from {sender} for round {repr(round_num)[:40]} not kept: {status}")
        return make_reply(ReturnCode.OK)

    def collect(
        self,
        round_num: int,
        abort: Callable[[], bool],
        senders: list[str] | None = None,
        wait_for: list[str] | None = None,
    ) -> Inbox:
        """Wait up to ``peer_deadline`` for the models of ``wait_for`` (default: ``senders``, default: all) except
        those that missed ``max_missed_rounds`` in a row; return those of ``senders`` that arrived, checked."""
        senders = self.receive_from if senders is None else sorted(set(senders) & set(self.receive_from))
        wait_for = senders if wait_for is None else sorted(set(wait_for) & set(senders))
        waited = [p for p in wait_for if self.missed[p] < self.max_missed_rounds]
        if self.asynchronous:
            return self._collect_latest(round_num, abort, senders, wait_for, waited)
        self.buffer.wait_for(round_num, waited, self.peer_deadline, abort=abort)
        arrived = self.buffer.take(round_num)
        inbox = Inbox(not_waited_for=sorted(set(wait_for) - set(waited)))
        for peer in senders:
            if peer not in arrived:
                self._missed(peer, peer in wait_for, peer in waited, inbox)
                continue
            self._back(peer, round_num)
            inbox.heard.append(peer)
            self._file(inbox, peer, arrived[peer], round_num)
        for peer in sorted(set(arrived) - set(senders)):  # an in-neighbour this round does not take
            item = arrived[peer]
            if isinstance(item, Rejected):
                inbox.rejected[peer] = item.reason  # recorded (and logged) like any rejection
            else:
                self.log("info", f"round {round_num}: model from {peer} not taken: not among this round's senders")
        return inbox

    def _collect_latest(self, round_num, abort, senders, wait_for, waited) -> Inbox:
        """Asynchronous mode: wait at most ``async_wait`` s for new models, then take the newest held."""
        self.latest.wait_fresh(waited, self.async_wait, abort=abort)
        held, rejected, fresh = self.latest.take(senders)
        inbox = Inbox(not_waited_for=sorted(set(wait_for) - set(waited)))
        for peer in senders:
            if peer in fresh:
                self._back(peer, round_num)
                inbox.heard.append(peer)
            else:
                self._missed(peer, peer in wait_for, peer in waited, inbox)
            if peer in rejected:
                inbox.rejected[peer] = rejected[peer]
            elif peer in held:
                sent_round, delivery = held[peer]
                self._file(inbox, peer, delivery, sent_round)
        return inbox

    def _missed(self, peer: str, expected: bool, waited: bool, inbox: Inbox) -> None:
        if not expected:
            return
        was = self.missed[peer]
        self.missed[peer] += 1
        if waited:
            inbox.late.append(peer)
        if was < self.max_missed_rounds <= self.missed[peer]:
            self.log(
                "warning",
                f"{peer} missed {was + 1} rounds in a row: no longer waited for (still accepted if it returns)",
            )

    def _back(self, peer: str, round_num: int) -> None:
        if self.missed[peer] >= self.max_missed_rounds:
            self.log("info", f"{peer} is back in round {round_num}")
        self.missed[peer] = 0

    def _file(self, inbox: Inbox, peer: str, item, sent_round: int) -> None:
        if isinstance(item, Rejected):
            inbox.rejected[peer] = item.reason
            return
        inbox.valid[peer] = self._cast(item.weights)
        inbox.sent_round[peer] = sent_round
        if item.num_samples is not None:
            inbox.num_samples[peer] = item.num_samples

    def not_waiting_for(self, peers) -> None:
        """Wait for none of ``peers`` (they did not answer the start handshake) until they send."""
        for peer in set(peers) & set(self.missed):
            self.missed[peer] = self.max_missed_rounds

    def peek(self, round_num: int, senders: list[str], timeout: float, abort: Callable[[], bool]) -> dict[str, dict]:
        """The valid models of ``senders`` that arrived within ``timeout`` s (asynchronous: the newest, without
        waiting), left in place for :meth:`collect`."""
        senders = sorted(set(senders) & set(self.receive_from))
        if self.asynchronous:
            items = self.latest.peek(senders)
        else:
            items = self.buffer.wait_for(round_num, senders, timeout, abort=abort)
        return {p: self._cast(item.weights) for p, item in items.items() if isinstance(item, Delivery)}

    def _cast(self, weights: dict) -> dict:
        return {k: np.asarray(v).astype(self.reference[k].dtype, copy=False) for k, v in weights.items()}

    def release(self, round_num: int) -> None:
        if not self.asynchronous:  # the asynchronous store keeps the newest model of each sender
            self.buffer.release(round_num)

    # ------------------------------------------------------------------ sending
    def send(self, round_num: int, weights: dict, engine, targets: list[str] | None = None) -> dict:
        """Send this round's model to ``targets`` (default: every out-neighbour) in the background; returns the dict
        the thread fills with ``bytes`` and ``send_s``."""
        sent = {"bytes": 0, "send_s": ""}
        targets = self.send_to if targets is None else sorted(set(targets) & set(self.send_to))
        if isinstance(weights, PerReceiver):
            targets = [t for t in targets if t in weights]
        if self.asynchronous:  # a newer model makes the previous one pointless: stop its retries
            self._stop_last_send.set()
            self._stop_last_send = threading.Event()
        if targets:
            thread = threading.Thread(
                target=self._send, args=(round_num, weights, engine, sent, targets, self._stop_last_send), daemon=True
            )
            thread.start()
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        return sent

    def _send(
        self, round_num: int, weights: dict, engine, sent: dict, targets: list[str], stop: threading.Event
    ) -> None:
        """Re-send to those that did not answer OK until ``peer_deadline`` or ``stop``; one request per model."""
        fl_ctx = engine.new_context()
        pending = set(targets)
        deadline = time.monotonic() + self.peer_deadline
        start = time.perf_counter()
        retry = peer_buffer.RETRY_S
        seals: dict[int, list] = {}  # id(model) -> [(sealed weights, seal)]: each receiver's model sealed once
        unsealed: dict[str, str] = {}  # receiver -> why no model could be sealed for it yet
        while pending and time.monotonic() < deadline and not stop.is_set():
            for model, group in _by_model(weights, sorted(pending)):
                for part, sealed in self._sealed_parts(round_num, model, group, seals, unsealed):
                    took = self._request(round_num, model, part, engine, fl_ctx, deadline, sealed)
                    pending -= took
                    sent["bytes"] += num_bytes(model) * (min(1, len(took)) if self.via_server else len(took))
            if pending:
                stop.wait(retry)
                retry = min(peer_buffer.MAX_RETRY_S, 2 * retry)
        if pending and stop.is_set():
            self.log("info", f"round {round_num}: a newer model superseded this one before {sorted(pending)} took it")
        elif pending:
            why = "; ".join(f"{p}: nothing sealed for it ({unsealed[p]})" for p in sorted(pending) if p in unsealed)
            self.log(
                "warning", f"round {round_num}: could not deliver the model to {sorted(pending)}" + (why and f"; {why}")
            )
        else:
            sent["send_s"] = time.perf_counter() - start

    def _sealed_parts(self, round_num: int, model: dict, group: list[str], seals: dict, unsealed: dict) -> list:
        """[(receivers, their sealed model or None)] for ``model``: the seals so far plus one for receivers now due."""
        if self.sealer is None:
            return [(group, None)]
        made = seals.setdefault(id(model), [])
        covered = {t for _, seal in made for t in seal["wrapped"]}
        fresh = [t for t in group if t not in covered]
        if fresh:
            claimed = None if self.num_samples is None else int(self.num_samples)  # as the request carries it
            try:
                keys, problems = self.sealer.receiver_keys(fresh)
                unsealed.update(problems)
                if keys:
                    made.append(self.sealer.seal(round_num, self.codec.marker, claimed, model, keys))
            except Exception as exc:  # noqa: BLE001 - e.g. a model too large to seal: not sent, never fatal
                unsealed.update({t: f"sealing failed ({type(exc).__name__}: {str(exc)[:80]})" for t in fresh})
        parts = [([t for t in group if t in seal["wrapped"]], (weights, seal)) for weights, seal in made]
        return [(part, sealed) for part, sealed in parts if part]

    def _request(
        self, round_num: int, weights: dict, targets: list[str], engine, fl_ctx, deadline: float, sealed=None
    ) -> set:
        """One send of ``weights`` (or ``sealed``: (sealed weights, seal)) to ``targets``; the targets that took it."""
        request = Shareable()
        request[C.KEY_ROUND] = round_num
        request[C.KEY_WEIGHTS] = weights if sealed is None else sealed[0]
        if sealed is not None:
            request[C.KEY_SEAL] = sealed[1]
        request[C.KEY_PAYLOAD] = self.codec.marker
        if self.num_samples is not None:
            request[C.KEY_NUM_SAMPLES] = int(self.num_samples)
        if self.via_server:
            request[C.KEY_TOKEN] = self.token
            request[C.KEY_TARGETS] = list(targets)
            request[C.KEY_SUPERSEDES] = self.asynchronous
        timeout = max(1.0, min(self.send_timeout, deadline - time.monotonic()))
        try:
            replies = engine.send_aux_request(
                targets=[C.SERVER] if self.via_server else targets,
                topic=C.TOPIC_UPLOAD if self.via_server else self.topic,
                request=request,
                timeout=timeout,
                fl_ctx=fl_ctx,
                secure=self.secure and not self.via_server,  # through the server: sealed, see sealing.py
            )
        except Exception as exc:  # noqa: BLE001 - a failed send is retried, never fatal
            self.log("warning", f"round {round_num}: sending failed ({type(exc).__name__}: {exc}); retrying")
            return set()
        replies = replies or {}
        if self.via_server:
            took = any(_is_ok(reply) for reply in replies.values())
            return set(targets) if took else set()
        return {peer for peer, reply in replies.items() if peer in targets and _is_ok(reply)}

    def declare_limit(self, limit: int, engine, abort: Callable[[], bool], timeout: float) -> bool:
        """Tell the server this site's payload limit (and certificate) within ``timeout`` s; whether it took it."""
        fl_ctx = engine.new_context()
        deadline = time.monotonic() + timeout
        while not abort():
            request = Shareable()
            request[C.KEY_TOKEN] = self.token
            request[C.KEY_LIMIT] = int(limit)
            if self.sealer is not None:
                request[C.KEY_CERTIFICATE] = self.sealer.certificate
            try:
                replies = engine.send_aux_request(
                    targets=[C.SERVER], topic=C.TOPIC_DECLARE, request=request, timeout=5.0, fl_ctx=fl_ctx
                )
            except Exception as exc:  # noqa: BLE001 - tried again until the deadline
                self.log("debug", f"declaring the payload limit failed: {exc}")
                replies = {}
            if any(_is_ok(reply) for reply in (replies or {}).values()):
                return True
            if time.monotonic() >= deadline:
                self.log("warning", "the server did not take this site's payload limit: its uploads may be refused")
                return False
            time.sleep(0.5)
        return False

    def wait_sent(self, timeout: float) -> None:
        """Wait for every send still under way, at most ``timeout`` s in all."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def wait_last_send(self, timeout: float) -> None:
        if self._threads:
            self._threads[-1].join(timeout=timeout)


def _is_ok(reply) -> bool:
    return isinstance(reply, Shareable) and reply.get_return_code() == ReturnCode.OK


def _by_model(weights, targets: list[str]) -> list[tuple[dict, list[str]]]:
    """[(model, the targets it goes to)]: one per distinct model."""
    if not isinstance(weights, PerReceiver):
        return [(weights, targets)]
    groups: dict[int, tuple[dict, list[str]]] = {}
    for target in targets:
        model = weights[target]
        groups.setdefault(id(model), (model, []))[1].append(target)
    return list(groups.values())

"""One site's side of the model exchange between peers: send, receive, check, wait.

Every message a peer sends is treated as written by a broken or hostile site. A model is
checked when it arrives (:func:`~lightyear.algorithms.model_check.model_problems`: keys, shapes,
values finite in the receiver's dtype and within ``max_abs_weight``), so a malformed one is never
held for aggregation; the buffer accepts only the current and the next round, one model per
sender and round (:class:`~lightyear.flare.peer_buffer.PeerModelBuffer`); a sender that is not an
in-neighbour is refused. A neighbour that missed ``max_missed_rounds`` consecutive rounds is no
longer waited for (a dead site costs one deadline, not one per round) but its models are still
taken when it comes back.

The sender's name is the identity FLARE puts in the message's peer properties. FLARE 2.9
passes aux handlers only those properties, which the sending site's own FLARE code sets: the
server relay authenticates the sending client (mTLS and its token in a provisioned deployment),
but a site running modified FLARE code could claim another site's name to its peers. See the
README's section on reliability.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply

from lightyear.algorithms.model_check import model_problems
from lightyear.flare import constants as C
from lightyear.flare import peer_buffer
from lightyear.flare.peer_buffer import PeerModelBuffer
from lightyear.training.weights import num_bytes


@dataclass(frozen=True)
class Rejected:
    """Stands in the buffer for a model that failed its checks: the round records why."""

    reason: str


@dataclass
class Inbox:
    """What one round received: valid models (cast to the own dtypes), rejected ones with the
    reason, neighbours that did not deliver in time, and those no longer waited for."""

    valid: dict = field(default_factory=dict)
    rejected: dict = field(default_factory=dict)
    late: list = field(default_factory=list)
    not_waited_for: list = field(default_factory=list)


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
    ):
        self.send_to = sorted(send_to)
        self.receive_from = sorted(receive_from)
        self.peer_deadline = peer_deadline
        self.send_timeout = send_timeout
        self.max_missed_rounds = max_missed_rounds
        self.max_abs_weight = max_abs_weight
        self.log = log
        self.buffer = PeerModelBuffer()
        self.buffer.start(rounds, current=start_round)
        self.missed = {peer: 0 for peer in self.receive_from}
        self.reference: dict | None = None
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ receiving
    def on_model(self, request: Shareable) -> Shareable:
        """Handle one model message; the reply only tells the sender whether to send it again."""
        sender = request.get_peer_prop(key=ReservedKey.IDENTITY_NAME, default=None)
        round_num = request.get(C.KEY_ROUND)
        if sender not in self.missed:
            self.log("warning", f"refused a model from {sender!r}: not an in-neighbour of this site")
            return make_reply(ReturnCode.BAD_REQUEST_DATA)
        if self.reference is None:
            return make_reply(ReturnCode.SERVICE_UNAVAILABLE)  # not ready yet: the sender retries
        weights = request.get(C.KEY_WEIGHTS)
        problems = model_problems(weights, self.reference, self.max_abs_weight)
        item = Rejected("; ".join(problems)) if problems else weights
        status = self.buffer.put(round_num, sender, item)
        if status != peer_buffer.STORED:
            self.log("warning", f"model from {sender} for round {round_num!r} not kept: {status}")
        # late, early, duplicate or bad-round models are acknowledged so that the sender stops re-sending
        return make_reply(ReturnCode.OK)

    def collect(self, round_num: int, abort: Callable[[], bool]) -> Inbox:
        """Wait for this round's models until ``peer_deadline``; skip neighbours that missed
        ``max_missed_rounds`` in a row; return what arrived, checked."""
        waited = [p for p in self.receive_from if self.missed[p] < self.max_missed_rounds]
        self.buffer.wait_for(round_num, waited, self.peer_deadline, abort=abort)
        arrived = self.buffer.take(round_num)
        inbox = Inbox(not_waited_for=sorted(set(self.receive_from) - set(waited)))
        for peer in self.receive_from:
            if peer not in arrived:
                was = self.missed[peer]
                self.missed[peer] += 1
                if peer in waited:
                    inbox.late.append(peer)
                if was < self.max_missed_rounds <= self.missed[peer]:
                    self.log("warning", f"{peer} missed {self.missed[peer]} rounds in a row: no longer waited for (still accepted if it returns)")
                continue
            if self.missed[peer] >= self.max_missed_rounds:
                self.log("info", f"{peer} is back in round {round_num}")
            self.missed[peer] = 0
            item = arrived[peer]
            if isinstance(item, Rejected):
                inbox.rejected[peer] = item.reason
            else:
                inbox.valid[peer] = {k: np.asarray(v).astype(self.reference[k].dtype, copy=False) for k, v in item.items()}
        return inbox

    def release(self, round_num: int) -> None:
        self.buffer.release(round_num)

    # ------------------------------------------------------------------ sending
    def send(self, round_num: int, weights: dict, engine) -> dict:
        """Send this round's model to every out-neighbour in the background; returns the dict
        that the sending thread fills with ``bytes`` and ``send_s``."""
        sent = {"bytes": 0, "send_s": ""}
        if self.send_to:
            thread = threading.Thread(target=self._send, args=(round_num, weights, engine, sent), daemon=True)
            thread.start()
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        return sent

    def _send(self, round_num: int, weights: dict, engine, sent: dict) -> None:
        """Re-send only to those that did not answer OK, until ``peer_deadline``."""
        fl_ctx = engine.new_context()
        pending = set(self.send_to)
        deadline = time.monotonic() + self.peer_deadline
        size = num_bytes(weights)
        start = time.perf_counter()
        while pending and time.monotonic() < deadline:
            request = Shareable()
            request[C.KEY_ROUND] = round_num
            request[C.KEY_WEIGHTS] = weights
            timeout = max(1.0, min(self.send_timeout, deadline - time.monotonic()))
            try:
                replies = engine.send_aux_request(
                    targets=sorted(pending), topic=C.TOPIC_MODEL, request=request, timeout=timeout, fl_ctx=fl_ctx
                ) or {}
            except Exception as exc:  # noqa: BLE001 - a failed send is retried, never fatal
                self.log("warning", f"round {round_num}: sending failed ({type(exc).__name__}: {exc}); retrying")
                replies = {}
            for peer, reply in replies.items():
                if isinstance(reply, Shareable) and reply.get_return_code() == ReturnCode.OK:
                    pending.discard(peer)
                    sent["bytes"] += size
            if pending:
                time.sleep(1.0)
        if pending:
            self.log("warning", f"round {round_num}: could not deliver the model to {sorted(pending)}")
        else:
            sent["send_s"] = time.perf_counter() - start

    def wait_sent(self, timeout: float) -> None:
        """Wait for every send still under way, at most ``timeout`` s in all."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def wait_last_send(self, timeout: float) -> None:
        if self._threads:
            self._threads[-1].join(timeout=timeout)

    # ------------------------------------------------------------------ start
    def handshake(self, engine, fl_ctx: FLContext, ready_timeout: float, abort: Callable[[], bool]) -> list[str]:
        """Wait until every neighbour runs this job and is ready, at most ``ready_timeout`` s.

        Returns the neighbours that never answered (the run goes on without waiting for them);
        raises if none answered at all, since the site would only train alone.
        """
        neighbours = sorted(set(self.send_to) | set(self.receive_from))
        pending = set(neighbours)
        deadline = time.monotonic() + ready_timeout
        while pending and not abort():
            replies = engine.send_aux_request(
                targets=sorted(pending), topic=C.TOPIC_PING, request=Shareable(), timeout=3.0, fl_ctx=fl_ctx
            ) or {}
            for peer, reply in replies.items():
                if isinstance(reply, Shareable) and reply.get_return_code() == ReturnCode.OK and reply.get("ready"):
                    pending.discard(peer)
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if pending and pending == set(neighbours):
            raise RuntimeError(
                f"no neighbour ({sorted(pending)}) answered within ready_timeout={ready_timeout:g} s. "
                "Every site of a peer-to-peer job must run at the same time: in FLARE's simulator give "
                f"-t equal to the number of sites (e.g. nvflare simulator JOB -w WORKSPACE -t {len(neighbours) + 1}); "
                "in a deployment check that those sites are connected"
            )
        if pending:
            self.log("warning", f"neighbours {sorted(pending)} not ready after {ready_timeout:g} s: going on without waiting for them")
            for peer in pending & set(self.missed):
                self.missed[peer] = self.max_missed_rounds
        return sorted(pending)

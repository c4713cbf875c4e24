"""The simulated attackers' side channel: each shares its honestly trained model with the others.

Under partial knowledge (FedCAP's default) the attackers know their own honest updates: every
attacker trains honestly, then sends its trained model to every other attacker on the aux topic
``lightyear.collude`` (:data:`~lightyear.flare.constants.TOPIC_COLLUDE`; FLARE relays it whatever
the graph) and waits, for a bounded time, for theirs. The messages are hostile input like any
model message: a sender that is not a listed attacker is refused; the payload is bounded by the
model's size before it is decoded, then checked like a model
(:func:`~lightyear.p2p.wire.exchange.checked_model`); only the current and the next round are
kept, one message per sender and round (:class:`~lightyear.p2p.wire.buffer.PeerModelBuffer`).
A refused message is logged and its reason returned by :meth:`Collusion.gather`; nothing a
message holds can stop the site.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.shareable import Shareable, make_reply

from lightyear.flare import constants as C
from lightyear.p2p.wire import buffer as peer_buffer
from lightyear.p2p.wire.buffer import PeerModelBuffer
from lightyear.p2p.wire.exchange import Delivery, Rejected, checked_model
from lightyear.p2p.wire.payload import PayloadCodec


class Collusion:
    """One attacker's end of the side channel: ``colluders`` are the other attackers."""

    def __init__(
        self,
        site: str,
        attackers,
        rounds: int,
        max_abs_weight: float | None,
        log: Callable[[str, str], None],
        start_round: int = 0,
    ):
        self.site = site
        self.colluders = sorted(set(attackers) - {site})
        self.max_abs_weight = max_abs_weight
        self.log = log
        self.buffer = PeerModelBuffer()
        self.buffer.start(rounds, current=start_round)
        self.reference: dict | None = None  # None until the run's model is known: senders retry
        self.codec = PayloadCodec()
        self.secure = False
        self.send_timeout = 10.0

    def open(self, reference: dict, codec: PayloadCodec, secure: bool, send_timeout: float) -> None:
        """The run's model is known: check messages against ``reference`` and read them with ``codec``."""
        self.codec, self.secure, self.send_timeout = codec, bool(secure), float(send_timeout)
        self.reference = reference

    # ------------------------------------------------------------------ receiving
    def on_message(self, request: Shareable) -> Shareable:
        """Handle one collusion message; the reply only tells the sender whether to send it again."""
        sender = request.get_peer_prop(key=ReservedKey.IDENTITY_NAME, default=None)
        if sender not in self.colluders:
            self.log(
                "warning", f"refused a collusion message from {str(sender)[:80]!r}: not another attacker of this run"
            )
            return make_reply(ReturnCode.BAD_REQUEST_DATA)
        if self.reference is None:
            return make_reply(ReturnCode.SERVICE_UNAVAILABLE)
        weights, problems = checked_model(request, self.reference, self.codec, self.max_abs_weight)
        item = Rejected("; ".join(problems)) if problems else Delivery(weights)
        round_num = request.get(C.KEY_ROUND)
        status = self.buffer.put(round_num, sender, item)
        if status != peer_buffer.STORED:
            self.log("warning", f"collusion message from {sender} for round {str(round_num)[:40]!r} not kept: {status}")
        elif problems:
            self.log("warning", f"refused the collusion message of {sender} for round {round_num}: {item.reason}")
        return make_reply(ReturnCode.OK)

    def gather(
        self, round_num: int, timeout: float, abort: Callable[[], bool]
    ) -> tuple[dict[str, dict], dict[str, str]]:
        """(valid models, refused senders with the reason) of this round from the colluders, after
        waiting at most ``timeout`` s; the round is then closed (later messages are refused as late)."""
        self.buffer.wait_for(round_num, self.colluders, timeout, abort=abort)
        arrived = self.buffer.take(round_num)
        self.buffer.release(round_num)
        valid = {p: item.weights for p, item in arrived.items() if isinstance(item, Delivery)}
        refused = {p: item.reason for p, item in arrived.items() if isinstance(item, Rejected)}
        return valid, refused

    # ------------------------------------------------------------------ sending
    def share(self, round_num: int, weights: dict, engine, within: float) -> threading.Thread | None:
        """Send ``weights`` to every colluder in the background, re-sending to those that did not
        answer OK for at most ``within`` s (after that they have stopped waiting for it)."""
        if not self.colluders:
            return None
        payload = self.codec.encode(weights)
        thread = threading.Thread(target=self._send, args=(round_num, payload, engine, within), daemon=True)
        thread.start()
        return thread

    def _send(self, round_num: int, payload: dict, engine, within: float) -> None:
        fl_ctx = engine.new_context()
        pending = set(self.colluders)
        deadline = time.monotonic() + within
        while pending and time.monotonic() < deadline:
            request = Shareable()
            request[C.KEY_ROUND] = round_num
            request[C.KEY_WEIGHTS] = payload
            request[C.KEY_PAYLOAD] = self.codec.marker
            timeout = max(1.0, min(self.send_timeout, deadline - time.monotonic()))
            try:
                replies = (
                    engine.send_aux_request(
                        targets=sorted(pending),
                        topic=C.TOPIC_COLLUDE,
                        request=request,
                        timeout=timeout,
                        fl_ctx=fl_ctx,
                        secure=self.secure,
                    )
                    or {}
                )
            except Exception as exc:  # noqa: BLE001 - a failed send is retried, never fatal
                self.log(
                    "warning", f"round {round_num}: sending to the other attackers failed ({type(exc).__name__}: {exc})"
                )
                replies = {}
            for peer, reply in replies.items():
                if isinstance(reply, Shareable) and reply.get_return_code() in (
                    ReturnCode.OK,
                    ReturnCode.BAD_REQUEST_DATA,
                ):
                    pending.discard(peer)
            if pending:
                time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        if pending:
            self.log(
                "warning",
                f"round {round_num}: the other attackers {sorted(pending)} did not take this attacker's model",
            )

"""The simulated attackers' side channel: each shares its honestly trained model with the others.

Under partial knowledge (FedCAP's default) the attackers know their own honest updates: every
attacker trains honestly, then sends its trained model to every other attacker on the aux topic
``lightyear.collude`` (:data:`~lightyear.flare.constants.TOPIC_COLLUDE`; FLARE relays it whatever
the graph) and waits, for a bounded time, for theirs. The channel is a
:class:`~lightyear.p2p.wire.exchange.PeerExchange` of its own between the attackers, on that topic:
its messages are hostile input like any model message (a sender that is not another attacker is
refused; the payload is bounded by the model's size before it is decoded, then checked like a
model; only the current and the next round are kept, one message per sender and round), and its
sends are retried until the wait ends. A refused message is logged and its reason returned by
:meth:`Collusion.gather`; nothing a message holds can stop the site.
"""

from __future__ import annotations

from collections.abc import Callable

from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.shareable import Shareable, make_reply

from lightyear.flare import constants as C
from lightyear.p2p.wire.exchange import PeerExchange
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
        self.rounds, self.start_round = int(rounds), int(start_round)
        self.max_abs_weight = max_abs_weight
        self.log = log
        self.exchange: PeerExchange | None = None  # None until the run's model is known: senders retry

    def open(self, reference: dict, codec: PayloadCodec, secure: bool, send_timeout: float, wait: float) -> None:
        """The run's model is known: check messages against ``reference``, read them with ``codec``, and
        wait at most ``wait`` s a round for the colluders (sends are retried as long)."""
        self.exchange = PeerExchange(
            self.colluders,
            self.colluders,
            self.rounds,
            wait,
            send_timeout,
            self.rounds + 1,  # a colluder is waited for every round, however many it missed
            self.max_abs_weight,
            self.log,
            start_round=self.start_round,
            reference=reference,
            codec=codec,
            secure=secure,
            topic=C.TOPIC_COLLUDE,
        )

    def on_message(self, request: Shareable) -> Shareable:
        """Handle one collusion message; the reply only tells the sender whether to send it again."""
        if self.exchange is None:
            return make_reply(ReturnCode.SERVICE_UNAVAILABLE)
        return self.exchange.on_model(request)

    def gather(self, round_num: int, abort: Callable[[], bool]) -> tuple[dict[str, dict], dict[str, str]]:
        """(valid models, refused senders with the reason) of this round from the colluders, after
        waiting at most the channel's wait; the round is then closed (later messages are refused as late)."""
        inbox = self.exchange.collect(round_num, abort)
        self.exchange.release(round_num)
        for peer, reason in inbox.rejected.items():
            self.log("warning", f"round {round_num}: refused the collusion message of {peer}: {reason}")
        return inbox.valid, inbox.rejected

    def share(self, round_num: int, weights: dict, engine) -> None:
        """Send ``weights`` to every colluder in the background, re-sending to those that did not take
        it until the channel's wait ends (after that they have stopped waiting for it)."""
        if self.colluders:
            self.exchange.send(round_num, self.exchange.codec.encode(weights), engine)

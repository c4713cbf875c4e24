"""The simulated attackers' side channel: each shares its honestly trained model with the others.

A :class:`~lightyear.p2p.wire.exchange.PeerExchange` of its own on :data:`~lightyear.flare.constants.TOPIC_COLLUDE`,
so its messages get a model message's checks; a refused one is logged and returned, never fatal.
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
        """Take messages checked against ``reference``; wait (and retry sends) at most ``wait`` s a round."""
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
        """(valid models, refused senders with the reason) of this round; the round is then closed."""
        inbox = self.exchange.collect(round_num, abort)
        self.exchange.release(round_num)
        for peer, reason in inbox.rejected.items():
            self.log("warning", f"round {round_num}: refused the collusion message of {peer}: {reason}")
        return inbox.valid, inbox.rejected

    def share(self, round_num: int, weights: dict, engine) -> None:
        """Send ``weights`` to every colluder in the background, re-sending until the channel's wait ends."""
        if self.colluders:
            self.exchange.send(round_num, self.exchange.codec.encode(weights), engine)

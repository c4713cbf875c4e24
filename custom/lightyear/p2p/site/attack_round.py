"""An attacking peer's steps in one round: learn what its knowledge allows, craft, hand back the model to send.

Called by :class:`~lightyear.p2p.site.round.SiteRound` after the attacker trained honestly and
before it sends (see ``docs/attacks-p2p.md``):

1. attacks that use other updates (:data:`~lightyear.algorithms.attacks.peer.NEEDS_KNOWN`) share
   the honest model with the other attackers and wait for theirs
   (:class:`~lightyear.p2p.site.collusion.Collusion`); under full knowledge the attacker also
   waits for this round's models of its benign in-neighbours, which the exchange receives anyway
   (:meth:`~lightyear.p2p.site.exchange.PeerExchange.peek` leaves them for the round's
   aggregation). Both waits end at one deadline, :data:`WAIT_SHARE` of ``peer_deadline`` after the
   attacker finished training, so the benign receivers, who wait ``peer_deadline`` for it, still
   get its model in time;
2. with a compute slot held, the model to send is computed from flat vectors
   (:func:`~lightyear.algorithms.attacks.peer.attack_model`); the adaptive attack asks the site's
   rule for its acceptance test (``adaptive_acceptance`` of the LIGHTYEAR and BALANCE executors).

The site keeps aggregating on its honest model; only what it sends is crafted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from lightyear.algorithms.attacks.peer import NEEDS_KNOWN, attack_model, participants
from lightyear.algorithms.attacks.settings import AttackSpec
from lightyear.algorithms.attacks.updates import ADAPTIVE, FULL
from lightyear.algorithms.vectors import flatten, float_keys, unflatten
from lightyear.p2p.site.collusion import Collusion

WAIT_SHARE = 0.25
"""Share of ``peer_deadline`` an attacker waits at most, after its training, for the colluders'
models (and, under full knowledge, the benign in-neighbours') before it sends its own."""


@dataclass
class AttackInputs:
    """What the round gives the attack: the round-start and honestly trained models, this round's
    in-neighbours (``senders``), the engine to send with, the exchange, the site's rule, a context
    manager holding a compute slot, and ``abort()``."""

    round_num: int
    start: dict
    honest: dict
    senders: list
    engine: object
    exchange: object
    rule: object
    compute: Callable[[], AbstractContextManager]
    abort: Callable[[], bool]


class PeerAttack:
    """One attacking site's attack during one run."""

    def __init__(self, spec: AttackSpec, site: str, graph: dict, peer_deadline: float, collusion: Collusion, log: Callable[[str, str], None]):
        self.spec, self.site, self.collusion, self.log = spec, site, collusion, log
        self.n, self.m = participants(graph, site, spec.attackers)
        self.wait = WAIT_SHARE * float(peer_deadline)

    def outgoing(self, inputs: AttackInputs) -> tuple[dict, dict]:
        """(the model to send this round, the attack's record fields)."""
        spec, r = self.spec, inputs.round_num
        fields = {"attack": spec.kind, "attack_knowledge": spec.knowledge, "attack_n": self.n, "attack_m": self.m}
        colluders, refused, benign = {}, {}, {}
        began = time.monotonic()
        if spec.kind in NEEDS_KNOWN:
            self.collusion.share(r, inputs.honest, inputs.engine, self.wait)
            colluders, refused = self.collusion.gather(r, self.wait, inputs.abort)
            if spec.knowledge == FULL:
                benign_senders = [s for s in inputs.senders if s not in spec.attackers]
                left = max(0.0, began + self.wait - time.monotonic())
                benign = inputs.exchange.peek(r, benign_senders, left, inputs.abort)
        fields.update({"attack_colluders": sorted(colluders), "attack_refused": sorted(refused), "attack_benign": sorted(benign)})
        fields["attack_wait_s"] = time.monotonic() - began
        missing = sorted(set(self.collusion.colluders) - set(colluders) - set(refused)) if spec.kind in NEEDS_KNOWN else []
        if missing:
            self.log("warning", f"round {r}: no model from the other attackers {missing} within {self.wait:g} s; crafting without them")
        with inputs.compute():
            weights, made = self._craft(inputs, colluders, benign)
        fields.update(made)
        self.log("info", f"round {r}: {spec.kind} attack ({spec.knowledge} knowledge, {made['attack_known']} known updates) sends a crafted model")
        return weights, fields

    def _craft(self, inputs: AttackInputs, colluders: dict, benign: dict) -> tuple[dict, dict]:
        spec, honest = self.spec, inputs.honest
        keys = float_keys(honest)
        predict = None
        if spec.kind == ADAPTIVE:
            accepts = inputs.rule.adaptive_acceptance(inputs.round_num, honest, spec.param("margin"))

            def predict(vector):
                return accepts(unflatten(vector, honest, keys))

        vector, fields = attack_model(
            spec.kind, spec.knowledge, flatten(inputs.start, keys), flatten(honest, keys),
            {p: flatten(w, keys) for p, w in colluders.items()}, {p: flatten(w, keys) for p, w in benign.items()},
            self.n, self.m, spec.params, predict,
        )
        return unflatten(vector, honest, keys), fields

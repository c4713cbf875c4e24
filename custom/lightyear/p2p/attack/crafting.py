"""An attacking peer's round: learn what its knowledge allows, craft, return the model to send (docs/attacks-p2p.md).

Attacks that use other updates swap honest models with the other attackers; under full knowledge they, and
reparametrisations, also peek at the benign in-neighbours' models. Both waits end :data:`WAIT_SHARE` of
``peer_deadline`` after training, so the receivers get the model in time; crafting holds a compute slot.
"""

from __future__ import annotations

import time

from lightyear.algorithms.attacks import catalogue
from lightyear.algorithms.attacks.declaration import attack_rng
from lightyear.algorithms.attacks.peer import attack_model, participants
from lightyear.algorithms.attacks.reparametrise import DEFAULT_FACTOR, reparametrised
from lightyear.algorithms.attacks.settings import REPARAMETRISATIONS, AttackSpec
from lightyear.algorithms.attacks.updates import ADAPTIVE, FULL
from lightyear.algorithms.vectors import flatten, float_keys, unflatten
from lightyear.p2p.attack.adaptive import adaptive_models
from lightyear.p2p.attack.collusion import Collusion
from lightyear.p2p.site.sending import PerReceiver, Sending, SendingRun

WAIT_SHARE = 0.25
"""Share of ``peer_deadline`` an attacker waits at most, after its training, for other models before it sends."""


class PeerAttack:
    """One attacking site's attack during one run."""

    def __init__(self, spec: AttackSpec, run: SendingRun, collusion: Collusion, seed: int = 0):
        """``seed``: the job's, from which its draws are made."""
        self.spec, self.run, self.site, self.collusion, self.log = spec, run, run.site, collusion, run.log
        self.graph, self.seed = run.graph, int(seed)
        self.wait = WAIT_SHARE * float(run.peer_deadline)
        self.groups = None

    def outgoing(self, inputs: Sending) -> tuple[dict, dict]:
        """(the model to send this round, or a PerReceiver of them; the attack's record fields)."""
        spec, r = self.spec, inputs.round_num
        counts = {to: participants(self.graph, to, spec.attackers) for to in inputs.receivers or [self.site]}  # (n, m)
        seen = [c for r, c in counts.items() if r not in spec.attackers] or list(counts.values())  # benign ones' view
        fields = {
            "attack": spec.kind,
            "attack_knowledge": spec.knowledge,
            "attack_n": _joined(n for n, _ in seen),
            "attack_m": _joined(m for _, m in seen),
        }
        colluders, refused, benign = {}, {}, {}
        began = time.monotonic()
        needs_known = catalogue.attack(spec.kind).needs_known
        if needs_known:
            self.collusion.share(r, inputs.honest, inputs.engine)
            colluders, refused = self.collusion.gather(r, inputs.abort)
        if spec.knowledge == FULL and (needs_known or spec.kind in REPARAMETRISATIONS):
            benign_senders = [s for s in inputs.senders if s not in spec.attackers]
            left = max(0.0, began + self.wait - time.monotonic())
            benign = inputs.peek(benign_senders, left, inputs.abort)
        fields.update(attack_colluders=sorted(colluders), attack_refused=sorted(refused), attack_benign=sorted(benign))
        fields["attack_wait_s"] = time.monotonic() - began
        missing = sorted(set(self.collusion.colluders) - set(colluders) - set(refused)) if needs_known else []
        if missing:
            self.log(
                "warning",
                f"round {r}: no model from the other attackers {missing} within {self.wait:g} s; crafting without them",
            )
        with inputs.compute():
            if spec.kind in REPARAMETRISATIONS:
                weights, made = self._reparametrise(inputs, benign)
            elif spec.kind == ADAPTIVE:
                until = time.monotonic() + self.wait  # the search ends in time for the receivers' deadline
                weights, made = adaptive_models(
                    spec,
                    self.site,
                    inputs,
                    self.run,
                    colluders,
                    benign,
                    counts,
                    self._groups(),
                    self.seed,
                    expired=lambda: time.monotonic() > until,
                )
            else:
                weights, made = self._craft_each(inputs, colluders, benign, counts)
        fields.update(made)
        self.log(
            "info",
            f"round {r}: {spec.kind} attack ({spec.knowledge} knowledge, {made['attack_known']} known models) "
            "sends a crafted model",
        )
        return weights, fields

    def _craft_each(self, inputs: Sending, colluders: dict, benign: dict, counts: dict) -> tuple[dict, dict]:
        """One crafted model per distinct count (n, m) its rule uses among the benign receivers."""
        counted = catalogue.attack(self.spec.kind).counts

        def uses(n: int, m: int) -> tuple[int, int]:
            return (n if "n" in counted else 0, m if "m" in counted else 0)

        benign_counts = {r: c for r, c in counts.items() if r not in self.spec.attackers} or counts
        key = {r: uses(*c) for r, c in benign_counts.items()}
        made: dict[tuple[int, int], tuple[dict, dict]] = {}
        for receiver in sorted(benign_counts):
            if key[receiver] not in made:
                made[key[receiver]] = self._craft(inputs, colluders, benign, *benign_counts[receiver])
        if len(made) == 1:
            return next(iter(made.values()))
        first = made[key[sorted(benign_counts)[0]]][0]
        fields = {k: _joined(str(f[k]) for _, f in made.values()) for k in next(iter(made.values()))[1]}
        return PerReceiver({r: made[key[r]][0] if r in key else first for r in counts}), fields

    def _groups(self) -> list:
        """The network's unit groups, asked of the run once."""
        if self.groups is None:
            self.groups = self.run.symmetries()
        return self.groups

    def _reparametrise(self, inputs: Sending, benign: dict) -> tuple[dict, dict]:
        """Each receiver's transformed model."""
        spec = self.spec
        factor, per_receiver = spec.param("factor", DEFAULT_FACTOR), spec.param("per_receiver", True)
        full = spec.knowledge == FULL
        out, fields, from_own, shared = PerReceiver(), {}, [], None
        for stream, receiver in enumerate(inputs.receivers):
            base = benign.get(receiver) if full else None
            if base is None:
                from_own += [receiver] if full else []
                if shared is not None:  # without per_receiver: one draw of the honest model for all
                    out[receiver] = shared
                    continue
            attacker = spec.attackers.index(self.site)
            rng = attack_rng(self.seed, inputs.round_num, attacker, stream if per_receiver else 0)
            out[receiver], fields = reparametrised(
                inputs.honest if base is None else base, self._groups(), spec.kind, factor, rng
            )
            if base is None and not per_receiver:
                shared = out[receiver]
        fields = fields or {"attack_transform": spec.kind, "attack_factor": float(factor), "attack_units": 0}
        fields.update({"attack_from_own": from_own, "attack_known": len(benign) if full else 0})
        return out, fields

    def _craft(self, inputs: Sending, colluders: dict, benign: dict, n: int, m: int) -> tuple[dict, dict]:
        spec, honest = self.spec, inputs.honest
        keys = float_keys(honest)
        vector, fields = attack_model(
            spec.kind,
            spec.knowledge,
            flatten(inputs.start, keys),
            flatten(honest, keys),
            {p: flatten(w, keys) for p, w in colluders.items()},
            {p: flatten(w, keys) for p, w in benign.items()},
            n,
            m,
            spec.params,
            rng=attack_rng(self.seed, inputs.round_num, spec.attackers.index(self.site))
            if catalogue.attack(spec.kind).needs_rng
            else None,
        )
        return unflatten(vector, honest, keys), fields


def _joined(values) -> str:
    """The distinct values, sorted and joined by ';' (one value: that value)."""
    return ";".join(sorted({str(v) for v in values}, key=lambda v: (len(v), v)))

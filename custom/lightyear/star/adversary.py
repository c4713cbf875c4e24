"""The star topology's simulated adversary: colluding attackers, played by the server, that an attack job names
(``adversary_id`` of :class:`~lightyear.star.controller.StarController`). Each round, before any check, it replaces
each attacker's honest result by a crafted one in the attacker's form
(:func:`~lightyear.algorithms.attacks.colluding.craft_round`), so it passes every check a real one would. An update
is a result minus the model that site was sent; ``partial`` knowledge pools the attackers' updates, ``full`` adds
the benign ones. The adaptive attack needs a rule declaring ``ADAPTIVE`` and ``adaptive_target(sent, keys)``.
"""

from __future__ import annotations

import numpy as np
from nvflare.apis.dxo import DataKind
from nvflare.apis.fl_component import FLComponent
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable

from lightyear.algorithms.attacks.colluding import CraftedRound, check_spec, craft_round
from lightyear.algorithms.attacks.declaration import attack_rng
from lightyear.algorithms.attacks.reparametrise import DEFAULT_FACTOR, reparametrised
from lightyear.algorithms.attacks.settings import REPARAMETRISATIONS, AttackSpec
from lightyear.algorithms.attacks.updates import ADAPTIVE, FULL
from lightyear.algorithms.vectors import float_keys
from lightyear.checks import integer, mapping
from lightyear.star.messages import read_result, result_data
from lightyear.star.results import result_model, valid_num_samples

ADVERSARY_FILE = "adversary.jsonl"
"""One line per round in the server's run folder: what the adversary crafted (or why not)."""


def update_vector(model: dict, sent: dict, keys: list[str]) -> np.ndarray:
    """model - sent over the floating entries ``keys`` (sorted), as one float64 vector."""
    return np.concatenate(
        [(np.asarray(model[k], dtype=np.float64) - np.asarray(sent[k], dtype=np.float64)).ravel() for k in keys]
    )


def crafted_data(update: np.ndarray, original: dict, sent: dict, keys: list[str], as_diff: bool) -> dict:
    """The crafted result's data in the attacker's form: ``update`` (``as_diff``) or sent + update, each entry in the
    attacker's float dtype (else the sent one's); other entries are the attacker's. An overflow is inf: refused."""
    out = dict(original)
    start = 0
    for key in keys:
        ref = np.asarray(sent[key])
        part = update[start : start + ref.size].reshape(ref.shape)
        start += ref.size
        value = part if as_diff else ref.astype(np.float64) + part
        own = np.asarray(original[key])
        dtype = own.dtype if np.issubdtype(own.dtype, np.floating) else ref.dtype
        with np.errstate(over="ignore", invalid="ignore"):
            out[key] = value.astype(dtype)
    return out


def describe(record: dict) -> str:
    """One log line of a round's record."""
    if "failed" in record:
        return (
            f"round {record['round']}: the simulated adversary failed ({record['failed']}); dropped {record['dropped']}"
        )
    if not record["crafted"]:
        return f"round {record['round']}: no attacker sent a usable result; nothing crafted"
    settings = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in record["settings"].items())
    return (
        f"round {record['round']}: {record['kind']} ({record['knowledge']} knowledge of {record['known']}) "
        f"crafted for {record['crafted']} of {record['participants']} participants"
        + (f"; {settings}" if settings else "")
    )


class SimulatedAdversary(FLComponent):
    def __init__(
        self,
        kind: str,
        knowledge: str = "partial",
        attackers=(),
        params: dict | None = None,
        seed: int = 0,
        model: str | None = None,
        model_args: dict | None = None,
    ):
        """Args:
        kind: sf, mr, lie, minmax, minsum, ipm, adaptive, rescale, permute or rescale_permute (lf is the executors').
        attackers: the attacking sites' names.
        knowledge: ``partial`` (the attackers' updates) or ``full`` (also the benign ones; a reparametrisation: the
            model sent, which the attacker transforms).
        params: the attack's parameters (``attack_<name>`` job settings); the rest keep their defaults.
        seed: the job's seed; with the site and round it seeds a reparametrisation and a ``needs_rng`` attack.
        model, model_args: the job's network, whose symmetries a reparametrisation uses (required for those only)."""
        super().__init__()
        if params is not None:
            mapping("params", params, note="of attack parameters")
        self.spec = check_spec(AttackSpec(kind, knowledge, attackers, dict(params or {})))
        self.seed = integer("seed", seed)
        if self.spec.kind in REPARAMETRISATIONS and not isinstance(model, str):
            raise ValueError(
                f"the {self.spec.kind} attack transforms the job's network: "
                "give the adversary model (the job's model name)"
            )
        if model_args is not None:
            mapping("model_args", model_args, note="of the network's settings")
        self.model, self.model_args = model, dict(model_args or {})
        self.symmetries: list | None = None  # the network's, found at the first reparametrisation
        self.rule = None  # the job's aggregator, when the attack aims at it

    @property
    def attackers(self) -> tuple:
        return self.spec.attackers

    def bind(self, aggregator) -> None:
        """Take the job's rule; a ValueError if the adaptive attack cannot aim at it (no ``ADAPTIVE`` declared)."""
        if self.spec.kind != ADAPTIVE:
            return
        declared = getattr(aggregator, "ADAPTIVE", None)
        if declared is None or not hasattr(aggregator, "adaptive_target"):
            raise ValueError(
                f"the adaptive attack in the star topology aims at a rule that declares one, and this job's rule "
                f"{type(aggregator).__name__} declares none; use another attack or a rule with an adaptive attack"
            )
        declared.check(self.spec, type(aggregator).__name__)
        self.rule = aggregator

    def target(self, sent: dict[str, dict], keys: list[str]):
        """What the adaptive attack knows of its rule this round (the rule's ``adaptive_target``)."""
        return None if self.rule is None else self.rule.adaptive_target(sent, keys)

    def rewrite(
        self,
        results: dict[str, Shareable],
        sent: dict[str, dict],
        reference: dict,
        round_num: int,
        max_abs: float | None,
    ) -> tuple[dict, dict]:
        """(``results`` (site -> raw OK result) with every attacker's crafted, the round's record); ``sent``: each
        site's model sent, ``reference``: the global model. Errors propagate (the controller drops the attackers')."""
        keys = float_keys(reference)
        usable, honest, models = {}, {}, {}
        for site, result in results.items():
            model, n, problems = result_model(result, sent[site], reference, max_abs)
            if not problems and valid_num_samples(n):
                usable[site], models[site] = n, model
                honest[site] = update_vector(model, sent[site], keys)
        if self.spec.kind in REPARAMETRISATIONS:
            crafted = self.reparametrised_round(models, sent, reference, round_num, keys)
        else:
            target = self.target({s: sent[s] for s in honest}, keys)
            crafted = craft_round(self.spec, honest, target, seed=self.seed, round_num=round_num)
        out = dict(results)
        for site, update in crafted.updates.items():
            unpacked = read_result(results[site])
            data = crafted_data(update, unpacked.data, sent[site], keys, unpacked.kind == DataKind.WEIGHT_DIFF)
            out[site] = result_data(data, usable[site], round_num, unpacked.kind)
        return out, self.record(round_num, crafted)

    def reparametrised_round(
        self, models: dict, sent: dict, reference: dict, round_num: int, keys: list[str]
    ) -> CraftedRound:
        """Each attacker's update: a reparametrisation of its honest model (partial) or of the model it was sent
        (full), minus what it was sent; factors and permutations drawn from (seed, attacker, round)."""
        from lightyear.models import model_symmetries  # torch: only for these attacks

        if self.symmetries is None:
            self.symmetries = model_symmetries(self.model, reference, self.model_args)
        attackers = sorted(s for s in models if self.spec.is_attacker(s))
        updates, settings, factor = {}, {}, self.spec.param("factor", DEFAULT_FACTOR)
        for site in attackers:
            base = sent[site] if self.spec.knowledge == FULL else models[site]
            rng = attack_rng(self.seed, round_num, self.spec.attackers.index(site))
            model, settings = reparametrised(base, self.symmetries, self.spec.kind, factor, rng)
            updates[site] = update_vector(model, sent[site], keys)
        known = attackers if self.spec.knowledge != FULL else []
        return CraftedRound(updates, settings, known, len(models))

    def _head(self, round_num: int) -> dict:
        return {"round": int(round_num), "kind": self.spec.kind, "knowledge": self.spec.knowledge}

    def record(self, round_num: int, crafted: CraftedRound) -> dict:
        """The round's record: the attack, who was crafted for, who was known, the settings in force."""
        absent = sorted(set(self.attackers) - set(crafted.updates))
        counts = {"participants": crafted.n_participants, "crafted": crafted.attackers, "absent": absent}
        return {**self._head(round_num), **counts, "known": list(crafted.known), "settings": dict(crafted.settings)}

    def failure(self, round_num: int, exc: BaseException, dropped: list[str]) -> dict:
        """The record of a round whose crafting raised ``exc``: the attackers' results ``dropped``."""
        return {**self._head(round_num), "failed": f"{type(exc).__name__}: {exc}", "dropped": sorted(dropped)}

    def log_round(self, record: dict, fl_ctx: FLContext) -> None:
        (self.log_error if "failed" in record else self.log_info)(fl_ctx, describe(record))


def bind_adversary(component, adversary_id: str, aggregator) -> SimulatedAdversary:
    """``component`` (the one ``adversary_id`` names) bound to the job's rule; a ValueError names what is wrong."""
    if not isinstance(component, SimulatedAdversary):
        found = "no component" if component is None else f"a {type(component).__name__}"
        raise ValueError(
            f"adversary_id {adversary_id!r} names {found}, not a SimulatedAdversary: "
            "add the component to the server config or drop adversary_id"
        )
    try:
        component.bind(aggregator)
    except ValueError as exc:
        raise ValueError(f"adversary {adversary_id!r}: {exc}") from None
    return component

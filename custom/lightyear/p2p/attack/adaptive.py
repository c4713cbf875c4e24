"""The adaptive attack of a peer-to-peer attacker: per receiver, the most harmful model it is predicted to adopt.

The attacker runs the receiver's defence (``SendingRun.oracle``) on its own validation data and picks the candidate
(``reverse``, ``rescale`` or ``permute``) that harms most after averaging (``docs/attacks-p2p.md``). Receivers no
accepted candidate harms, and the other attackers, get the honest model.
"""

from __future__ import annotations

import numpy as np

from lightyear.algorithms.attacks.adaptive import harmful_direction, most_harmful
from lightyear.algorithms.attacks.reparametrise import PERMUTE, RESCALE, reparametrised
from lightyear.algorithms.attacks.updates import FULL
from lightyear.algorithms.metrics import headline
from lightyear.algorithms.vectors import ZERO_NORM, flatten, float_keys, unflatten
from lightyear.p2p.site.sending import PerReceiver, Sending, SendingRun

MAX_RESCALE = 999.0
"""The largest s of the rescale family: units scaled by up to 1000 or 1/1000."""
MAX_EVALUATIONS = 4
"""Predictions (forward passes) per family and receiver unless ``attack_max_evaluations`` says otherwise."""


def adaptive_models(
    spec,
    site: str,
    inputs: Sending,
    run: SendingRun,
    colluders: dict,
    benign: dict,
    counts: dict,
    groups: list,
    seed: int,
    expired=None,
) -> tuple[dict, dict]:
    """(a PerReceiver of the models to send, record fields); ``expired()``: True once the best so far must be sent."""
    honest, evaluate = inputs.honest, run.evaluate
    full = spec.knowledge == FULL
    keys = float_keys(honest)
    own_update = flatten(honest, keys) - flatten(inputs.start, keys)
    out, found, evaluations, harms, chosen = PerReceiver(), [], 0, [], []
    shared = None
    for stream, receiver in enumerate(inputs.receivers):
        if receiver in spec.attackers or (full and receiver not in benign):  # an attacker, or no model to predict with
            out[receiver] = honest
            continue
        if not full and shared is not None:  # partial knowledge: the one model crafted for the stand-in
            out[receiver] = shared
            found += [receiver] if shared is not honest else []
            continue
        model = benign[receiver] if full else honest
        others = {p: w for p, w in benign.items() if p != receiver} if full else dict(colluders)
        predict = run.oracle(inputs.round_num, model, others, counts[receiver][1])
        before = evaluate("val", model)

        def harm(candidate, predict=predict, before=before):
            accepted, adopted = predict(candidate)
            after = evaluate("val", adopted)
            return accepted, (headline(before) - headline(after), after["loss"] - before["loss"])

        rng_seed = [seed & 0xFFFFFFFF, inputs.round_num, spec.attackers.index(site), stream]
        families = candidate_families(model, others, own_update, keys, groups, spec.param("max_step"), rng_seed)
        crafted, fields = most_harmful(
            families, harm, max_evaluations=spec.params.get("max_evaluations", MAX_EVALUATIONS), expired=expired
        )
        evaluations += fields["attack_evaluations"]
        out[receiver] = honest if crafted is None else crafted
        if crafted is not None:
            found.append(receiver)
            harms.append(fields["attack_harm"])
            chosen.append(fields["attack_family"])
        if not full:
            shared = out[receiver]
    fields = {
        "attack_harmed": found,
        "attack_harm": float(np.mean(harms)) if harms else 0.0,
        "attack_family": ";".join(sorted(set(chosen))),
        "attack_evaluations": evaluations,
        "attack_known": len(benign) + len(colluders),
    }
    return out, fields


def candidate_families(
    model: dict, others: dict, own_update: np.ndarray, keys: list[str], groups: list, max_step, rng_seed: list
) -> dict:
    """name -> (make(strength), max strength) for :func:`~lightyear.algorithms.attacks.adaptive.most_harmful`."""
    base = flatten(model, keys)
    updates = [flatten(w, keys) - base for w in others.values()]
    direction = harmful_direction(own_update, updates or None)
    norm = float(np.linalg.norm(base))
    top = max_step if max_step is not None else 4.0 * (norm if norm > ZERO_NORM else 1.0)
    families = {}
    if float(np.linalg.norm(direction)) > ZERO_NORM:
        families["reverse"] = (lambda s: unflatten(base + s * direction, model, keys), float(top))
    if any(g.scalable for g in groups):
        families["rescale"] = (
            lambda s: reparametrised(model, groups, RESCALE, 1.0 + s, np.random.default_rng(rng_seed))[0],
            MAX_RESCALE,
        )
    if groups:
        families["permute"] = (
            lambda s: reparametrised(model, groups, PERMUTE, 1.0, np.random.default_rng(rng_seed))[0],
            None,
        )
    return families

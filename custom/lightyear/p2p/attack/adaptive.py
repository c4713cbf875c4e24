"""The adaptive attack of a peer-to-peer attacker: per receiver, the most harmful model the receiver is
predicted to adopt.

The attacker runs the receiver's defence itself (the method's oracle, ``SendingRun.oracle``:
LIGHTYEAR's decision, validated or as in the paper, or BALANCE's radius and mean) on its own
validation data, and looks for the candidate that does the most harm *after averaging*: the drop
of the adopted model's accuracy (Dice) below the receiver's own, then the rise of its loss, both
measured on the attacker's data. The candidates (:func:`~lightyear.algorithms.attacks.adaptive.most_harmful`):

* ``reverse``: the receiver's model plus a step s along the unit reverse of the progress the
  receiver would make (the mean of the other models it receives minus its own; the attacker's own
  honest update when it knows none), s up to ``max_step`` (default: 4 times the receiver's norm);
* ``rescale``: the receiver's model with every scalable unit scaled by 1 + s or its inverse
  (``lightyear.algorithms.attacks.reparametrise``), s up to 999: a model that predicts exactly what
  the receiver's predicts, harmless to the agreement score and harmful to an average;
* ``permute``: the receiver's model with its units permuted, one candidate.

Knowledge: under ``full`` knowledge the attacker holds each benign receiver's model of the round
(it is an in-neighbour's model) and the other benign models it received, and crafts per receiver;
under ``partial`` knowledge its honest model stands in for every receiver's and the colluders'
honest models for the rest, and every receiver gets the one crafted model. A receiver for which
no accepted candidate does harm gets the attacker's honest model. The other attackers, whose
aggregation is not attacked, get the honest model too.
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
"""Predictions per family and receiver unless ``attack_max_evaluations`` says otherwise: each costs
one or more forward passes over the attacker's validation set (against the validated aggregation the
crafted model and up to |S| + 2 aggregates), and a round's crafting must end well within the receivers'
deadline."""


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
    """(a PerReceiver of the models to send, record fields) of the adaptive attack (module docstring).

    ``counts``: receiver -> (n, m) (:func:`~lightyear.algorithms.attacks.peer.participants`);
    ``groups``: the network's unit groups; ``benign``: the benign in-neighbours' models of the round
    (full knowledge; empty under partial); ``expired()``: True once the attacker must stop searching
    and send (the receivers still getting the best found so far, or the honest model)."""
    honest, evaluate = inputs.honest, run.evaluate
    full = spec.knowledge == FULL
    keys = float_keys(honest)
    own_update = flatten(honest, keys) - flatten(inputs.start, keys)
    out, found, evaluations, harms, chosen = PerReceiver(), [], 0, [], []
    shared = None
    for stream, receiver in enumerate(inputs.receivers):
        if receiver in spec.attackers:
            out[receiver] = honest
            continue
        if full and receiver not in benign:
            out[receiver] = honest  # its model did not arrive in time: nothing to predict with
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

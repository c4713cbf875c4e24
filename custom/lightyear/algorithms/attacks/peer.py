"""An attacking peer's update arithmetic in the peer-to-peer topology, on flat vectors (pure NumPy).

In the peer-to-peer topology every site holds its own model, so an attacker measures every
update against its own round-start model ``start``: its honest update is ``own - start``, a
fellow attacker's honestly trained model ``m`` counts as the update ``m - start``, and so does a
benign in-neighbour's model under full knowledge. What the attacker sends is ``start + crafted``
(:func:`crafted_update` for the rules of :mod:`lightyear.algorithms.attacks.updates`; for the
adaptive attack, :func:`adaptive_step` moves the honest model instead).

How many sites a receiver aggregates over (``n`` of LIE, MR and IPM) and how many of them attack
(``m``) follow from the graph, receiver by receiver: :func:`participants`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from lightyear.algorithms.attacks import updates
from lightyear.algorithms.attacks.adaptive import harmful_direction, largest_accepted_step
from lightyear.algorithms.attacks.settings import ADAPTIVE_DEFAULTS
from lightyear.algorithms.attacks.updates import FULL, IPM, KNOWLEDGE, LIE, MINMAX, MINSUM, MR
from lightyear.algorithms.vectors import ZERO_NORM, as_matrix

NEEDS_KNOWN = (LIE, MINMAX, MINSUM, IPM, updates.ADAPTIVE)
"""Attacks that use updates other than the attacker's own: the attackers collude for them."""


def participants(graph: Mapping[str, Sequence[str]], receiver: str, attackers: Sequence[str]) -> tuple[int, int]:
    """(n, m) as ``receiver`` sees a round: n = the sites it aggregates over (its in-degree + 1, its
    own model included), at least 2; m = the attackers among the senders it hears (its
    in-neighbours), at least 1 (the attacker asking is one) and capped at n - 1 (a receiver is a
    benign site in the attack's model, and LIE's z_max needs m < n).

    In a full mesh of N sites n = N and m = the attackers. On a sparse graph a receiver that hears
    one attacker of many gets m = 1, whatever the job's attacker count.
    """
    senders = [s for s, outs in graph.items() if s != receiver and receiver in outs]
    n = max(2, len(senders) + 1)
    heard = sum(1 for s in senders if s in attackers)
    return n, max(1, min(heard, n - 1))


def attack_model(kind: str, knowledge: str, start, honest, colluders: Mapping[str, np.ndarray], benign: Mapping[str, np.ndarray],
                 n: int, m: int, params: dict, predict: Callable[[np.ndarray], tuple[bool, float]] | None = None) -> tuple[np.ndarray, dict]:
    """(the model an attacker sends, as a vector; record fields), from flat vectors.

    ``start``: the attacker's round-start model; ``honest``: its honestly trained model;
    ``colluders``: the other attackers' honestly trained models that reached it (partial and
    full knowledge); ``benign``: the benign in-neighbours' models of the round (full knowledge;
    empty under partial). Every update is a model minus ``start``: the attacker's own is
    ``honest - start``, and the pooled attackers' updates are it and the colluders'.

    Fixed-rule attacks send ``start + crafted`` (:func:`crafted_update`). The adaptive attack
    sends ``honest + alpha * direction`` (:func:`adaptive_step`, ``predict`` required), the
    direction from :func:`~lightyear.algorithms.attacks.adaptive.harmful_direction` over the
    benign updates when any are known, else over the pooled attackers' updates. Fields add
    ``attack_known``, the number of updates the attack was computed from.
    """
    start = np.asarray(start, dtype=np.float64)
    honest = np.asarray(honest, dtype=np.float64)
    own = honest - start
    pooled = [own] + [np.asarray(colluders[p], dtype=np.float64) - start for p in sorted(colluders)]
    known_benign = [np.asarray(benign[p], dtype=np.float64) - start for p in sorted(benign)]
    if kind == updates.ADAPTIVE:
        if predict is None:
            raise ValueError("the adaptive attack needs predict(model) -> (accepted, score), the defence's acceptance rule")
        chosen = {name: params.get(name, ADAPTIVE_DEFAULTS[name]) for name in ADAPTIVE_DEFAULTS}
        direction = harmful_direction(own, known_benign or pooled, chosen["direction"])
        model, fields = adaptive_step(honest, direction, predict, chosen["max_step"], chosen["tol"], chosen["max_evaluations"])
    else:
        crafted, fields = crafted_update(kind, knowledge, own, pooled, known_benign, n, m, params)
        model = start + crafted
    fields["attack_known"] = len(pooled) + len(known_benign)
    return model, fields


def crafted_update(kind: str, knowledge: str, own_update: np.ndarray, pooled: Sequence[np.ndarray], benign: Sequence[np.ndarray],
                   n: int, m: int, params: dict) -> tuple[np.ndarray, dict]:
    """(the update an attacker sends, the record fields of how it was made) for the fixed-rule attacks.

    ``pooled``: the attackers' honest updates (the own one included); ``benign``: the benign
    updates known under full knowledge. The rules see ``pooled + benign`` (FedCAP's knowledge
    levels, :mod:`lightyear.algorithms.attacks.updates`), except IPM under full knowledge, which
    negates the mean of ``benign`` alone (Xie et al.'s benign mean) when any benign update is
    known. Fields: ``attack_gamma`` (Min-Max / Min-Sum), ``attack_z`` (LIE), ``attack_scale``
    (MR), ``attack_epsilon`` (IPM), and the norms of the honest and crafted updates.
    """
    if knowledge not in KNOWLEDGE:
        raise ValueError(f"unknown knowledge {knowledge!r}; choose one of {', '.join(KNOWLEDGE)}")
    known = list(pooled) + list(benign)
    fields: dict = {}
    if kind == IPM and knowledge == FULL and len(benign):
        known = list(benign)
    if kind in (MINMAX, MINSUM):
        search = updates.min_max if kind == MINMAX else updates.min_sum
        crafted, fields["attack_gamma"] = search(as_matrix(known), **params)
    else:
        crafted = updates.craft_update(kind, own_update, known, n, m, **params)
        if kind == LIE:
            fields["attack_z"] = params["z"] if "z" in params else updates.lie_z_max(n, m)
        elif kind == MR:
            fields["attack_scale"] = params.get("scale", n)
        elif kind == IPM:
            fields["attack_epsilon"] = params.get("epsilon", n)
    fields["attack_honest_norm"] = float(np.linalg.norm(own_update))
    fields["attack_norm"] = float(np.linalg.norm(crafted))
    return crafted, fields


def adaptive_step(honest: np.ndarray, direction: np.ndarray, predict: Callable[[np.ndarray], tuple[bool, float]],
                  max_step: float | None = None, tol: float | None = None, max_evaluations: int = 16) -> tuple[np.ndarray, dict]:
    """(honest + alpha * direction, record fields): the adaptive attack's model.

    ``predict(model) -> (accepted, score)`` is the defence's acceptance rule as the attacker can
    run it (for LIGHTYEAR: the agreement score against the attacker's own honest model on its own
    validation set, accepted when >= tau + margin). alpha is the largest step
    :func:`~lightyear.algorithms.attacks.adaptive.largest_accepted_step` finds accepted, the honest
    model (alpha = 0) tested first; ``direction`` is a unit vector
    (:func:`~lightyear.algorithms.attacks.adaptive.harmful_direction`), so alpha is the L2
    distance from the honest model. Defaults: ``max_step`` = ||honest|| (a step the size of the
    whole model; 1 for a zero model), ``tol`` = max_step / 1024.

    Fields: ``attack_alpha``, ``attack_score`` (the predicted score of the model sent; "" when
    none was computed) and ``attack_evaluations`` (calls of ``predict``, each typically a forward
    pass over the validation set). A zero direction costs nothing and sends the honest model.
    """
    honest = np.asarray(honest, dtype=np.float64)
    direction = np.asarray(direction, dtype=np.float64)
    fields = {"attack_alpha": 0.0, "attack_score": "", "attack_evaluations": 0}
    if float(np.linalg.norm(direction)) <= ZERO_NORM:
        return honest.copy(), fields
    if max_step is None:
        norm = float(np.linalg.norm(honest))
        max_step = norm if norm > ZERO_NORM else 1.0
    tol = max_step / 1024.0 if tol is None else tol
    scores: dict[float, float] = {}

    def accepts(alpha: float) -> bool:
        fields["attack_evaluations"] += 1
        accepted, scores[alpha] = predict(honest + alpha * direction)
        return bool(accepted)

    alpha = largest_accepted_step(accepts, max_step, tol, max_evaluations=max_evaluations)
    fields["attack_alpha"] = alpha
    fields["attack_score"] = scores.get(alpha, "")
    return honest + alpha * direction, fields

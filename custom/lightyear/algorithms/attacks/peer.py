"""An attacking peer's update arithmetic in the peer-to-peer topology, on flat vectors (pure NumPy).

In the peer-to-peer topology every site holds its own model, so an attacker measures every
update against its own round-start model ``start``: its honest update is ``own - start``, a
fellow attacker's honestly trained model ``m`` counts as the update ``m - start``, and so does a
benign in-neighbour's model under full knowledge. What the attacker sends is ``start + crafted``
(:func:`crafted_update` for the rules of :mod:`lightyear.algorithms.attacks.updates`; the adaptive
attack predicts each receiver's round instead, ``lightyear.p2p.attack.adaptive``).

How many sites a receiver aggregates over (``n`` of LIE, MR and IPM) and how many of them attack
(``m``) follow from the graph, receiver by receiver: :func:`participants`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from lightyear.algorithms.attacks import catalogue
from lightyear.algorithms.attacks.declaration import RNG
from lightyear.algorithms.attacks.updates import FULL, KNOWLEDGE
from lightyear.algorithms.vectors import as_matrix

RECORDED = {"gamma": "attack_gamma", "z": "attack_z", "scale": "attack_scale", "epsilon": "attack_epsilon"}
"""The settings in force a crafted update's record names, and its columns."""


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


def attack_model(
    kind: str,
    knowledge: str,
    start,
    honest,
    colluders: Mapping[str, np.ndarray],
    benign: Mapping[str, np.ndarray],
    n: int,
    m: int,
    params: dict,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, dict]:
    """(the model an attacker sends, as a vector; record fields), from flat vectors.

    ``start``: the attacker's round-start model; ``honest``: its honestly trained model;
    ``colluders``: the other attackers' honestly trained models that reached it (partial and
    full knowledge); ``benign``: the benign in-neighbours' models of the round (full knowledge;
    empty under partial). Every update is a model minus ``start``: the attacker's own is
    ``honest - start``, and the pooled attackers' updates are it and the colluders'.

    The attacker sends ``start + crafted`` (:func:`crafted_update`). Fields add ``attack_known``,
    the number of updates the attack was computed from. The adaptive attack is no fixed rule
    (``lightyear.p2p.attack.adaptive``).
    """
    start = np.asarray(start, dtype=np.float64)
    honest = np.asarray(honest, dtype=np.float64)
    own = honest - start
    pooled = [own] + [np.asarray(colluders[p], dtype=np.float64) - start for p in sorted(colluders)]
    known_benign = [np.asarray(benign[p], dtype=np.float64) - start for p in sorted(benign)]
    crafted, fields = crafted_update(kind, knowledge, own, pooled, known_benign, n, m, params, rng)
    model = start + crafted
    fields["attack_known"] = len(pooled) + len(known_benign)
    return model, fields


def crafted_update(
    kind: str,
    knowledge: str,
    own_update: np.ndarray,
    pooled: Sequence[np.ndarray],
    benign: Sequence[np.ndarray],
    n: int,
    m: int,
    params: dict,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, dict]:
    """(the update an attacker sends, the record fields of how it was made) for an attack on updates
    (its declaration's ``craft``, :mod:`~lightyear.algorithms.attacks.catalogue`).

    ``pooled``: the attackers' honest updates (the own one included); ``benign``: the benign
    updates known under full knowledge. An attack that ``needs_known`` sees ``pooled + benign``
    (FedCAP's knowledge levels, :mod:`lightyear.algorithms.attacks.updates`), or ``benign`` alone
    when it is ``benign_only`` under full knowledge and any benign update is known (IPM: Xie et
    al.'s benign mean). Fields: ``attack_gamma`` (Min-Max / Min-Sum), ``attack_z`` (LIE),
    ``attack_scale`` (MR), ``attack_epsilon`` (IPM), a plugin's settings as ``attack_<name>``, and
    the norms of the honest and crafted updates. ``rng``: the generator of an attack that declares
    ``needs_rng`` (:func:`~lightyear.algorithms.attacks.declaration.attack_rng`), required for it.
    """
    if knowledge not in KNOWLEDGE:
        raise ValueError(f"unknown knowledge {knowledge!r}; choose one of {', '.join(KNOWLEDGE)}")
    declared = catalogue.attack(kind)
    if declared.craft is None:
        raise ValueError(
            f"attack {kind!r} crafts no update: "
            "it acts on the training data, on a whole model, or by searching the defence"
        )
    known = None
    if declared.needs_known:
        known = as_matrix(
            list(benign) if declared.benign_only and knowledge == FULL and len(benign) else list(pooled) + list(benign)
        )
    drawn = {}
    if declared.needs_rng:
        if rng is None:
            raise ValueError(
                f"attack {kind!r} draws at random and was given no generator: pass rng=attack_rng(seed, round, "
                "attacker) (lightyear.algorithms.attacks.declaration)"
            )
        drawn[RNG] = rng
    crafted, settings = declared.craft(np.asarray(own_update, dtype=np.float64), known, n, m, **params, **drawn)
    fields = {RECORDED.get(k, f"attack_{k}"): v for k, v in settings.items() if k != "ddof"}
    fields["attack_honest_norm"] = float(np.linalg.norm(own_update))
    fields["attack_norm"] = float(np.linalg.norm(crafted))
    return crafted, fields

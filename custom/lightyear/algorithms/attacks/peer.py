"""An attacking peer's update arithmetic in the peer-to-peer topology, on flat vectors (pure NumPy).

An attacker measures every update against its round-start model ``start`` (its own honest model, fellow attackers'
and, under full knowledge, benign in-neighbours' models minus ``start``) and sends ``start + crafted``. The
adaptive attack predicts each receiver instead (``lightyear.p2p.attack.adaptive``).
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
    """(n, m) as ``receiver`` sees a round: n = its in-degree + 1 (own model included), at least 2; m = the
    attackers among its in-neighbours, at least 1 (the one asking) and at most n - 1 (LIE's z_max needs m < n)."""
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
    """(the model an attacker sends, as a vector; record fields), from flat vectors. ``start``: the attacker's
    round-start model; ``honest``: its trained model; ``colluders``: the other attackers' trained models that reached
    it; ``benign``: the benign in-neighbours' models (full knowledge; else empty). Sends ``start + crafted``
    (:func:`crafted_update`); fields add ``attack_known``, the number of updates used."""
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
    """(the update an attacker sends, its record fields) for an attack on updates (its declaration's ``craft``).
    ``pooled``: the attackers' honest updates, own included; ``benign``: those known under full knowledge. An attack
    that ``needs_known`` sees ``pooled + benign``, or ``benign`` alone when ``benign_only`` under full knowledge and
    any is known. Fields: the settings as columns (:data:`RECORDED`, else ``attack_<name>``) and the honest and crafted
    norms. ``rng``: required by an attack that ``needs_rng``."""
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

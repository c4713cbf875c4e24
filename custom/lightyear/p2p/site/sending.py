"""What a peer-to-peer site sends, and the one hook through which a simulated attacker replaces it.

A site sends its freshly trained model to this round's out-neighbours. A component named by the
executor's ``attack_id`` (:class:`OutgoingHook`) may replace what is sent, and nothing else: the
site keeps training and aggregating on its honest model, and the hook is handed values, never the
site's executor, exchange or rule. At the run's start the hook gets :class:`SendingRun` (the run's
graph, deadlines, reference model and codec, and, where the method declares one, its oracle: the
method's own decision as a prediction of a receiver's round); each round, before the site sends,
it gets :class:`Sending` and returns the model to send (or a :class:`PerReceiver` of them) with
its record fields. The toolkit's hook is the simulated attacker of ``lightyear.p2p.attack``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from lightyear.p2p.wire.exchange import PerReceiver

__all__ = ["OutgoingHook", "PerReceiver", "Sending", "SendingRun", "encoded", "hook_problem"]


@dataclass(frozen=True)
class SendingRun:
    """The run as a hook may know it: the site, the run's ``graph`` (site -> out-neighbours),
    ``rounds`` and the first round to train (``start_round``), the site's deadlines and model bound,
    ``log(level, message)``, the run's ``reference`` model (what received models are checked
    against), the payload ``codec``, whether messages go encrypted (``secure``), the network's unit
    groups (``symmetries()``), ``evaluate(split, weights)`` on the site's data, and ``oracle``: the
    method's prediction of a receiver's round (None: the method declares none)."""

    site: str
    graph: dict
    rounds: int
    start_round: int
    peer_deadline: float
    send_timeout: float
    max_abs_weight: float | None
    log: Callable[[str, str], None]
    reference: dict
    codec: object
    secure: bool
    symmetries: Callable[[], list] = list
    evaluate: Callable[..., dict] | None = None
    oracle: Callable | None = None


@dataclass
class Sending:
    """One round's send as a hook sees it: the model the round started from (``start``) and the
    honestly trained one (``honest``), this round's in-neighbours (``senders``) and out-neighbours
    (``receivers``), the engine the site sends with, ``peek(senders, timeout, abort)`` (the models of
    these senders received so far this round, waiting at most ``timeout`` s; they stay for the
    site's aggregation), ``compute()`` (a context manager holding a compute slot) and ``abort()``."""

    round_num: int
    start: dict
    honest: dict
    senders: list
    receivers: list
    engine: object
    peek: Callable[[list, float, Callable[[], bool]], dict]
    compute: Callable[[], AbstractContextManager]
    abort: Callable[[], bool]


@runtime_checkable
class OutgoingHook(Protocol):
    """A component that replaces what a site sends (module docstring). ``kind`` names it in the
    records; ``needs_oracle``: it cannot run against a method that declares no oracle."""

    kind: str
    needs_oracle: bool

    def begin_run(self, run: SendingRun) -> None: ...

    def outgoing(self, sending: Sending) -> tuple[dict, dict]: ...


def hook_problem(hook_id: str, component, oracle: Callable | None, method: str) -> str:
    """Why the component ``hook_id`` names cannot replace what this site sends, or ""."""
    if not isinstance(component, OutgoingHook):
        found = "no component" if component is None else f"a {type(component).__name__}"
        return (
            f"attack_id {hook_id!r} names {found} in this site's config; it must name a component that "
            "replaces what the site sends (begin_run, outgoing, kind, needs_oracle), such as "
            "lightyear.p2p.attack.attacker.PeerAttacker"
        )
    if component.needs_oracle and oracle is None:
        return (
            f"the {component.kind} attack predicts a receiver's round with the method's own decision, and this "
            f"site runs {method}, which declares none; choose another attack or a method that declares one"
        )
    return ""


def encoded(codec, outgoing):
    """``outgoing`` as it goes on the wire: a model encoded by ``codec``, or a :class:`PerReceiver` of
    encoded models (each distinct model once)."""
    if not isinstance(outgoing, PerReceiver):
        return codec.encode(outgoing)
    done: dict[int, dict] = {}
    for model in outgoing.values():
        if id(model) not in done:
            done[id(model)] = codec.encode(model)
    return PerReceiver({receiver: done[id(model)] for receiver, model in outgoing.items()})

"""What a peer-to-peer site sends, and the one hook through which a simulated attacker replaces it.

The :class:`OutgoingHook` the executor's ``attack_id`` names may replace what is sent and nothing else: the site keeps
its honest model, and the hook gets values, never the site's executor, exchange or rule.
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
    """The run as a hook may know it: ``graph`` maps site -> out-neighbours, ``symmetries()`` gives the network's unit
    groups, ``evaluate(split, weights)`` runs on the site's data, ``oracle`` is the method's (None: none declared)."""

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
    """One round's send as a hook sees it: ``peek(senders, timeout, abort)`` gives their models received this round
    (waiting at most ``timeout`` s; left for the aggregation); ``compute()`` holds a compute slot while entered."""

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
    """What replaces what a site sends; ``needs_oracle``: it cannot run against a method that declares no oracle."""

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
    """``outgoing`` encoded by ``codec``: a model, or a :class:`PerReceiver` of them (each distinct model once)."""
    if not isinstance(outgoing, PerReceiver):
        return codec.encode(outgoing)
    done: dict[int, dict] = {}
    for model in outgoing.values():
        if id(model) not in done:
            done[id(model)] = codec.encode(model)
    return PerReceiver({receiver: done[id(model)] for receiver, model in outgoing.items()})

"""How a peer-to-peer site starts its run: its components at FLARE's START_RUN, then everything
between the run's task and its first round.

:func:`bind_malfunction` and :func:`bind_attacker` take the components the site's config names
(``malfunction_id``, ``attack_id``). :func:`start_run` reads the task (rounds, seed, the graph),
finds the checkpoint to continue from (:mod:`lightyear.p2p.site.resume`) before it builds the
site's model and data, restores it, then opens the wire: it settles ``secure_messages``, opens the
cell gate at the model's payload limit (:mod:`lightyear.p2p.site.cell_gate`), builds the run's
:class:`~lightyear.p2p.site.exchange.PeerExchange`, starts an attacking site's run
(:mod:`lightyear.p2p.site.attacker`) and the handshake with the neighbours in the background
(:mod:`lightyear.p2p.site.handshake`), which the first round waits for before it sends.
:func:`run_kind` names what the site's result says it is. Each takes the site's executor
(:class:`~lightyear.p2p.site.executor.P2PExecutor`) as ``ex`` and sets it up in place.
"""

from __future__ import annotations

from collections.abc import Callable

from nvflare.apis.fl_context import FLContext
from nvflare.apis.signal import Signal

from lightyear.algorithms.attacks.updates import LF
from lightyear.models import model_symmetries
from lightyear.p2p import secure_messages
from lightyear.p2p.site.attacker import attack_problem
from lightyear.p2p.site.exchange import PeerExchange
from lightyear.p2p.site.handshake import READY, BackgroundHandshake
from lightyear.p2p.site.isolation import IsolationWatch
from lightyear.p2p.site.payload import FLOAT16_DELTA, PayloadCodec, payload_limit
from lightyear.p2p.site.resume import find_checkpoint, resume_into
from lightyear.p2p.site.sampling import RoundSampling
from lightyear.training.compute_slots import ComputeSlots
from lightyear.training.site_runtime import SiteRuntime


def bind_malfunction(ex, engine) -> str:
    """Take the component ``malfunction_id`` names; the reason the run cannot start, or ""."""
    ex.malfunction = engine.get_component(ex.malfunction_id)
    if ex.malfunction is None or not hasattr(ex.malfunction, "corrupt"):
        return f"malfunction_id {ex.malfunction_id!r} names no MalfunctionFilter component in this site's config"
    return ""


def bind_attacker(ex, engine) -> str:
    """Take the attacker ``attack_id`` names (none if it cannot attack); the reason the run cannot start, or ""."""
    ex.attack = engine.get_component(ex.attack_id)
    problem = attack_problem(ex.attack_id, ex.attack, ex)
    if problem:
        ex.attack = None
    return problem


def start_run(ex, config: dict, fl_ctx: FLContext, abort_signal: Signal) -> tuple[int, dict]:
    """Set the site up for the run the task's ``config`` describes; (the first round to train,
    the run's checkpoint metadata)."""
    rounds, seed = int(config["rounds"]), int(config["seed"])
    graph = config.get("neighbours", {})
    send_to, receive_from = graph_neighbours(graph, ex.site)
    ex.neighbours = sorted(set(send_to) | set(receive_from))
    ex.in_neighbours = receive_from
    ex.rounds, ex.seed = rounds, seed
    ex.sampling = RoundSampling(graph, seed, ex.sample_neighbours) if graph else None
    ex._abort = lambda: abort_signal.triggered
    run_dir = ex.run_dir = fl_ctx.get_engine().get_workspace().get_run_dir(fl_ctx.get_job_id())
    meta = {"rounds": rounds, "seed": seed}
    found, source, fix = find_checkpoint(run_dir, meta, ex.site, ex.resume_from)  # before the model: fails fast
    start = 0 if found is None else found.round + 1
    ex.last_round = start - 1
    ex.isolation = IsolationWatch(ex.max_isolated_rounds)
    ex.slots = ComputeSlots(ex.compute_slots, group=f"{fl_ctx.get_job_id()}")
    with ex.slots.hold(ex._abort):
        ex.runtime = SiteRuntime(ex.site, seed=seed, **ex.runtime_args)
    initial = ex.runtime.get_weights() if ex.transfer_dtype == FLOAT16_DELTA else None  # the seeded initial model
    if found is not None:  # checked against the freshly built model before anything of it is used
        checkpoint = resume_into(ex.runtime, ex.restore_method_state, source, fix, ex.max_abs_weight, rounds)
        ex.log_info(fl_ctx, f"resuming from the checkpoint of round {checkpoint.round} in {source}")
    ex.exchange, reference, secure = open_exchange(ex, config, send_to, receive_from, start, initial, fl_ctx)
    if ex.attack is not None:
        arm_attacker(ex, graph, start, reference, secure, fl_ctx)
    ex.log_info(
        fl_ctx,
        f"data {ex.runtime.data.sizes()}, sends to {send_to}, receives from {receive_from}, "
        f"device {ex.runtime.trainer.device}",
    )
    ex.ready, ex.state = True, READY
    ex.before_send = greet_neighbours(ex, fl_ctx)
    return start, meta


def graph_neighbours(graph: dict, site: str) -> tuple[list[str], list[str]]:
    """(the out-neighbours ``site`` sends to, the in-neighbours it receives from) in ``graph``."""
    send_to = sorted(graph.get(site, []))
    receive_from = sorted(s for s, outs in graph.items() if site in outs and s != site)
    return send_to, receive_from


def open_exchange(
    ex, config: dict, send_to: list[str], receive_from: list[str], start: int, initial: dict | None, fl_ctx: FLContext
) -> tuple[PeerExchange, dict, bool]:
    """(the run's exchange, the reference model every received model is checked against, whether
    messages go encrypted); ``initial`` is the seeded initial model a ``float16_delta`` payload is
    relative to. The gate opens first; until the exchange exists, a peer's model is answered
    "not ready" and sent again."""
    secure = secure_messages.resolve(
        config.get("secure_messages", False), secure_messages.deployment_secure(fl_ctx), ex.site
    )
    reference = ex.runtime.get_weights()
    ex.gate.open(payload_limit(reference), secure, fl_ctx.get_engine())
    asynchronous, async_wait = ex.exchange_mode()
    exchange = PeerExchange(
        send_to,
        receive_from,
        ex.rounds,
        ex.peer_deadline,
        ex.send_timeout,
        ex.max_missed_rounds,
        ex.max_abs_weight,
        ex._log(fl_ctx),
        start_round=start,
        asynchronous=asynchronous,
        async_wait=async_wait,
        reference=reference,
        codec=PayloadCodec(ex.transfer_dtype, initial),
        secure=secure,
        num_samples=ex.runtime.data.sizes()["train"] if ex.shares_dataset_size else None,
    )
    return exchange, reference, secure


def arm_attacker(ex, graph: dict, start: int, reference: dict, secure: bool, fl_ctx: FLContext) -> None:
    """Start the attacker's run: from now on the other attackers' models are taken."""
    runtime = ex.runtime
    ex.attack.begin_run(
        ex.site,
        graph,
        ex.rounds,
        start,
        ex.peer_deadline,
        ex.max_abs_weight,
        ex._log(fl_ctx),
        reference=reference,
        codec=ex.exchange.codec,
        secure=secure,
        send_timeout=ex.send_timeout,
        symmetries=lambda: model_symmetries(runtime.model_name, reference, runtime.model_args),
    )


def greet_neighbours(ex, fl_ctx: FLContext) -> Callable[[], None]:
    """Start the handshake with the neighbours in the background; the wait for it that the first
    round makes before it sends. A neighbour that did not answer "ready" is not waited for until
    it sends."""
    greeting = BackgroundHandshake(
        fl_ctx.get_engine(), fl_ctx, ex.neighbours, ex.ready_timeout, ex._abort, ex._log(fl_ctx)
    )

    def greeted() -> None:  # before the first send
        for peer in set(greeting.join()) & set(ex.exchange.missed):  # not waited for until they send
            ex.exchange.missed[peer] = ex.max_missed_rounds

    return greeted


def run_kind(ex) -> str:
    """What the site's result names it: its attack, ``lf`` (flipped labels), its malfunction or ``none``."""
    if ex.attack is not None:
        return ex.attack.kind
    if ex.flip_labels:
        return LF
    return ex.malfunction.kind if ex.malfunction is not None else "none"

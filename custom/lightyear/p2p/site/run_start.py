"""What a peer-to-peer site builds between its run's task and its first round, in the order
:meth:`~lightyear.p2p.site.executor.P2PExecutor._start` calls them: neighbours, exchange, background handshake.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable

from lightyear.flare import constants as C
from lightyear.p2p import secure_messages
from lightyear.p2p.server.model_relay import SERVER
from lightyear.p2p.site.handshake import BackgroundHandshake
from lightyear.p2p.wire.cell_gate import PeerGate
from lightyear.p2p.wire.exchange import PeerExchange
from lightyear.p2p.wire.payload import PayloadCodec, payload_limit
from lightyear.p2p.wire.sealing import Sealer

CERTIFICATE_TIMEOUT = 10.0  # seconds a site waits for the server to send its receivers' certificates


def graph_neighbours(graph: dict, site: str) -> tuple[list[str], list[str]]:
    """(the out-neighbours ``site`` sends to, the in-neighbours it receives from) in ``graph``."""
    send_to = sorted(graph.get(site, []))
    receive_from = sorted(s for s, outs in graph.items() if site in outs and s != site)
    return send_to, receive_from


@dataclass(frozen=True)
class ExchangeSettings:
    """The exchange's settings: the executor's arguments of those names and the rule's choices."""

    rounds: int
    peer_deadline: float
    send_timeout: float
    max_missed_rounds: int
    max_abs_weight: float | None
    transfer_dtype: str
    asynchronous: bool
    async_wait: float
    num_samples: int | None


def open_exchange(
    site: str,
    config: dict,
    settings: ExchangeSettings,
    send_to: list[str],
    receive_from: list[str],
    start: int,
    reference: dict,
    initial: dict | None,
    gate: PeerGate,
    log: Callable[[str, str], None],
    fl_ctx: FLContext,
) -> tuple[PeerExchange, bool]:
    """(the run's exchange, whether messages go encrypted), after opening the cell gate."""
    secure = secure_messages.resolve(
        config.get("secure_messages", False), secure_messages.deployment_secure(fl_ctx), site
    )
    via_server = config.get("model_route") == SERVER
    token = config.get("token")
    if via_server and not isinstance(token, str):
        raise RuntimeError("the run routes models through the server but gave this site no token: restart the job")
    gate.open(payload_limit(reference), secure, fl_ctx.get_engine(), server_only_forwards=via_server)
    sealer = site_sealer(site, token, log, fl_ctx) if via_server and secure else None
    exchange = PeerExchange(
        send_to,
        receive_from,
        settings.rounds,
        settings.peer_deadline,
        settings.send_timeout,
        settings.max_missed_rounds,
        settings.max_abs_weight,
        log,
        start_round=start,
        asynchronous=settings.asynchronous,
        async_wait=settings.async_wait,
        reference=reference,
        codec=PayloadCodec(settings.transfer_dtype, initial),
        secure=secure,
        num_samples=settings.num_samples,
        via_server=via_server,
        token=token,
        sealer=sealer,
    )
    return exchange, secure


def site_sealer(site: str, token: str, log: Callable[[str, str], None], fl_ctx: FLContext) -> Sealer:
    """A :class:`~lightyear.p2p.wire.sealing.Sealer` with the cell's credentials; raises with the fix when none."""
    engine = fl_ctx.get_engine()
    get_cell = getattr(engine, "get_cell", None)
    cell = get_cell() if callable(get_cell) else None
    credentials = getattr(getattr(cell, "core_cell", None), "credential_manager", None)
    held = [getattr(credentials, name, None) for name in ("local_key", "local_cert", "ca_cert")]
    if not all(isinstance(pem, bytes) and pem for pem in held):
        raise RuntimeError(
            "secure_messages is on and models go through the server sealed end to end, but this site's FLARE cell "
            "holds no provisioned key, certificate and root CA to seal them with; generate the job with "
            "--set model_route=direct to have FLARE encrypt each copy instead"
        )

    def fetch(names: list[str]) -> dict:
        request = Shareable()
        request[C.KEY_TOKEN] = token
        request[C.KEY_NAMES] = list(names)
        try:
            replies = engine.send_aux_request(
                targets=[C.SERVER],
                topic=C.TOPIC_CERTIFICATES,
                request=request,
                timeout=CERTIFICATE_TIMEOUT,
                fl_ctx=engine.new_context(),
            )
        except Exception as exc:  # noqa: BLE001 - no certificate: those receivers get no model this round
            log("warning", f"asking the server for certificates failed ({type(exc).__name__}: {exc})")
            return {}
        found = [r.get(C.KEY_CERTIFICATES) for r in (replies or {}).values() if isinstance(r, Shareable)]
        return found[0] if found and isinstance(found[0], dict) else {}

    return Sealer(site, fl_ctx.get_job_id(), *held, fetch)


def greet_neighbours(
    neighbours: list[str],
    exchange: PeerExchange,
    ready_timeout: float,
    abort: Callable[[], bool],
    log: Callable[[str, str], None],
    fl_ctx: FLContext,
) -> Callable[[], None]:
    """Start the handshake in the background; the wait for it that the first round makes before it sends."""
    greeting = BackgroundHandshake(fl_ctx.get_engine(), fl_ctx, neighbours, ready_timeout, abort, log)
    if exchange.via_server:  # before its first upload the server must know how large a model may be
        exchange.declare_limit(payload_limit(exchange.reference), fl_ctx.get_engine(), abort, ready_timeout)
    return lambda: exchange.not_waiting_for(greeting.join())

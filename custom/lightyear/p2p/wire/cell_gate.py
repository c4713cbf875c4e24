"""What other sites send a peer-to-peer site, checked on its FLARE cell before FLARE decrypts, buffers or decodes it.

FLARE 2.9 calls an aux handler only after it has buffered, decrypted and deserialised a message; the one earlier hook
is an incoming filter on the core cell (``CoreCell.add_incoming_filter``), where a reply stops the delivery.
:class:`PeerGate` refuses there, from another site's cells, what declares no size or more than ``limit`` bytes
(:func:`~lightyear.p2p.wire.payload.payload_limit`; before the run :data:`PRE_RUN_LIMIT`, and no model), unencrypted
model and download traffic under ``secure_messages=true``, and streams beyond
:class:`~lightyear.p2p.wire.stream_budget.StreamBudget`. It cannot bound the total of a message's array downloads
(FLARE 2.9 has no hook for it); ``payload_size_problem`` refuses the assembled model.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from nvflare.fuel.f3.cellnet.defs import CellChannel, MessageHeaderKey, MessageType
from nvflare.fuel.f3.cellnet.defs import ReturnCode as CellReturnCode
from nvflare.fuel.f3.cellnet.fqcn import FQCN
from nvflare.fuel.f3.cellnet.utils import make_reply
from nvflare.fuel.f3.streaming.download_service import OBJ_DOWNLOADER_CHANNEL
from nvflare.fuel.f3.streaming.stream_const import STREAM_CHANNEL, STREAM_DATA_TOPIC, StreamHeaderKey
from nvflare.fuel.f3.streaming.stream_types import StreamError

from lightyear.flare import constants as C
from lightyear.p2p.wire.stream_budget import StreamBudget

PRE_RUN_LIMIT = 1 << 20
"""Bytes a message from another site may take before the site's model (and so its bound) is known."""
WATCHED = ((STREAM_CHANNEL, STREAM_DATA_TOPIC), (CellChannel.AUX_COMMUNICATION, "*"), (OBJ_DOWNLOADER_CHANNEL, "*"))
"""(channel, topic) pairs the gate filters: every streamed frame, and unstreamed aux and download messages."""


def route(headers: Mapping) -> tuple[str, str, bool, bool]:
    """(application channel, topic, streamed, reply) of a frame or message from its headers."""
    channel, topic = headers.get(MessageHeaderKey.CHANNEL, ""), headers.get(MessageHeaderKey.TOPIC, "")
    streamed = channel == STREAM_CHANNEL and topic == STREAM_DATA_TOPIC
    if streamed:
        channel, topic = headers.get(StreamHeaderKey.CHANNEL, ""), headers.get(StreamHeaderKey.TOPIC, "")
    reply = headers.get(MessageHeaderKey.MSG_TYPE) in (MessageType.REPLY, MessageType.RETURN)
    if channel == CellChannel.RETURN_ONLY:  # a streamed reply names the request's channel and topic as "channel:topic"
        channel, _, topic = str(topic).partition(":")
        reply = True
    return str(channel), str(topic), streamed, reply


class PeerGate:
    """The incoming filter of one site's job cell (module docstring); ``log(level, message)`` reports refusals."""

    def __init__(self, log: Callable[[str, str], None]):
        self.log = log
        self.limit = PRE_RUN_LIMIT
        self.require_encryption = False
        self.models_open = False
        self.installed = False
        self.own_fqcn = ""
        self._byte_receiver = None
        self._lock = threading.Lock()
        self._reported: deque = deque(maxlen=256)
        self.budget = StreamBudget(PRE_RUN_LIMIT)
        self.clock = time.monotonic

    def install(self, cell) -> bool:
        """Filter what arrives at ``cell`` (a FLARE ``Cell``); False when it offers no incoming filter."""
        core = getattr(cell, "core_cell", None)
        add_filter = getattr(core, "add_incoming_filter", None)
        if self.installed or not callable(add_filter):
            return self.installed
        self.own_fqcn = core.get_fqcn()
        for channel, topic in WATCHED:
            add_filter(channel=channel, topic=topic, cb=self.check)
        self._byte_receiver = getattr(cell, "byte_receiver", None)
        self.installed = True
        return True

    def watch(self, engine) -> bool:
        """Filter what arrives at the job cell of ``engine`` (FLARE's ``get_cell``); False when it has none."""
        get_cell = getattr(engine, "get_cell", None)
        cell = get_cell() if callable(get_cell) else None
        return cell is not None and self.install(cell)

    def open(self, limit: int, require_encryption: bool, engine=None, server_only_forwards: bool = False) -> None:
        """Bound messages by ``limit`` bytes and take models; raises if a check asked for needs a cell and none is."""
        if engine is not None:
            self.watch(engine)
        if server_only_forwards and not self.installed:
            raise RuntimeError(
                "model_route=server, but this site's FLARE engine gives it no cell to check who sends it a "
                "forwarded model, so another site could pose as the server; generate the job with "
                "--set model_route=direct to run without that check"
            )
        if require_encryption and not self.installed:
            raise RuntimeError(
                "secure_messages=true, but this site's FLARE engine gives it no cell to check incoming messages on, "
                "so it could not refuse model messages that arrive unencrypted; generate the job with "
                "--set secure_messages=auto or false to run without that check"
            )
        self.limit = int(limit)
        self.budget.limit = self.limit
        self.require_encryption = bool(require_encryption)
        self.models_open = True

    def check(self, message):
        """FLARE's incoming-filter callback: None lets ``message`` through, a reply stops it."""
        headers = message.headers
        payload_bytes = _nbytes(message.payload)
        reason = self.problem(headers, payload_bytes) or self._stream_problem(headers, payload_bytes)
        if reason is None:
            return None
        self._report(message, headers, reason)
        return make_reply(CellReturnCode.INVALID_REQUEST, error=reason)

    def problem(self, headers: Mapping, payload_bytes: int) -> str | None:
        """Why a frame or message with ``headers`` and a payload of ``payload_bytes`` is refused, or None."""
        origin = self._other_site(headers)
        if origin is None:
            return None
        channel, topic, streamed, reply = route(headers)
        what = f"{_what(channel, topic, reply)} from {_shown(origin)}"
        declared = headers.get(StreamHeaderKey.SIZE) if streamed else payload_bytes
        if isinstance(declared, bool) or not isinstance(declared, int) or declared < 0:
            return f"{what}: it declares no size"
        size = max(declared, payload_bytes)
        if size > self.limit:
            return f"{what}: {size} bytes, more than the {self.limit} bytes a model of this job can take"
        aux_request = channel == CellChannel.AUX_COMMUNICATION and not reply
        if aux_request and topic == C.TOPIC_FORWARD:
            return f"{what}: a forwarded model comes from the server alone"
        is_model = aux_request and topic in C.MODEL_TOPICS
        if is_model and not self.models_open:
            return f"{what}: it arrived before this site's run started"
        carries_model = is_model or channel == OBJ_DOWNLOADER_CHANNEL
        encrypted = headers.get(MessageHeaderKey.SECURE, False) and headers.get(MessageHeaderKey.ENCRYPTED, False)
        if carries_model and self.require_encryption and not encrypted:
            return f"{what}: not encrypted, and secure_messages=true refuses what was not"
        return None

    def _stream_problem(self, headers: Mapping, payload_bytes: int) -> str | None:
        """Why a streamed frame from another site is refused by the bound on open streams, or None; counts it."""
        origin = self._other_site(headers)
        if origin is None or not route(headers)[2]:
            return None
        key = (origin, _hashable(headers.get(StreamHeaderKey.STREAM_ID)))
        clear = payload_bytes
        if headers.get(MessageHeaderKey.SECURE, False) and headers.get(MessageHeaderKey.ENCRYPTED, False):
            stated = headers.get(MessageHeaderKey.CLEAR_PAYLOAD_LEN)  # FLARE drops the frame if it lied
            if isinstance(stated, int) and not isinstance(stated, bool) and 0 <= stated <= payload_bytes:
                clear = stated
        frame = _hashable(headers.get(StreamHeaderKey.SEQUENCE))
        with self._lock:
            if key in self._reported:
                return f"a stream from {_shown(origin)}: the rest of a stream already refused"
            why = self.budget.admit(
                FQCN.split(origin)[0], key, headers.get(StreamHeaderKey.SIZE), clear, frame, self.clock()
            )
        return None if why is None else f"a stream from {_shown(origin)}: {why}"

    def _other_site(self, headers: Mapping) -> str | None:
        """The origin of a frame or message to this cell from another site's cell; None for anything else."""
        origin = str(headers.get(MessageHeaderKey.ORIGIN) or "")
        if headers.get(MessageHeaderKey.DESTINATION) != self.own_fqcn:
            return None
        root = FQCN.split(origin)[0] if origin else ""
        return origin if root and root != FQCN.ROOT_SERVER and root != FQCN.split(self.own_fqcn)[0] else None

    def _report(self, message, headers: Mapping, reason: str) -> None:
        """Log the refusal, and tell a stream's sender, once per stream (or unstreamed message)."""
        stream = headers.get(StreamHeaderKey.STREAM_ID)
        key = (
            headers.get(MessageHeaderKey.ORIGIN),
            stream if stream is not None else headers.get(MessageHeaderKey.REQ_ID),
        )
        with self._lock:
            if key in self._reported:
                return
            self._reported.append(key)
        self.log("warning", f"refused {reason}")
        if stream is not None and self._byte_receiver is not None:
            try:
                self._byte_receiver.reject(message, StreamError(reason))
            except Exception as exc:  # noqa: BLE001 - telling the sender is a courtesy; the refusal stands
                self.log("debug", f"could not tell the sender of a refused stream: {exc}")


def _what(channel: str, topic: str, reply: bool) -> str:
    if channel == CellChannel.AUX_COMMUNICATION and not reply:
        named = {C.TOPIC_MODEL: "a model message", C.TOPIC_COLLUDE: "a collusion message"}
        named.update({C.TOPIC_UPLOAD: "a model upload", C.TOPIC_FORWARD: "a forwarded model"})
        if topic in named:
            return named[topic]
    if channel == OBJ_DOWNLOADER_CHANNEL:
        return "download data" if reply else "a download request"
    return f"{'a reply' if reply else 'a message'} on {channel!r:.40}/{topic!r:.60}"


def _shown(text: str) -> str:
    """A header from another site as it may be logged: one printable line, at most 80 characters."""
    return text if text.isprintable() and len(text) <= 80 else repr(text)[:80]


def _hashable(value):
    try:
        hash(value)
        return value
    except TypeError:
        return repr(value)[:80]


def _nbytes(payload) -> int:
    if payload is None:
        return 0
    if isinstance(payload, (list, tuple)):
        return sum(_nbytes(p) for p in payload)
    try:
        return memoryview(payload).nbytes
    except TypeError:
        return 0

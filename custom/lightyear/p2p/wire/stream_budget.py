"""What one other site's streams may make this site hold at once (pure, no FLARE).

FLARE's receiver allocates a buffer of a stream's declared size on the first frame it sees of
it and holds it until the stream's declared bytes have all arrived or its read timeout (300 s)
passes (``nvflare/fuel/f3/streaming/blob_streamer.py``, ``byte_receiver.py``). Frames cost their
sender little; what they make the receiver hold is bounded here, per sending site:

* at most :data:`STREAMS_PER_SITE` streams open at once, declaring at most
  :data:`LIMITS_PER_SITE` message bounds together;
* a stream counts as open until as many plaintext bytes as it declared have arrived in distinct
  frames (a frame's sequence number is counted once: a retransmission adds nothing), or for
  :data:`STREAM_TTL` seconds after its first frame; the plaintext size of an encrypted frame is
  the length its sender declares for it (FLARE drops a frame whose decrypted payload differs);
* a stream that declares 0 bytes but carries some is refused: FLARE grows its buffer without any
  bound but its 4 GiB blob limit;
* frames of a stream that ended within :data:`FINISHED_TTL` seconds (late or retransmitted ones)
  pass without counting again: FLARE drops them itself for as long;
* a stream may have at most ``FRAMES_BASE + declared // FRAME_BYTES`` distinct frames, so the
  record of its sequence numbers stays bounded too.

An honest peer has one to three streams open at a receiver at a time (its model message, the
download of its arrays, two requests in flight), each ending when its bytes have arrived.
"""

from __future__ import annotations

from dataclasses import dataclass, field

STREAMS_PER_SITE = 8
"""Streams one other site may have open at this site at once."""
LIMITS_PER_SITE = 4
"""The bytes the open streams of one other site may declare together, in units of the message bound."""
STREAM_TTL = 300.0
"""Seconds a stream counts as open after its first frame at most: FLARE's streaming read timeout."""
FINISHED_TTL = 60.0
"""Seconds a finished stream's late frames pass uncounted: FLARE's default for dropping them itself."""
FRAMES_BASE = 4096
FRAME_BYTES = 65536
"""A stream may have ``FRAMES_BASE + declared // FRAME_BYTES`` distinct frames (FLARE sends 1 MiB frames)."""
MAX_FINISHED = 4096
"""Finished streams remembered at most (the oldest are forgotten first)."""


@dataclass
class _Open:
    site: str
    declared: int
    first_seen: float
    arrived: int = 0
    frames: set = field(default_factory=set)


class StreamBudget:
    """The open streams of every other site at this site, and the bound on them (module docstring);
    ``limit``: the bytes one message of this job may take. Not thread-safe: the caller locks."""

    def __init__(self, limit: int):
        self.limit = int(limit)
        self.open: dict[tuple, _Open] = {}
        self.finished: dict[tuple, float] = {}  # key -> when it ended, oldest first

    def admit(self, site: str, key: tuple, declared: int, clear_bytes: int, frame, now: float) -> str | None:
        """Count one frame (``frame``: its sequence number) of stream ``key`` from ``site``; why it
        is refused, or None."""
        if declared == 0 and clear_bytes > 0:
            return f"it declares 0 bytes but carries {clear_bytes}"
        ended = self.finished.get(key)
        if ended is not None and now - ended <= FINISHED_TTL:
            return None
        stream = self.open.get(key)
        if stream is None:
            self._expire(now)
            mine = [s for s in self.open.values() if s.site == site]
            if len(mine) >= STREAMS_PER_SITE:
                return f"{len(mine)} of its streams are open here already (at most {STREAMS_PER_SITE})"
            held = sum(s.declared for s in mine)
            if held + declared > LIMITS_PER_SITE * self.limit:
                return (
                    f"its open streams would declare {held + declared} bytes together, more than "
                    f"{LIMITS_PER_SITE} times the {self.limit} bytes a message of this job can take"
                )
            stream = self.open[key] = _Open(site, declared, now)
        if frame not in stream.frames:
            if len(stream.frames) >= FRAMES_BASE + stream.declared // FRAME_BYTES:
                return f"more than {len(stream.frames)} frames for {stream.declared} bytes"
            stream.frames.add(frame)
            stream.arrived += clear_bytes
        if stream.arrived >= stream.declared:
            del self.open[key]
            self.finished[key] = now
            while len(self.finished) > MAX_FINISHED:
                del self.finished[next(iter(self.finished))]
        return None

    def _expire(self, now: float) -> None:
        for key in [k for k, s in self.open.items() if now - s.first_seen > STREAM_TTL]:
            del self.open[key]
        for key in [k for k, t in self.finished.items() if now - t > FINISHED_TTL]:
            del self.finished[key]

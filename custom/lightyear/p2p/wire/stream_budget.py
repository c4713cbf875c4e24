"""What one other site's streams may make this site hold at once (pure, no FLARE).

FLARE holds a stream's declared size from its first frame until it all arrived or times out; per sending site this
bounds the streams open at once and the bytes they declare. A stream is open until its declared plaintext bytes
arrived in distinct frames or for :data:`STREAM_TTL` s; one declaring 0 bytes but carrying some is refused.
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
    """The open streams of every other site here; ``limit``: a message's bound. Not thread-safe: the caller locks."""

    def __init__(self, limit: int):
        self.limit = int(limit)
        self.open: dict[tuple, _Open] = {}
        self.finished: dict[tuple, float] = {}  # key -> when it ended, oldest first

    def admit(self, site: str, key: tuple, declared: int, clear_bytes: int, frame, now: float) -> str | None:
        """Count one frame (``frame``: its sequence number) of stream ``key`` from ``site``; why refused, or None."""
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

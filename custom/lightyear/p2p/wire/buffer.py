"""Thread-safe store of the models peers send, keyed by (round, sender). No FLARE import."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

STORED = "stored"
LATE = "late"
EARLY = "early"
DUPLICATE = "duplicate"
BAD_ROUND = "bad round"

RETRY_S = 1.0
"""Seconds before a model a receiver was not ready for is sent again, doubling up to :data:`MAX_RETRY_S`."""
MAX_RETRY_S = 2.0


def wait_until(cond: threading.Condition, done: Callable[[], bool], deadline: float, abort=None) -> None:
    """(holding ``cond``) Wait until ``done()``, the monotonic ``deadline`` or ``abort()``, checking twice a second."""
    while not done():
        left = deadline - time.monotonic()
        if left <= 0 or (abort is not None and abort()):
            return
        cond.wait(timeout=min(left, 0.5))


class PeerModelBuffer:
    """Holds received peer models until their round is aggregated: only the first model of each (round, sender) for
    the current and the next round, so at most 2 x senders models whatever peers send."""

    def __init__(self, rounds: int | None = None):
        self._models: dict[int, dict[str, Any]] = {}
        self._current = 0
        self._rounds = rounds
        self._cond = threading.Condition()

    def start(self, rounds: int, current: int = 0) -> None:
        """Set the run's number of rounds and the round in progress (a resumed site starts later)."""
        with self._cond:
            self._rounds = int(rounds)
            self._current = int(current)
            for r in [r for r in self._models if not self._acceptable(r)]:
                del self._models[r]

    def _acceptable(self, round_num: int) -> bool:
        return self._current <= round_num <= self._current + 1 and (self._rounds is None or round_num < self._rounds)

    def ahead(self, round_num: Any) -> bool:
        """Whether ``round_num`` is a round of the run more than one past the current one (answered "not ready")."""
        if isinstance(round_num, bool) or not isinstance(round_num, int):
            return False
        with self._cond:
            return round_num > self._current + 1 and (self._rounds is None or round_num < self._rounds)

    def holds(self, round_num: Any, sender: str) -> bool:
        """Whether a model of ``sender`` for ``round_num`` is held (a second one would be a duplicate)."""
        with self._cond:
            return isinstance(round_num, int) and sender in self._models.get(round_num, {})

    def put(self, round_num: Any, sender: str, model: Any) -> str:
        """Store ``model`` if it is for the current or the next round and the sender's first for it; returns
        ``stored``, ``bad round``, ``late``, ``early`` or ``duplicate``."""
        if isinstance(round_num, bool) or not isinstance(round_num, int) or round_num < 0:
            return BAD_ROUND
        with self._cond:
            if self._rounds is not None and round_num >= self._rounds:
                return BAD_ROUND
            if round_num < self._current:
                return LATE
            if round_num > self._current + 1:
                return EARLY
            held = self._models.setdefault(round_num, {})
            if sender in held:
                return DUPLICATE
            held[sender] = model
            self._cond.notify_all()
            return STORED

    def wait_for(self, round_num: int, senders: Iterable[str], timeout: float, abort=None) -> dict[str, Any]:
        """Wait until every sender's round model is here, ``timeout`` s pass or ``abort()``; return what arrived."""
        senders = set(senders)
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            wait_until(self._cond, lambda: senders <= set(self._models.get(round_num, {})), deadline, abort)
            return {s: m for s, m in self._models.get(round_num, {}).items() if s in senders}

    def take(self, round_num: int) -> dict[str, Any]:
        """Everything received for ``round_num`` so far (also from senders no longer waited for)."""
        with self._cond:
            return dict(self._models.get(round_num, {}))

    def release(self, round_num: int) -> None:
        """Forget round ``round_num`` and all earlier rounds; later models for them are refused."""
        with self._cond:
            self._current = max(self._current, round_num + 1)
            for r in [r for r in self._models if r <= round_num]:
                del self._models[r]

    def models_held(self) -> int:
        with self._cond:
            return sum(len(v) for v in self._models.values())

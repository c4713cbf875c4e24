"""Thread-safe store of the newest valid model from each peer, for the asynchronous exchange (AsyncDeFTA, Zhou et
al., Section 3.4): one model per in-neighbour at most. No FLARE import."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from lightyear.p2p.wire.buffer import BAD_ROUND, STORED, wait_until

STALE = "stale"
UNKNOWN_SENDER = "unknown sender"


class LatestModelStore:
    """The newest valid model of each sender, with a flag for models not yet taken."""

    def __init__(self, senders: Iterable[str], rounds: int):
        self.senders = frozenset(senders)
        self.rounds = int(rounds)
        self._held: dict[str, tuple[int, Any]] = {}  # sender -> (its round, model)
        self._seen: dict[str, int] = {}  # sender -> newest round seen (valid or not)
        self._rejected: dict[str, str] = {}  # sender -> reason, until taken
        self._fresh: set[str] = set()  # senders that delivered since they were last taken
        self._cond = threading.Condition()

    def put(self, round_num: Any, sender: str, model: Any, rejected_reason: str | None = None) -> str:
        """Keep ``model`` (with ``rejected_reason``: only the reason) unless its round is not after ``sender``'s
        newest; returns ``stored``, ``stale``, ``bad round`` or ``unknown sender``."""
        if sender not in self.senders:
            return UNKNOWN_SENDER
        if isinstance(round_num, bool) or not isinstance(round_num, int) or not 0 <= round_num < self.rounds:
            return BAD_ROUND
        with self._cond:
            if round_num <= self._seen.get(sender, -1):
                return STALE
            self._seen[sender] = round_num
            if rejected_reason is not None:
                self._rejected[sender] = rejected_reason
            else:
                self._held[sender] = (round_num, model)
                self._rejected.pop(sender, None)
            self._fresh.add(sender)
            self._cond.notify_all()
            return STORED

    def wait_fresh(self, senders: Iterable[str], timeout: float, abort: Callable[[], bool] | None = None) -> set[str]:
        """Wait at most ``timeout`` s until each of ``senders`` delivered since last taken; return those that did."""
        wanted = set(senders)
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            wait_until(self._cond, lambda: wanted <= self._fresh, deadline, abort)
            return wanted & self._fresh

    def take(self, senders: Iterable[str]) -> tuple[dict[str, tuple[int, Any]], dict[str, str], set[str]]:
        """For ``senders``: newest (round, model), and the rejections and deliveries since the last take (cleared)."""
        names = set(senders)
        with self._cond:
            held = {s: self._held[s] for s in sorted(names & set(self._held))}
            rejected = {s: self._rejected.pop(s) for s in sorted(names & set(self._rejected))}
            fresh = names & self._fresh
            self._fresh -= names
            return held, rejected, fresh

    def peek(self, senders: Iterable[str]) -> dict[str, Any]:
        """The newest held model of each of ``senders``, leaving every flag as it is."""
        with self._cond:
            return {s: self._held[s][1] for s in sorted(set(senders) & set(self._held))}

    def models_held(self) -> int:
        with self._cond:
            return len(self._held)

"""Thread-safe store of the newest model from each peer, for the asynchronous exchange. No FLARE import.

In the asynchronous variant (AsyncDeFTA, Zhou et al., Section 3.4) sites run their rounds at
their own pace: a peer's model may come from any of its rounds. The store keeps, per sender, only
the newest model that passed its checks, so memory stays at one model per in-neighbour whatever
the peers send: a model for a round at or before the newest one already seen from that sender
is refused as ``stale``; a round that is not an integer >= 0 below the run's rounds is a
``bad round``. A model that failed its checks replaces nothing: the held model stays and the
reason is reported once by :meth:`take`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

STORED = "stored"
STALE = "stale"
BAD_ROUND = "bad round"
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
        """Keep ``model`` as ``sender``'s newest unless it is older than what it already sent.

        With ``rejected_reason`` the model failed its checks: it is not kept, the reason is
        reported by the next :meth:`take`. Returns ``stored``, ``stale``, ``bad round`` or
        ``unknown sender``.
        """
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
        """Wait until each of ``senders`` delivered since it was last taken, at most ``timeout`` s;
        return those that did."""
        wanted = set(senders)
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while not wanted <= self._fresh:
                left = deadline - time.monotonic()
                if left <= 0 or (abort is not None and abort()):
                    break
                self._cond.wait(timeout=min(left, 0.5))
            return wanted & self._fresh

    def take(self, senders: Iterable[str]) -> tuple[dict[str, tuple[int, Any]], dict[str, str], set[str]]:
        """For ``senders``: their newest held (round, model), the reasons of models rejected since
        the last take, and which of them delivered since the last take. Clears those flags."""
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

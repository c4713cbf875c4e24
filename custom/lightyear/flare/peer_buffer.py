"""Thread-safe store of the models peers send, keyed by (round, sender). No FLARE import."""

from __future__ import annotations

import threading
import time
from typing import Any, Iterable


class PeerModelBuffer:
    """Holds received peer models until the round that needs them is aggregated.

    Models are keyed by round, so a fast peer's next-round model never mixes with this round's.
    A model for a round already finished is refused (late); :meth:`release` frees a round and
    every earlier one, so memory holds at most the rounds still in flight.
    """

    def __init__(self):
        self._models: dict[int, dict[str, Any]] = {}
        self._finished_through = -1
        self._cond = threading.Condition()

    def put(self, round_num: int, sender: str, model: Any) -> bool:
        """Store ``model``; False (and nothing stored) if ``round_num`` is already finished."""
        with self._cond:
            if round_num <= self._finished_through:
                return False
            self._models.setdefault(round_num, {})[sender] = model
            self._cond.notify_all()
            return True

    def wait_for(self, round_num: int, senders: Iterable[str], timeout: float, abort=None) -> dict[str, Any]:
        """Wait until every sender's round model is here or ``timeout`` s pass; return what arrived.

        ``abort`` is an optional callable returning True to stop waiting early.
        """
        senders = set(senders)
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            while True:
                have = self._models.get(round_num, {})
                if senders <= set(have):
                    break
                left = deadline - time.monotonic()
                if left <= 0 or (abort is not None and abort()):
                    break
                self._cond.wait(timeout=min(left, 0.5))
            return {s: m for s, m in self._models.get(round_num, {}).items() if s in senders}

    def release(self, round_num: int) -> None:
        """Forget round ``round_num`` and all earlier rounds; later models for them are refused."""
        with self._cond:
            self._finished_through = max(self._finished_through, round_num)
            for r in [r for r in self._models if r <= round_num]:
                del self._models[r]

    def rounds_held(self) -> list[int]:
        with self._cond:
            return sorted(self._models)

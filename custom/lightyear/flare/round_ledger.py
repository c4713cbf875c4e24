"""Which rounds of a job each site has had a record kept for, on the server: one a site and round (no FLARE import).
A site's round reports are hostile input: no site can make the server keep more than the job's rounds' records."""

from __future__ import annotations

import threading

from lightyear.checks import is_int, positive_int


class RoundLedger:
    def __init__(self, rounds: int):
        self.rounds = positive_int("rounds", rounds)
        self._kept: dict[str, set[int]] = {}  # site -> the rounds whose record was kept
        self._lock = threading.Lock()

    def claim(self, site: str, round_num) -> str | None:
        """Grant ``site`` its record of ``round_num`` (None), or say why not: no round of the job, or granted before."""
        if not is_int(round_num) or not 0 <= round_num < self.rounds:
            return f"round must be an integer in [0, {self.rounds - 1}], got {repr(round_num)[:40]}"
        with self._lock:
            kept = self._kept.setdefault(site, set())
            if round_num in kept:
                return f"round {round_num} was recorded already"
            kept.add(round_num)
        return None

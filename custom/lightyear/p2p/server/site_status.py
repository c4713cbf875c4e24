"""What the server knows of each site of a peer-to-peer run (thread-safe, no FLARE import): ``pending``, then
``running``, then ``finished``, ``failed`` or ``dropped`` (never after finished or failed)."""

from __future__ import annotations

import threading
import time

PENDING, RUNNING, FINISHED, FAILED, DROPPED = "pending", "running", "finished", "failed", "dropped"


class SiteStatus:
    def __init__(self, sites: list[str], clock=time.monotonic):
        self.sites = sorted(sites)
        self._clock = clock
        self._lock = threading.Lock()
        self._state = {s: PENDING for s in self.sites}
        self._reason: dict[str, str] = {}
        self._last_round: dict[str, int] = {}
        self._last_seen = {s: clock() for s in self.sites}
        self._missed_pings = {s: 0 for s in self.sites}
        self._results: dict[str, dict] = {}

    def start(self, site: str) -> None:
        with self._lock:
            if self._state.get(site) == PENDING:
                self._state[site] = RUNNING
                self._last_seen[site] = self._clock()

    def progress(self, site: str, round_num) -> None:
        with self._lock:
            self._last_seen[site] = self._clock()
            if isinstance(round_num, int) and not isinstance(round_num, bool):
                self._last_round[site] = max(round_num, self._last_round.get(site, -1))

    def ping(self, site: str, alive: bool) -> int:
        """Record a liveness ping; returns the pings missed in a row."""
        with self._lock:
            self._missed_pings[site] = 0 if alive else self._missed_pings[site] + 1
            return self._missed_pings[site]

    def finish(self, site: str, result: dict) -> None:
        with self._lock:
            self._state[site] = FINISHED
            self._results[site] = result
            self._reason.pop(site, None)

    def fail(self, site: str, reason: str) -> None:
        with self._lock:
            if self._state.get(site) != FINISHED:
                self._state[site] = FAILED
                self._reason[site] = reason

    def drop(self, site: str, reason: str) -> None:
        with self._lock:
            if self._state.get(site) in (PENDING, RUNNING):
                self._state[site] = DROPPED
                self._reason[site] = reason

    def running(self) -> list[str]:
        with self._lock:
            return [s for s in self.sites if self._state[s] == RUNNING]

    def dropped(self) -> list[str]:
        with self._lock:
            return [s for s in self.sites if self._state[s] == DROPPED]

    def silent_since(self, now: float, timeout: float) -> list[str]:
        """Running sites not heard of for more than ``timeout`` s."""
        with self._lock:
            return [s for s in self.sites if self._state[s] == RUNNING and now - self._last_seen[s] > timeout]

    def all_done(self) -> bool:
        with self._lock:
            return all(state in (FINISHED, FAILED, DROPPED) for state in self._state.values())

    def snapshot(self) -> dict:
        """For FLARE's stats; ``current_round``: the slowest running site's (once none runs, the most completed)."""
        with self._lock:
            done = {s: self._last_round.get(s, -1) + 1 for s in self.sites}
            running = [done[s] for s in self.sites if self._state[s] == RUNNING]
            out = {"sites": len(self.sites)}
            for state in (PENDING, RUNNING, FINISHED, FAILED, DROPPED):
                out[f"sites_{state}"] = sum(1 for s in self.sites if self._state[s] == state)
            out["current_round"] = min(running) if running else max(done.values(), default=0)
            out["rounds_done"] = done
            for state in (FAILED, DROPPED):
                out[state] = {s: self._reason.get(s, "") for s in self.sites if self._state[s] == state}
            return out

    def results(self) -> list[dict]:
        """One record per site for the summary: a finished site's result, else its status, reason and last round."""
        with self._lock:
            out = []
            for site in self.sites:
                last, result = self._last_round.get(site, ""), self._results.get(site, {})
                if self._state[site] == FINISHED:
                    out.append(dict(result, site=site, status=FINISHED, last_round=result.get("last_round", last)))
                else:
                    status = self._state[site] if self._state[site] in (FAILED, DROPPED) else DROPPED
                    reason = self._reason.get(site, "the run ended before this site finished")
                    out.append({"site": site, "status": status, "reason": reason, "last_round": last, "test": {}})
            return out

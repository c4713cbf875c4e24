"""When a peer-to-peer site should stop because it can reach none of its neighbours (no FLARE import).

With the server dead (every client-to-client message transits it) a site would train alone, in silence.
:class:`IsolationWatch` counts the rounds in a row in which a site with neighbours heard from none and delivered to
none; after ``max_isolated_rounds`` the site stops, keeping its checkpoint (docs/reliability.md).
"""

from __future__ import annotations

from lightyear.checks import positive_int

DEFAULT_MAX_ISOLATED_ROUNDS = 3


def check_max_isolated_rounds(value) -> int | None:
    """A positive integer, or None: never stop however long the site is cut off."""
    if value is None:
        return None
    note = "rounds in a row without reaching any neighbour before the site stops; or null: never stop"
    return positive_int("max_isolated_rounds", value, note=note)


class SiteIsolated(RuntimeError):
    """The site reached none of its neighbours for ``max_isolated_rounds`` rounds and stops."""


class IsolationWatch:
    def __init__(self, max_isolated_rounds: int | None = DEFAULT_MAX_ISOLATED_ROUNDS):
        self.max_rounds = check_max_isolated_rounds(max_isolated_rounds)
        self.count = 0

    def update(self, has_peers: bool, heard: bool, delivered: bool) -> bool:
        """Record one finished round; True when the site has been cut off long enough to stop."""
        if not has_peers:
            return False
        self.count = 0 if (heard or delivered) else self.count + 1
        return self.cut_off

    @property
    def cut_off(self) -> bool:
        """True once ``max_isolated_rounds`` rounds in a row reached no neighbour."""
        return self.max_rounds is not None and self.count >= self.max_rounds

    def reason(self, last_round: int, peer_deadline: float) -> str:
        return (
            f"stopped after round {last_round}: no neighbour reached for {self.count} rounds in a row (no model "
            f"received within peer_deadline={peer_deadline:g} s and no send acknowledged; every client-to-client "
            "message transits the FLARE server, so the server or this site's connection to it is probably down). "
            f"The checkpoint of round {last_round} is kept: submit the job again with resume_from to continue"
        )

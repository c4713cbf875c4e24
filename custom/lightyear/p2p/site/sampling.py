"""Per-round sampling of neighbours that both ends of an edge compute alike (pure NumPy, no FLARE).

The receiver draws: site i hears S_i^t = :func:`lightyear.p2p.topology.sample_neighbours` of its in-neighbours (seed,
round t, site i) and j sends to the i with j in S_i^t; both ends agree without a message, and each site aggregates a
fixed number of models per round, as the rules' weights assume.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lightyear.checks import int_in, number_in
from lightyear.p2p.topology import in_neighbours, sample_neighbours


def check_sample_setting(value) -> dict | None:
    """``sample_neighbours`` (None, a count >= 1 or a fraction in (0, 1]) as keyword arguments; else a ValueError."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return {"count": int_in("sample_neighbours as a count", value, 1, note="senders heard per round")}
    if isinstance(value, float):
        note = "write a count as an integer, e.g. 2"
        number_in("sample_neighbours as a fraction", value, 0.0, 1.0, low_open=True, note=note)
        return {"fraction": value}
    raise ValueError(f"sample_neighbours must be null, an integer >= 1 or a fraction in (0, 1], got {value!r}")


class RoundSampling:
    """Who sends to whom in a given round, for a graph, a seed and a ``sample_neighbours`` ``setting``."""

    def __init__(self, graph: Mapping[str, Sequence[str]], seed: int, setting=None):
        int_in("seed", seed, 0, note="for neighbour sampling")
        self.graph = {site: sorted(targets) for site, targets in graph.items()}
        self.incoming = in_neighbours(self.graph)
        self.seed = seed
        self.sampling = check_sample_setting(setting)

    def senders(self, site: str, round_num: int) -> list[str]:
        """The in-neighbours whose round-``round_num`` models ``site`` takes (and waits for), sorted."""
        pool = self.incoming.get(site, [])
        if self.sampling is None:
            return list(pool)
        return sample_neighbours(pool, seed=self.seed, round_index=round_num, site=site, **self.sampling)

    def receivers(self, site: str, round_num: int) -> list[str]:
        """The out-neighbours that listen to ``site`` in round ``round_num``: where it sends, sorted."""
        targets = self.graph.get(site, [])
        if self.sampling is None:
            return list(targets)
        return [t for t in targets if site in self.senders(t, round_num)]

    def out_degree(self, site: str, round_num: int) -> int:
        """How many sites receive ``site``'s model in round ``round_num``."""
        return len(self.receivers(site, round_num))

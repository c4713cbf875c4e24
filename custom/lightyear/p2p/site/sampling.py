"""Per-round sampling of neighbours that both ends of an edge compute alike (pure NumPy, no FLARE).

With the job setting ``sample_neighbours`` a site does not exchange with all its neighbours every
round but with a subset drawn anew each round. The draw is made on the RECEIVING side: each round
site i listens to a sample S_i^t of its in-neighbours (the sites that may send to it),

    S_i^t = sample_neighbours(in_neighbours(graph)[i], count or fraction, seed, round t, site i)

(:func:`lightyear.p2p.topology.sample_neighbours`), and a site j sends its round-t model to
exactly those out-neighbours i with j in S_i^t. Every site holds the whole graph (the run config
carries it) and the job seed, so a sender computes its receivers' samples and a receiver its own:
both ends agree without a message. A receiver therefore never waits for a peer that will not
send, and a sender never sends a model that would be thrown away. Sampling the receivers' inputs
(rather than letting each sender pick its targets) also fixes how many models a site aggregates
per round (the count, or ceil(fraction x in-degree)), which is what the rules' weights assume.

The draw depends only on (seed, receiving site, round): a restarted site draws the same samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lightyear.checks import int_in, number_in
from lightyear.p2p.topology import in_neighbours, sample_neighbours


def check_sample_setting(value) -> dict | None:
    """The ``sample_neighbours`` job setting as keyword arguments of ``sample_neighbours``.

    ``None``: every neighbour every round (no sampling). An integer >= 1: how many in-neighbours
    a site listens to per round (all of them if it has fewer). A float in (0, 1]: that fraction
    of its in-neighbours, rounded up (at least one). Anything else raises a ValueError naming the
    setting.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"sample_neighbours must be null, an integer >= 1 or a fraction in (0, 1], got {value!r}")
    if isinstance(value, int):
        return {"count": int_in("sample_neighbours as a count", value, 1, note="senders heard per round")}
    if isinstance(value, float):
        note = "write a count as an integer, e.g. 2"
        number_in("sample_neighbours as a fraction", value, 0.0, 1.0, low_open=True, note=note)
        return {"fraction": value}
    raise ValueError(f"sample_neighbours must be null, an integer >= 1 or a fraction in (0, 1], got {value!r}")


class RoundSampling:
    """Who sends to whom in a given round, for a graph of out-neighbours and one job seed.

    ``setting`` is the ``sample_neighbours`` value (see :func:`check_sample_setting`); ``None``
    keeps the whole graph every round.
    """

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

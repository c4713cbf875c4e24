"""Who sends to whom: the communication graph of a peer-to-peer job (pure NumPy, no FLARE import).

A graph is a ``dict[site, sorted list of OUT-neighbours]`` (undirected topologies as symmetric ones). Topologies:
``full``, ``ring`` (previous and next site in sorted order), ``none`` (each site alone), ``k_regular`` (``k``
neighbours each, connected) and ``random`` (``round(degree * n)`` directed edges, strongly connected; DeFTA's). The
same sites, topology, arguments and seed always give the same graph, whatever the order of the sites.
"""

from __future__ import annotations

import math
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from lightyear.checks import finite_number, int_in, number_in, one_of

TOPOLOGIES = ("full", "ring", "none", "k_regular", "random")
TOPOLOGY_ARGS: dict[str, tuple[str, ...]] = {
    "full": (),
    "ring": (),
    "none": (),
    "k_regular": ("k",),
    "random": ("degree",),
}
MAX_TRIES = 1000  # redraws of a random graph before giving up


def build_graph(sites: Sequence[str], topology: str = "full", seed: int = 0, **args) -> dict[str, list[str]]:
    """The graph of ``topology`` over ``sites``; a ValueError on bad input or no connected graph in MAX_TRIES draws."""
    names = _check_sites(sites)
    check_topology_args(topology, args)
    int_in("seed", seed, 0)
    n = len(names)
    if topology == "full":
        edges = {(a, b) for a in range(n) for b in range(n) if a != b}
    elif topology == "ring":
        edges = {(a, (a + s) % n) for a in range(n) for s in (-1, 1) if (a + s) % n != a}
    elif topology == "none":
        edges = set()
    elif topology == "k_regular":
        edges = _k_regular(n, args["k"], np.random.default_rng(seed))
    else:
        edges = _random_directed(n, args["degree"], np.random.default_rng(seed))
    graph = {s: [] for s in names}
    for a, b in sorted(edges):
        graph[names[a]].append(names[b])
    return {s: sorted(v) for s, v in graph.items()}


def in_neighbours(graph: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """For each site, the sorted list of sites that send to it (the reversed graph)."""
    out = {s: [] for s in graph}
    for a, targets in graph.items():
        for b in targets:
            out.setdefault(b, []).append(a)
    return {s: sorted(v) for s, v in out.items()}


def is_strongly_connected(graph: Mapping[str, Sequence[str]]) -> bool:
    """True if every site can reach every other along directed edges (True for 0 or 1 site)."""
    if len(graph) <= 1:
        return True
    start = next(iter(graph))
    return len(_reachable(graph, start)) == len(graph) and len(_reachable(in_neighbours(graph), start)) == len(graph)


def check_graph(graph: Mapping[str, Sequence[str]], sites: Sequence[str]) -> None:
    """Raise a ValueError with the fix unless ``graph`` is a strongly connected (or edgeless) graph of ``sites``."""
    names = _check_sites(sites)
    missing = sorted(set(names) - set(graph))
    unknown_keys = sorted(set(graph) - set(names))
    if missing:
        raise ValueError(
            f"sites {missing} have no entry in the graph; add one per site (an empty list if it sends to no one)"
        )
    if unknown_keys:
        raise ValueError(f"the graph has entries for unknown sites {unknown_keys}; use only the sites {names}")
    for site, targets in graph.items():
        if isinstance(targets, str) or not isinstance(targets, Sequence):
            raise ValueError(f"the neighbours of {site!r} must be a list of site names, got {targets!r}")
        if site in targets:
            raise ValueError(
                f"site {site!r} lists itself as a neighbour; remove the self-loop (a site always keeps its own model)"
            )
        unknown = sorted(set(targets) - set(names))
        if unknown:
            raise ValueError(f"the neighbours of {site!r} include unknown sites {unknown}; use only the sites {names}")
        twice = sorted(t for t, c in Counter(targets).items() if c > 1)
        if twice:
            raise ValueError(f"the neighbours of {site!r} list {twice} more than once; list each neighbour once")
    if any(graph.values()) and not is_strongly_connected(graph):
        start = names[0]
        cut = sorted(set(names) - _reachable(graph, start)) or sorted(
            set(names) - _reachable(in_neighbours(graph), start)
        )
        raise ValueError(
            f"the graph is not strongly connected: {cut} cannot exchange models "
            f"(directly or through others) with {start!r}; "
            "add edges so every site reaches every other, or use topology 'none' to train each site alone"
        )


def sample_neighbours(
    neighbours: Sequence[str],
    *,
    count: int | None = None,
    fraction: float | None = None,
    seed: int = 0,
    round_index: int = 0,
    site: str = "",
) -> list[str]:
    """``count`` (at most all) or ceil(``fraction`` * len) of ``neighbours``, sorted, fixed per (seed, site, round)."""
    if (count is None) == (fraction is None):
        raise ValueError("give exactly one of count (how many neighbours) or fraction (a share in (0, 1])")
    pool = sorted(neighbours)
    if len(set(pool)) != len(pool):
        raise ValueError(f"neighbours {pool} contain duplicates; list each neighbour once")
    if count is not None:
        int_in("count", count, 0)
        size = min(count, len(pool))
    else:
        number_in("fraction", fraction, 0.0, 1.0, low_open=True)
        size = math.ceil(fraction * len(pool))
    for name, value in (("seed", seed), ("round_index", round_index)):
        int_in(name, value, 0)
    rng = np.random.default_rng([seed, round_index, zlib.crc32(str(site).encode("utf-8"))])
    chosen = rng.choice(len(pool), size=size, replace=False) if size else []
    return sorted(pool[i] for i in chosen)


def _check_sites(sites: Sequence[str]) -> list[str]:
    names = sorted(sites)
    twice = sorted(s for s, c in Counter(names).items() if c > 1)
    if twice:
        raise ValueError(f"sites {twice} are listed more than once; list each site once")
    return names


def check_topology_args(topology: str, args: Mapping) -> None:
    """Raise a ValueError unless ``topology`` is known and ``args`` are exactly the arguments it takes (cheap)."""
    one_of("topology", topology, TOPOLOGIES)
    allowed = TOPOLOGY_ARGS[topology]
    unknown = sorted(set(args) - set(allowed))
    if unknown:
        takes = f"takes only {', '.join(allowed)}" if allowed else "takes no arguments"
        raise ValueError(f"topology {topology!r} {takes}; remove {unknown} from topology_args")
    missing = [a for a in allowed if a not in args]
    if missing:
        raise ValueError(f"topology {topology!r} needs {', '.join(missing)} in topology_args")


def _reachable(graph: Mapping[str, Sequence[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _connected(n: int, edges: set[tuple[int, int]]) -> bool:
    graph = {a: [] for a in range(n)}
    for a, b in edges:
        graph[a].append(b)
    return is_strongly_connected(graph)


def _k_regular(n: int, k, rng: np.random.Generator) -> set[tuple[int, int]]:
    """Both directions of each edge of a connected k-regular graph on n vertices (Steger and Wormald 1999)."""
    int_in("k", k, 1, note="k_regular's neighbours per site; use topology 'none' for no edges")
    if k > n - 1:
        raise ValueError(f"k_regular with {n} sites allows k <= {n - 1}, got k={k}; lower k or add sites")
    if (n * k) % 2:
        raise ValueError(
            f"no {k}-regular graph on {n} sites exists (n * k must be even); change k or the number of sites"
        )
    if k == 1 and n > 2:
        raise ValueError(f"a 1-regular graph on {n} sites is a set of disjoint pairs, never connected; use k >= 2")
    for _ in range(MAX_TRIES):
        open_ends = dict.fromkeys(range(n), k)
        adjacent: set[tuple[int, int]] = set()
        while open_ends:
            ends = sorted(open_ends)
            pairs = [(a, b) for i, a in enumerate(ends) for b in ends[i + 1 :] if (a, b) not in adjacent]
            if not pairs:
                break
            w = np.array([open_ends[a] * open_ends[b] for a, b in pairs], dtype=np.float64)
            a, b = pairs[rng.choice(len(pairs), p=w / w.sum())]
            adjacent |= {(a, b), (b, a)}
            for v in (a, b):
                open_ends[v] -= 1
                if not open_ends[v]:
                    del open_ends[v]
        if not open_ends and _connected(n, adjacent):
            return adjacent
    raise ValueError(f"found no connected {k}-regular graph on {n} sites in {MAX_TRIES} draws; try another seed or k")


def _random_directed(n: int, degree, rng: np.random.Generator) -> set[tuple[int, int]]:
    """round(degree * n) distinct directed edges drawn uniformly, redrawn until strongly connected."""
    finite_number("degree (the random topology's average out-degree)", degree)
    if n < 2:
        raise ValueError(f"random needs at least 2 sites, got {n}; use topology 'none' for a single site")
    if not 1 <= degree <= n - 1:
        raise ValueError(
            f"random with {n} sites needs 1 <= degree <= {n - 1} "
            f"(each site must send to someone, and to at most every other), got {degree}"
        )
    pairs = [(a, b) for a in range(n) for b in range(n) if a != b]
    m = min(max(round(degree * n), n), len(pairs))
    for _ in range(MAX_TRIES):
        edges = {pairs[i] for i in rng.choice(len(pairs), size=m, replace=False)}
        if _connected(n, edges):
            return edges
    raise ValueError(
        f"found no strongly connected directed graph on {n} sites with average out-degree {degree} "
        f"in {MAX_TRIES} draws; "
        f"raise degree (e.g. to {min(n - 1, math.ceil(degree) + 1)}) or try another seed"
    )

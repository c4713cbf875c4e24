"""Communication graphs: degrees, connectivity, seeding, and refusal of malformed graphs."""

import pytest

from lightyear.p2p.topology import (
    build_graph,
    check_graph,
    in_neighbours,
    is_strongly_connected,
    sample_neighbours,
)

SITES = [f"site-{i}" for i in range(1, 9)]  # 8 sites


def edges(graph):
    return sum(len(v) for v in graph.values())


def test_full_ring_none_by_hand():
    sites = ["c", "a", "b", "d"]  # order of listing does not matter: sorted a, b, c, d
    assert build_graph(sites, "full") == {
        "a": ["b", "c", "d"],
        "b": ["a", "c", "d"],
        "c": ["a", "b", "d"],
        "d": ["a", "b", "c"],
    }
    assert build_graph(sites, "ring") == {"a": ["b", "d"], "b": ["a", "c"], "c": ["b", "d"], "d": ["a", "c"]}
    assert build_graph(sites, "none") == {"a": [], "b": [], "c": [], "d": []}
    assert build_graph(["a", "b"], "ring") == {"a": ["b"], "b": ["a"]}


@pytest.mark.parametrize("n, k", [(8, 2), (8, 3), (7, 4), (8, 7), (2, 1)])
def test_k_regular_degrees_symmetry_connectivity(n, k):
    g = build_graph(SITES[:n], "k_regular", seed=1, k=k)
    assert all(len(v) == k for v in g.values())
    assert all(a in g[b] for a in g for b in g[a])  # undirected: stored both ways
    check_graph(g, SITES[:n])  # strongly connected, no self-loops or duplicates


def test_random_average_out_degree_and_strong_connectivity():
    for seed in range(5):
        g = build_graph(SITES, "random", seed=seed, degree=2.5)
        assert edges(g) == 20  # round(2.5 * 8) directed edges: average out-degree 2.5
        assert is_strongly_connected(g)
        check_graph(g, SITES)


def test_same_seed_same_graph_and_different_seeds_differ():
    for topology, args in (("random", {"degree": 2}), ("k_regular", {"k": 3})):
        a = build_graph(SITES, topology, seed=7, **args)
        assert build_graph(list(reversed(SITES)), topology, seed=7, **args) == a
        assert build_graph(SITES, topology, seed=8, **args) != a


@pytest.mark.parametrize(
    "topology, args, message",
    [
        ("ring", {"k": 2}, "'ring' takes no arguments; remove \\['k'\\]"),
        ("k_regular", {"degree": 2}, "'k_regular' takes only k; remove \\['degree'\\]"),
        ("random", {"degree": 2, "k": 2}, "'random' takes only degree; remove \\['k'\\]"),
        ("k_regular", {}, "needs k"),
        ("star", {}, "topology must be one of .*, got 'star'"),
    ],
)
def test_bad_topology_arguments_are_refused(topology, args, message):
    with pytest.raises(ValueError, match=message):
        build_graph(SITES, topology, **args)


@pytest.mark.parametrize(
    "args, message",
    [({"k": 8}, "allows k <= 7"), ({"k": 0}, r"k must be an integer >= 1 \(k_regular"), ({"k": 1}, "never connected")],
)
def test_impossible_k_regular_is_refused(args, message):
    with pytest.raises(ValueError, match=message):
        build_graph(SITES, "k_regular", **args)
    with pytest.raises(ValueError, match="n \\* k must be even"):
        build_graph(SITES[:5], "k_regular", k=3)  # 5 * 3 = 15 half-edges cannot pair up


def test_impossible_random_degree_is_refused():
    with pytest.raises(ValueError, match="1 <= degree <= 7"):
        build_graph(SITES, "random", degree=0.5)
    # 10 sites with 10 edges: strongly connected only as one directed cycle (9! of ~5.7e12 edge sets)
    with pytest.raises(ValueError, match="no strongly connected .* raise degree"):
        build_graph([f"s{i}" for i in range(10)], "random", degree=1)


def test_in_neighbours_reverse_a_directed_graph():
    g = {"a": ["b"], "b": ["c"], "c": ["a", "b"]}
    assert in_neighbours(g) == {"a": ["c"], "b": ["a", "c"], "c": ["b"]}
    assert is_strongly_connected(g)


@pytest.mark.parametrize(
    "graph, message",
    [
        ({"a": ["a", "b"], "b": ["a"]}, "lists itself.*remove the self-loop"),
        ({"a": ["x"], "b": ["a"]}, "unknown sites \\['x'\\]"),
        ({"a": ["b", "b"], "b": ["a"]}, "more than once"),
        ({"a": ["b"]}, "no entry.*add one per site"),
        ({"a": ["b"], "b": ["a"], "c": ["a"]}, "not strongly connected.*\\['c'\\].*topology 'none'"),
        ({"a": ["b"], "b": ["c"], "c": []}, "not strongly connected"),
    ],
)
def test_malformed_graphs_are_refused(graph, message):
    sites = ["a", "b"] if set(graph) <= {"a", "b"} else ["a", "b", "c"]
    with pytest.raises(ValueError, match=message):
        check_graph(graph, sites)


def test_valid_graphs_pass_check():
    check_graph({"a": ["b"], "b": ["c"], "c": ["a"]}, ["a", "b", "c"])  # a directed cycle
    check_graph({"a": [], "b": [], "c": []}, ["a", "b", "c"])  # 'none': no edges at all
    check_graph(build_graph(SITES, "full"), SITES)


def test_sample_neighbours_is_deterministic_per_seed_site_round():
    pool = [f"p{i}" for i in range(10)]
    first = sample_neighbours(pool, count=3, seed=0, round_index=4, site="a")
    assert len(first) == 3 and first == sorted(first) and set(first) <= set(pool)
    assert sample_neighbours(list(reversed(pool)), count=3, seed=0, round_index=4, site="a") == first
    others = {tuple(sample_neighbours(pool, count=3, seed=0, round_index=r, site="a")) for r in range(10)}
    assert len(others) > 1  # rounds draw differently
    assert any(sample_neighbours(pool, count=3, seed=0, round_index=4, site=s) != first for s in ("b", "c", "d"))
    assert sample_neighbours(pool, count=3, seed=1, round_index=4, site="a") != first


def test_sample_neighbours_sizes():
    pool = ["a", "b", "c", "d", "e"]
    assert len(sample_neighbours(pool, fraction=0.5)) == 3  # ceil(0.5 * 5)
    assert len(sample_neighbours(pool, fraction=0.01)) == 1
    assert sample_neighbours(pool, count=9) == pool  # capped at all of them
    assert sample_neighbours([], fraction=1.0) == []
    with pytest.raises(ValueError, match="exactly one of count"):
        sample_neighbours(pool, count=2, fraction=0.5)
    with pytest.raises(ValueError, match="fraction must be"):
        sample_neighbours(pool, fraction=0.0)


def test_topology_args_can_be_checked_without_building():
    from lightyear.p2p.topology import check_topology_args

    check_topology_args("random", {"degree": 3})
    with pytest.raises(ValueError, match="takes no arguments"):
        check_topology_args("full", {"degree": 3})

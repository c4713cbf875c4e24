"""Per-round neighbour sampling: sender and receiver compute the same edges, from the seed alone."""

import pytest

from lightyear.p2p.site.sampling import RoundSampling, check_sample_setting
from lightyear.p2p.topology import build_graph, in_neighbours

SITES = [f"site-{i}" for i in range(1, 11)]


@pytest.mark.parametrize("setting", [1, 2, 0.5, 1.0])
def test_a_site_sends_exactly_to_the_receivers_that_listen_to_it(setting):
    graph = build_graph(SITES, "random", seed=4, degree=3)
    # every site builds its own RoundSampling from the run config: nothing is shared but the graph and seed
    views = {site: RoundSampling(graph, seed=4, setting=setting) for site in SITES}
    for round_num in range(6):
        for sender in SITES:
            receivers = views[sender].receivers(sender, round_num)
            assert set(receivers) <= set(graph[sender])
            for receiver in graph[sender]:
                listens = sender in views[receiver].senders(receiver, round_num)
                assert listens == (receiver in receivers), (round_num, sender, receiver)


def test_sample_sizes_rounds_and_restarts():
    graph = build_graph(SITES, "full")
    sampling = RoundSampling(graph, seed=0, setting=3)
    draws = [tuple(sampling.senders("site-1", r)) for r in range(8)]
    assert all(len(d) == 3 and "site-1" not in d for d in draws)
    assert len(set(draws)) > 1  # a new sample each round
    # a restarted site (a new object) draws the same samples
    assert [tuple(RoundSampling(graph, 0, 3).senders("site-1", r)) for r in range(8)] == draws
    assert len(RoundSampling(graph, 0, 0.25).senders("site-1", 0)) == 3  # ceil(0.25 * 9)
    assert sum(sampling.out_degree(s, 2) for s in SITES) == 3 * len(SITES)  # every receiver hears 3


def test_no_sampling_keeps_the_graph():
    graph = build_graph(SITES, "random", seed=1, degree=2)
    sampling = RoundSampling(graph, seed=1)
    incoming = in_neighbours(graph)
    for site in SITES:
        assert sampling.senders(site, 5) == incoming[site]
        assert sampling.receivers(site, 5) == graph[site]
        assert sampling.out_degree(site, 5) == len(graph[site])


@pytest.mark.parametrize("value", [0, -1, True, 1.5, 0.0, float("nan"), "2", [2]])
def test_bad_settings_name_sample_neighbours(value):
    with pytest.raises(ValueError, match="sample_neighbours"):
        check_sample_setting(value)


def test_setting_forms():
    assert check_sample_setting(None) is None
    assert check_sample_setting(2) == {"count": 2}
    assert check_sample_setting(0.5) == {"fraction": 0.5}

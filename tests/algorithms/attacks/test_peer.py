"""An attacking peer's update arithmetic on hand-worked vectors (no FLARE)."""

import numpy as np
import pytest

from lightyear.algorithms.attacks.peer import attack_model, participants

MESH4 = {s: [t for t in ("a", "b", "c", "d") if t != s] for s in ("a", "b", "c", "d")}
START = np.array([1.0, 1.0])
HONEST = np.array([0.9, 1.1])  # own update (-0.1, 0.1)


def test_participants_of_a_full_mesh_are_the_sites_and_the_attackers():
    assert participants(MESH4, "a", ["c", "d"]) == (4, 2)


def test_participants_count_the_attackers_the_receiver_hears_not_all_of_the_job():
    # b hears a and d; of the attackers c and d it hears d alone: n = 3, m = 1
    graph = {"a": ["b"], "b": [], "c": ["d"], "d": ["a", "b"]}
    assert participants(graph, "b", ["c", "d"]) == (3, 1)
    assert participants(graph, "a", ["c", "d"]) == (2, 1)  # a hears d only
    assert participants({"d": []}, "a", ["d"]) == (2, 1)  # hears nobody: the rules stay defined


def test_on_a_ring_each_receiver_counts_the_attackers_among_its_two_senders():
    # each site hears its two predecessors; attackers s6, s7, s8 (3 of the job's sites)
    ring = {f"s{i}": [f"s{(i % 8) + 1}", f"s{((i + 1) % 8) + 1}"] for i in range(1, 9)}
    attackers = ["s6", "s7", "s8"]
    assert participants(ring, "s1", attackers) == (3, 2)  # hears s7 and s8
    assert participants(ring, "s7", attackers) == (3, 1)  # hears s5 and s6
    assert participants(ring, "s6", attackers) == (3, 1)  # hears s4 and s5: none, counted as the asking one


def test_partial_knowledge_pools_the_colluders_updates_and_sends_start_plus_the_crafted_one():
    colluder = np.array([0.5, 1.5])  # its update against this attacker's start: (-0.5, 0.5)
    sent, fields = attack_model("lie", "partial", START, HONEST, {"c": colluder}, {}, 4, 2, {"z": 0.5})
    # mean (-0.3, 0.3), sample std 0.2 sqrt2 per coordinate: mean - 0.5 * std
    np.testing.assert_allclose(sent, START + np.array([-0.3, 0.3]) - 0.5 * 0.2 * np.sqrt(2))
    assert fields["attack_known"] == 2 and fields["attack_z"] == 0.5
    assert fields["attack_honest_norm"] == pytest.approx(np.sqrt(0.02))


def test_full_knowledge_adds_the_benign_models_of_the_round():
    colluder, benign = np.array([0.5, 1.5]), np.array([1.3, 1.0])  # updates (-0.5, 0.5), (0.3, 0.0)
    sent, fields = attack_model("lie", "full", START, HONEST, {"c": colluder}, {"a": benign}, 4, 2, {"z": 1.0})
    known = np.array([[-0.1, 0.1], [-0.5, 0.5], [0.3, 0.0]])
    np.testing.assert_allclose(sent, START + known.mean(axis=0) - known.std(axis=0, ddof=1))
    assert fields["attack_known"] == 3


def test_ipm_under_full_knowledge_negates_the_benign_mean_alone():
    benign = {"a": np.array([1.3, 1.0]), "b": np.array([1.1, 1.2])}  # updates (0.3, 0), (0.1, 0.2): mean (0.2, 0.1)
    sent, fields = attack_model("ipm", "full", START, HONEST, {"c": np.array([0.0, 0.0])}, benign, 4, 1, {})
    np.testing.assert_allclose(sent, START - 4 * np.array([0.2, 0.1]))  # epsilon = n
    assert fields["attack_epsilon"] == 4
    # under partial knowledge the attackers' own updates stand in: -(1 * mean of (-0.1, 0.1) and (-1, -1))
    sent, _ = attack_model("ipm", "partial", START, HONEST, {"c": np.array([0.0, 0.0])}, {}, 4, 1, {"epsilon": 1.0})
    np.testing.assert_allclose(sent, START - np.array([-0.55, -0.45]))


def test_sign_flip_sends_the_negated_honest_update_from_the_round_start():
    sent, fields = attack_model("sf", "partial", START, HONEST, {}, {}, 4, 1, {})
    np.testing.assert_allclose(sent, [1.1, 0.9])
    assert fields["attack_known"] == 1 and fields["attack_norm"] == pytest.approx(fields["attack_honest_norm"])


def test_min_max_records_its_gamma():
    colluder = np.array([0.5, 1.5])
    sent, fields = attack_model("minmax", "partial", START, HONEST, {"c": colluder}, {}, 4, 2, {"perturbation": "unit"})
    # updates u1 = (-0.1, 0.1), u2 = (-0.5, 0.5); mean m = (-0.3, 0.3), p = -m/|m| = (1, -1)/sqrt 2.
    # On that line ||m + g p - u2|| = 0.2 sqrt 2 + g is the larger distance; the bound ||u1 - u2|| =
    # 0.4 sqrt 2 gives g = 0.2 sqrt 2, and m + g p = u1
    assert fields["attack_gamma"] == pytest.approx(0.2 * np.sqrt(2), abs=1e-4)
    np.testing.assert_allclose(sent, START + np.array([-0.1, 0.1]), atol=1e-4)


def test_an_attack_that_draws_takes_the_generator_it_is_given_and_refuses_to_draw_unseeded(monkeypatch):
    from lightyear.algorithms.attacks import catalogue
    from lightyear.algorithms.attacks.declaration import Attack, attack_rng
    from lightyear.algorithms.attacks.peer import crafted_update

    def craft(own_update, known, n, m, rng):
        return own_update + rng.normal(size=own_update.shape), {}

    table = {**catalogue.attacks(), "noisy": Attack("noisy", "noisy", craft=craft, needs_rng=True)}
    monkeypatch.setattr(catalogue, "attacks", lambda: table)
    own = np.array([1.0, 2.0])
    update, _ = crafted_update("noisy", "partial", own, [own], [], 3, 1, {}, attack_rng(3, 1, 0, 2))
    np.testing.assert_array_equal(update, own + attack_rng(3, 1, 0, 2).normal(size=2))
    with pytest.raises(ValueError, match="'noisy' draws at random and was given no generator"):
        crafted_update("noisy", "partial", own, [own], [], 3, 1, {})

"""One round of colluding attackers (the star topology's simulation), on hand-worked cases.

Case A, 3 sites, 2-D updates: site-1 benign [4, 4]; attackers site-2 [0, 0] and site-3 [2, 4].
  partial knowledge = the attackers' updates: mean [1, 2], sample std sqrt2 [1, 2] (population [1, 2]).
  LIE with z = 0.5: [1, 2] - 0.5 sqrt2 [1, 2] = [1 - sqrt2/2, 2 - sqrt2].
  Min-Max, p = -std = [-1, -2]: mean + gamma p = (1 - gamma) [1, 2]; its distances to the known
    updates are |1 - gamma| sqrt5 and (1 + gamma) sqrt5, the bound is ||[2, 4]|| = 2 sqrt5:
    gamma = 1, the update [0, 0].
  Min-Sum: 5 (1 - gamma)^2 + 5 (1 + gamma)^2 = 10 (1 + gamma^2) <= max_i sum_j ||x_i - x_j||^2
    = 20: gamma = 1 again.
  IPM, epsilon = n = 3: partial -3 [1, 2] = [-3, -6]; full (benign only) -3 [4, 4] = [-12, -12].
  SF: each attacker its own negated: site-2 [0, 0] (-0), site-3 [-2, -4].
  MR, scale = n = 3: site-3 [6, 12].
"""

import math

import numpy as np
import pytest

from lightyear.algorithms.attacks import catalogue
from lightyear.algorithms.attacks.adaptive import krum_adaptive
from lightyear.algorithms.attacks.colluding import FedCapTarget, KrumTarget, craft_round, known_sites
from lightyear.algorithms.attacks.declaration import Attack, attack_rng
from lightyear.algorithms.attacks.settings import AttackSpec
from lightyear.algorithms.attacks.updates import crafted_update, lie_z_max
from lightyear.algorithms.star.krum import krum_select

HONEST = {"site-1": np.array([4.0, 4.0]), "site-2": np.array([0.0, 0.0]), "site-3": np.array([2.0, 4.0])}
ATTACKERS = ["site-2", "site-3"]


def spec(kind, knowledge="partial", attackers=ATTACKERS, **params):
    return AttackSpec(kind, knowledge, attackers, params)


def test_lie_minmax_minsum_pool_the_attackers_updates_under_partial_knowledge():
    lie = craft_round(spec("lie", z=0.5), HONEST)
    assert lie.known == ATTACKERS and lie.n_participants == 3 and lie.attackers == ATTACKERS
    for site in ATTACKERS:  # every attacker sends the one crafted update
        np.testing.assert_allclose(lie.updates[site], [1 - math.sqrt(2) / 2, 2 - math.sqrt(2)])
    assert lie.settings == {"z": 0.5, "ddof": 1}
    for kind in ("minmax", "minsum"):
        crafted = craft_round(spec(kind), HONEST)
        assert crafted.settings["gamma"] == pytest.approx(1.0, abs=1e-4)
        np.testing.assert_allclose(crafted.updates["site-3"], [0.0, 0.0], atol=1e-4)


def test_full_knowledge_adds_the_benign_updates_and_ipm_takes_the_benign_ones_only():
    full = craft_round(spec("lie", "full"), HONEST)
    assert full.known == ["site-2", "site-3", "site-1"]
    x = np.array([[0.0, 0.0], [2.0, 4.0], [4.0, 4.0]])
    z = lie_z_max(3, 2)  # the default z for n = 3, m = 2
    np.testing.assert_allclose(full.updates["site-2"], x.mean(axis=0) - z * x.std(axis=0, ddof=1))
    assert full.settings["z"] == pytest.approx(z)
    np.testing.assert_allclose(craft_round(spec("ipm"), HONEST).updates["site-2"], [-3.0, -6.0])
    ipm_full = craft_round(spec("ipm", "full"), HONEST)
    assert ipm_full.known == ["site-1"] and ipm_full.settings == {"epsilon": 3.0}
    np.testing.assert_allclose(ipm_full.updates["site-3"], [-12.0, -12.0])


def test_sign_flip_and_model_replacement_transform_each_attackers_own_update():
    sf = craft_round(spec("sf"), HONEST)
    np.testing.assert_array_equal(sf.updates["site-3"], [-2.0, -4.0])
    np.testing.assert_array_equal(sf.updates["site-2"], [0.0, 0.0])
    mr = craft_round(spec("mr", "full"), HONEST)
    assert mr.known == ATTACKERS and mr.settings == {"scale": 3.0}
    np.testing.assert_array_equal(mr.updates["site-3"], [6.0, 12.0])
    np.testing.assert_array_equal(craft_round(spec("mr", scale=2.0), HONEST).updates["site-3"], [4.0, 8.0])


def test_an_attacker_without_a_usable_update_is_neither_crafted_for_nor_counted():
    """site-2 sent nothing: n = 2 participants, m = 1 attacker; MR's default scale is n = 2."""
    present = {s: u for s, u in HONEST.items() if s != "site-2"}
    mr = craft_round(spec("mr"), present)
    assert mr.attackers == ["site-3"] and mr.n_participants == 2
    np.testing.assert_array_equal(mr.updates["site-3"], [4.0, 8.0])
    none = craft_round(spec("sf", attackers=["site-9"]), HONEST)
    assert none.updates == {} and none.n_participants == 3


def test_a_round_that_cannot_be_crafted_raises():
    with pytest.raises(ValueError, match="n \\(participants per round\\) must be an integer >= 2"):
        craft_round(spec("sf"), {"site-3": np.array([1.0, 1.0])})


def test_known_sites_per_kind_and_knowledge():
    assert known_sites("lie", "partial", ["a"], ["b", "c"]) == ["a"]
    assert known_sites("minsum", "full", ["a"], ["c", "b"]) == ["a", "b", "c"]
    assert known_sites("sf", "full", ["a"], ["b"]) == ["a"]
    assert known_sites("ipm", "full", ["a"], ["b"]) == ["b"]
    assert known_sites("ipm", "full", ["a"], []) == ["a"]  # no benign update this round: own ones stand in
    assert known_sites("adaptive", "full", ["a"], ["b"]) == ["b"]


def test_crafted_update_reports_the_settings_in_force():
    own, known = np.array([1.0, -1.0]), np.array([[0.0, 0.0], [2.0, 4.0]])
    update, settings = crafted_update("mr", own, None, 10, 3)
    assert settings == {"scale": 10.0}
    np.testing.assert_array_equal(update, [10.0, -10.0])
    assert crafted_update("sf", own, None, 10, 3)[1] == {}
    assert crafted_update("lie", own, known, 10, 3)[1] == {"z": lie_z_max(10, 3), "ddof": 1}
    assert crafted_update("ipm", own, known, 10, 3, epsilon=2)[1] == {"epsilon": 2.0}
    assert crafted_update("minmax", own, known, 10, 3)[1]["gamma"] == pytest.approx(1.0, abs=1e-4)


# ---------------------------------------------------------------------------- adaptive (Krum)
# 1-D case of test_adaptive.py: benign 5, 3, 1, -1, -3 (mean 1), 2 attackers, n = 7, f = 2.
BENIGN_1D = {f"site-{i}": np.array([v]) for i, v in enumerate([5.0, 3.0, 1.0, -1.0, -3.0], start=1)}


def test_adaptive_under_full_knowledge_gets_a_copy_selected_by_krum():
    honest = {**BENIGN_1D, "site-6": np.array([1.0]), "site-7": np.array([0.5])}
    crafted = craft_round(spec("adaptive", "full", ["site-6", "site-7"], direction="sign"), honest, KrumTarget())
    assert crafted.known == sorted(BENIGN_1D) and crafted.settings["f"] == 2 and crafted.settings["m"] == 1
    lam = crafted.settings["lambda"]
    assert 2.9 < lam < 3.0  # lambda* = 3 (test_adaptive.py), approached from below
    np.testing.assert_allclose(crafted.updates["site-6"], [-lam])
    rows = np.vstack([*BENIGN_1D.values(), crafted.updates["site-6"], crafted.updates["site-7"]])
    assert krum_select(rows, 2)[0] >= 5  # Krum picks a crafted copy


def test_krum_adaptive_against_multi_krum_needs_a_copy_among_the_m_selected():
    """m = 2: the lowest score is b = -3's, 2 (lambda - 3)^2 + 4 for 3 <= lambda <= 5; the copies
    score (lambda - 3)^2 + (lambda - 1)^2 and come second while below the 24 of b = -1, 1 and 3
    (4 + 4 + 16 once lambda > 5): lambda* solves (lambda - 3)^2 + (lambda - 1)^2 = 24, 2 + sqrt(11)."""
    benign = np.array([[5.0], [3.0], [1.0], [-1.0], [-3.0]])
    update, lam = krum_adaptive(benign, 2, f=2, direction="sign", m=2)
    assert lam == pytest.approx(2 + math.sqrt(11), abs=13 / 1024)
    assert lam > 3.0  # beyond Krum's lambda* = 3
    assert max(krum_select(np.vstack([benign, update, update]), 2, 2)) >= 5


def test_adaptive_under_partial_knowledge_simulates_krum_on_the_attackers_own_updates():
    """Stand-in benign updates: the attackers' own, 1 and 3 (mean 2, so the copies sit at
    -lambda): n = 4 simulated, f capped at default_f(4) = 0, scores sum the 2 nearest. A copy
    scores 0 (the other copy) + (1 + lambda)^2; b = 1 scores min(4, (1 + lambda)^2) +
    (1 + lambda)^2 or more, b = 3 more still: a copy is selected for every lambda > 0, so the
    search takes max_step at once."""
    honest = {**BENIGN_1D, "site-6": np.array([1.0]), "site-7": np.array([3.0])}
    crafted = craft_round(
        spec("adaptive", attackers=["site-6", "site-7"], direction="sign", max_step=8.0), honest, KrumTarget(f=2)
    )
    assert crafted.known == ["site-6", "site-7"] and crafted.settings["f"] == 0
    assert crafted.settings["lambda"] == 8.0
    np.testing.assert_allclose(crafted.updates["site-7"], [-8.0])


def test_adaptive_needs_krum_settings_and_enough_updates():
    honest = {"site-1": np.array([1.0]), "site-2": np.array([2.0])}
    with pytest.raises(ValueError, match="needs what the job.s rule declares of itself"):
        craft_round(spec("adaptive", "full", ["site-2"]), honest)
    with pytest.raises(ValueError, match="Krum cannot be simulated on 2 updates"):
        craft_round(spec("adaptive", "full", ["site-2"]), honest, KrumTarget())


# ---------------------------------------------------------------------------- adaptive (FedCAP)
# Offsets (model sent - w^t): site-1 [1, 0], site-2 [0, 1], attacker site-3 [1, 1]. Honest
# updates: site-1 [2, 4], site-2 [3, 3], so both calibrated updates are [3, 4]: u = -[0.6, 0.8],
# T_norm 10, margin 0.02, r = 9.8: calibrated -9.8 [0.6, 0.8] = [-5.88, -7.84], and site-3's
# update (against the model it was sent) is that minus its offset: [-6.88, -8.84].
OFFSETS = {"site-1": np.array([1.0, 0.0]), "site-2": np.array([0.0, 1.0]), "site-3": np.array([1.0, 1.0])}
HONEST_2D = {"site-1": np.array([2.0, 4.0]), "site-2": np.array([3.0, 3.0]), "site-3": np.array([-1.0, 0.5])}


def test_adaptive_on_fedcap_lands_on_the_edge_of_its_norm_ball_by_hand():
    crafted = craft_round(spec("adaptive", "full", ["site-3"]), HONEST_2D, FedCapTarget(10.0, OFFSETS))
    assert crafted.known == ["site-1", "site-2"] and crafted.attackers == ["site-3"]
    np.testing.assert_allclose(crafted.updates["site-3"], [-6.88, -8.84])
    # both benign sites point the same way: no angle wins weight without undoing the harm, the far edge wins
    assert crafted.settings["radius"] == pytest.approx(9.8) and crafted.settings["angle"] == pytest.approx(math.pi)
    assert {k: crafted.settings[k] for k in ("t_norm", "margin", "direction")} == {
        "t_norm": 10.0,
        "margin": 0.02,
        "direction": "reverse",
    }
    calibrated = crafted.updates["site-3"] + OFFSETS["site-3"]  # what FedCAP's detection measures
    assert np.linalg.norm(calibrated) == pytest.approx(9.8)


def test_adaptive_on_fedcap_needs_full_knowledge_and_every_offset():
    with pytest.raises(ValueError, match="needs its calibration reference w\\^t.*use --knowledge full"):
        craft_round(spec("adaptive", "partial", ["site-3"]), HONEST_2D, FedCapTarget(10.0, OFFSETS))
    with pytest.raises(ValueError, match=r"no calibration offset for sites \['site-2'\]"):
        craft_round(
            spec("adaptive", "full", ["site-3"]),
            HONEST_2D,
            FedCapTarget(10.0, {k: v for k, v in OFFSETS.items() if k != "site-2"}),
        )


@pytest.mark.parametrize(
    ("target", "args", "message"),
    [
        (
            FedCapTarget,
            ("adaptive", "full", ["site-3"], {"max_step": 2.0}),
            "the adaptive attack on X takes no attack_max_step; it takes attack_margin, attack_direction",
        ),
        (FedCapTarget, ("adaptive", "partial", ["site-3"]), "needs its calibration reference w\\^t"),
        (
            KrumTarget,
            ("adaptive", "full", ["site-3"], {"margin": 0.1}),
            "the adaptive attack on X takes no attack_margin",
        ),
        (KrumTarget, ("adaptive", "partial", ["site-3"]), "needs at least 2 attackers"),
    ],
)
def test_the_declared_attack_refuses_what_it_cannot_run(target, args, message):
    """What Krum and FedCAP declare of the adaptive attack on them (``ATTACK``, read through their
    aggregators' ``ADAPTIVE`` and the methods' declarations)."""
    with pytest.raises(ValueError, match=message):
        target.ATTACK.check(AttackSpec(*args), "X")


def test_the_declared_attack_passes_the_other_attacks():
    assert KrumTarget.ATTACK.check(AttackSpec("minmax", "partial", ("site-3",)), "krum").kind == "minmax"


def _draws(own_update, known, n, m, rng, sigma=1.0):
    """A plugin's attack that draws at random: its own update plus noise (the mean of ``known`` for a pooled one)."""
    base = own_update if known is None else known.mean(axis=0)
    return base + rng.normal(0.0, sigma, size=base.shape), {"sigma": sigma}


@pytest.fixture
def drawing_attacks(monkeypatch):
    """The catalogue with two plugin attacks that draw: ``noisy`` on each attacker's own update,
    ``noisy_mean`` on the pooled updates."""
    table = {
        **catalogue.attacks(),
        "noisy": Attack("noisy", "own update plus noise", ("sigma",), _draws, needs_rng=True),
        "noisy_mean": Attack("noisy_mean", "mean plus noise", ("sigma",), _draws, needs_known=True, needs_rng=True),
    }
    monkeypatch.setattr(catalogue, "attacks", lambda: table)


def test_an_attack_that_draws_gets_a_generator_from_the_jobs_seed_the_round_and_the_attacker(drawing_attacks):
    crafted = craft_round(spec("noisy", sigma=0.5), HONEST, seed=7, round_num=3)
    for index, site in enumerate(ATTACKERS):  # each attacker its own generator: its index among the attackers
        np.testing.assert_array_equal(
            crafted.updates[site], HONEST[site] + attack_rng(7, 3, index).normal(0.0, 0.5, size=2)
        )
    assert crafted.settings == {"sigma": 0.5}
    again = craft_round(spec("noisy", sigma=0.5), HONEST, seed=7, round_num=3)
    assert all(np.array_equal(again.updates[s], crafted.updates[s]) for s in ATTACKERS)  # the same job, the same draws
    for other in ({"seed": 8, "round_num": 3}, {"seed": 7, "round_num": 4}):
        moved = craft_round(spec("noisy", sigma=0.5), HONEST, **other)
        assert not np.array_equal(moved.updates["site-3"], crafted.updates["site-3"])
    pooled = craft_round(spec("noisy_mean"), HONEST, seed=7, round_num=3)  # one update for all: the first's draw
    expected = np.array([1.0, 2.0]) + attack_rng(7, 3, 0).normal(0.0, 1.0, size=2)
    assert all(np.array_equal(pooled.updates[s], expected) for s in ATTACKERS)
    with pytest.raises(ValueError, match="'noisy' draws at random: give craft_round the job's seed and the round"):
        craft_round(spec("noisy"), HONEST)


@pytest.mark.parametrize("kind", ["sf", "mr", "lie", "minmax", "minsum", "ipm"])
def test_the_toolkits_attacks_draw_nothing_from_the_seed(kind):
    plain, seeded = craft_round(spec(kind), HONEST), craft_round(spec(kind), HONEST, seed=5, round_num=2)
    assert plain.settings == seeded.settings
    assert all(np.array_equal(plain.updates[s], seeded.updates[s]) for s in ATTACKERS)

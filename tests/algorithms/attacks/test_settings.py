import pytest

from lightyear.algorithms.attacks.settings import AttackSpec, check_params


def test_a_valid_spec_keeps_given_parameters_and_adaptive_defaults():
    spec = AttackSpec("adaptive", "full", ["site-7", "site-8"], {"margin": 0.05})
    assert spec.attackers == ("site-7", "site-8")
    assert spec.param("margin") == 0.05
    assert spec.param("direction") == "reverse"
    assert spec.is_attacker("site-8") and not spec.is_attacker("site-1")


@pytest.mark.parametrize(
    "args, message",
    [
        (("bogus",), "unknown attack 'bogus'; choose one of lf, sf, mr"),
        (("sf", "omniscient"), "unknown knowledge 'omniscient'; choose one of partial, full"),
        (("sf", "partial", ["a", "a"]), "distinct site names"),
        (("sf", "partial", ["a"], {"scale": 2}), "attack 'sf' takes no setting attack_scale; it takes none"),
        (("mr", "partial", ["a"], {"scale": 0}), "attack_scale must be a finite number > 0"),
        (("mr", "partial", ["a"], {"scale": True}), "attack_scale must be a finite number > 0"),
        (("minmax", "partial", ["a"], {"perturbation": "up"}), "attack_perturbation must be one of std, unit, sign"),
        (("adaptive", "partial", ["a"], {"margin": 1.0}), "attack_margin must be a number in [0, 1)"),
        (("lie", "partial", ["a"], {"ddof": 2}), "attack_ddof must be 0 or 1"),
        (("ipm", "partial", ["a"], {"epsilon": float("nan")}), "attack_epsilon must be a finite number > 0"),
    ],
)
def test_bad_settings_are_named_with_the_allowed_values(args, message):
    with pytest.raises(ValueError, match=None) as err:
        AttackSpec(*args)
    assert message in str(err.value)


def test_lie_z_may_be_negative_and_adaptive_search_bounds_may_stay_unset():
    check_params("lie", {"z": -0.5})
    check_params("adaptive", {"max_step": None, "tol": None})

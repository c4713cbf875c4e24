"""The shared settings checks: what each accepts and refuses, worked by hand at the boundaries."""

import math

import pytest

from lightyear import checks

NOT_NUMBERS = [True, False, None, "1", [1], {"a": 1}]


@pytest.mark.parametrize("value", [*NOT_NUMBERS, 1.0, 2.5])
def test_integer_refuses_bools_floats_and_strings(value):
    with pytest.raises(ValueError, match=r"^count must be an integer, got "):
        checks.integer("count", value)


@pytest.mark.parametrize("value", [-3, 0, 7])
def test_integer_takes_any_whole_number(value):
    assert checks.integer("count", value) == value


def test_int_in_checks_both_ends():
    assert checks.int_in("k", 2, 2, 4) == 2
    assert checks.int_in("k", 4, 2, 4) == 4
    for bad in (1, 5, True, 3.0):
        with pytest.raises(ValueError, match=r"k must be an integer in \[2, 4\], got "):
            checks.int_in("k", bad, 2, 4)


def test_int_in_without_an_upper_end_and_its_note():
    assert checks.int_in("seed", 10**12, 0) == 10**12
    with pytest.raises(ValueError, match=r"seed must be an integer >= 0 \(for sampling\), got -1$"):
        checks.int_in("seed", -1, 0, note="for sampling")


def test_positive_int():
    assert checks.positive_int("rounds", 1) == 1
    for bad in (0, -1, True, 1.0, "2"):
        with pytest.raises(ValueError, match="rounds must be a positive integer, got "):
            checks.positive_int("rounds", bad)


@pytest.mark.parametrize("value", [*NOT_NUMBERS, math.nan, math.inf, -math.inf])
def test_finite_number_refuses_bools_nan_and_infinity(value):
    with pytest.raises(ValueError, match="x must be a finite number"):
        checks.finite_number("x", value)


def test_finite_number_gives_a_float():
    assert checks.finite_number("x", -2) == -2.0 and isinstance(checks.finite_number("x", 3), float)


def test_number_in_closed_ends_take_the_boundaries():
    assert checks.number_in("tau", 0, 0.0, 1.0) == 0.0
    assert checks.number_in("tau", 1, 0.0, 1.0) == 1.0
    for bad in (-1e-9, 1.0000001, math.nan, True):
        with pytest.raises(ValueError, match=r"tau must be a number in \[0, 1\], got "):
            checks.number_in("tau", bad, 0.0, 1.0)


def test_number_in_open_ends_refuse_the_boundaries():
    assert checks.number_in("gamma", 1.0, 0.0, 1.0, low_open=True) == 1.0
    with pytest.raises(ValueError, match=r"gamma must be a number in \(0, 1\], got 0"):
        checks.number_in("gamma", 0, 0.0, 1.0, low_open=True)
    with pytest.raises(ValueError, match=r"floor must be a number in \[0, 1\), got 1.0"):
        checks.number_in("floor", 1.0, 0.0, 1.0, high_open=True)
    assert checks.number_in("floor", 0.999, 0.0, 1.0, high_open=True) == 0.999


def test_number_in_one_sided():
    assert checks.number_in("ratio", 1, 1.0) == 1.0
    with pytest.raises(ValueError, match=r"ratio must be a number >= 1 \(or null: no cap\), got 0.5"):
        checks.number_in("ratio", 0.5, 1.0, note="or null: no cap")
    with pytest.raises(ValueError, match=r"damage must be a number > 1, got inf"):
        checks.number_in("damage", math.inf, 1.0, low_open=True)
    with pytest.raises(ValueError, match=r"cap must be a number < 3, got 3"):
        checks.number_in("cap", 3, high=3.0, high_open=True)
    with pytest.raises(ValueError, match=r"any must be a number \(finite\), got nan"):
        checks.number_in("any", math.nan)


def test_non_negative_and_positive_number():
    assert checks.non_negative("mu", 0) == 0.0
    assert checks.positive_number("lr", 1e-12) == 1e-12
    with pytest.raises(ValueError, match=r"mu must be a number >= 0, got -0.1"):
        checks.non_negative("mu", -0.1)
    with pytest.raises(ValueError, match=r"lr must be a number > 0, got 0"):
        checks.positive_number("lr", 0)
    with pytest.raises(ValueError, match=r"lr must be a number > 0, got inf"):
        checks.positive_number("lr", math.inf)


@pytest.mark.parametrize("value", [0, 1, "true", None])
def test_boolean_takes_only_true_and_false(value):
    with pytest.raises(ValueError, match=r"send must be true or false \(a flag\), got "):
        checks.boolean("send", value, note="a flag")


def test_boolean_gives_the_value_back():
    assert checks.boolean("send", True) is True and checks.boolean("send", False) is False


@pytest.mark.parametrize("value", ["", None, 3, ["a"]])
def test_non_empty_string_refuses(value):
    with pytest.raises(ValueError, match="attack_id must be a non-empty string, got "):
        checks.non_empty_string("attack_id", value)


def test_one_of_names_the_allowed_values():
    assert checks.one_of("loss", "mse", ("ce", "mse")) == "mse"
    for bad in ("MSE", None, ["ce"]):
        with pytest.raises(ValueError, match=r"loss must be one of ce, mse, got "):
            checks.one_of("loss", bad, ("ce", "mse"))


def test_string_list():
    assert checks.string_list("sites", []) == [] and checks.string_list("sites", ["a", "b"]) == ["a", "b"]
    for bad in ("a", ("a",), ["a", 1], None):
        with pytest.raises(ValueError, match="sites must be a JSON list of strings, got "):
            checks.string_list("sites", bad)


def test_mapping():
    assert checks.mapping("params", {}) == {}
    for bad in (None, [], "{}"):
        with pytest.raises(ValueError, match=r"params must be a JSON object \(of attack parameters\), got "):
            checks.mapping("params", bad, note="of attack parameters")


def test_positive_seconds_has_a_floor_of_one_second():
    assert checks.positive_seconds("timeout", 1) == 1.0
    assert checks.positive_seconds("timeout", 0.5, minimum=0.1) == 0.5
    for bad in (0.99, math.inf, math.nan, True, "5"):
        with pytest.raises(ValueError, match="timeout must be a number of seconds >= 1, got "):
            checks.positive_seconds("timeout", bad)


class CommandInputError(ValueError):
    pass


def test_raising_turns_a_check_into_the_callers_error():
    with pytest.raises(CommandInputError, match=r"^--gpus must be an integer >= 0, got -1$"):
        with checks.raising(CommandInputError):
            checks.int_in("--gpus", -1, 0)
    with checks.raising(CommandInputError):
        assert checks.int_in("--gpus", 0, 0) == 0

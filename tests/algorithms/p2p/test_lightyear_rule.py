"""LIGHTYEAR's round decision as one pure function, on one-number models assessed by hand."""

import numpy as np
import pytest

from assessments import GOOD, assessment
from lightyear.algorithms.p2p.decayed_update import decayed_mean_update
from lightyear.algorithms.p2p.lightyear_rule import Rule, decide
from lightyear.algorithms.p2p.validation_bounds import Held


def model(value):
    return {"w": np.array([float(value)])}


def by_value(table):
    """assess(weights) from a table w -> (errors of four samples); losses 0.2 where right, 2 where wrong."""

    calls = []

    def assess(weights):
        w = round(float(weights["w"][0]), 6)
        calls.append(w)
        if w not in table:
            raise ValueError(f"no model at {w}")
        errors = np.asarray(table[w], dtype=np.float64)
        return assessment(np.where(errors > 0, 2.0, 0.2), errors)

    return assess, calls


def test_the_paper_rule_is_eq_17_and_18_as_published():
    # own and a, b right on every sample (A = 1); c wrong on all (A^Acc = 0, A^Conf = 1, A^ECE = 1: A = 2/3 < 0.75)
    assess, _ = by_value({0.0: [0] * 4, 1.0: [0] * 4, 3.0: [0] * 4, 9.0: [1] * 4})
    received = {"a": model(1.0), "b": model(3.0), "c": model(9.0)}
    decision = decide(model(0.0), received, 2, assess, Rule(gamma=0.9, aggregation="paper"))
    assert decision.selected == decision.adopted == ["a", "b"] and decision.step == pytest.approx(0.81)
    expected = decayed_mean_update(model(0.0), [received["a"], received["b"]], 0.9, 2)
    np.testing.assert_allclose(decision.weights["w"], expected["w"])  # 0.81 * 2 = 1.62
    assert decision.scores["c"].score == pytest.approx(2 / 3) and decision.held is None


def test_the_validated_rule_adopts_what_passes_and_carries_its_start_and_anchor():
    # a at 1 is right everywhere; the aggregate 0.5 * 1 = 0.5 too: adopted, one pass beyond scoring
    assess, calls = by_value({0.0: [0] * 4, 1.0: [0] * 4, 0.5: [0] * 4})
    decision = decide(model(0.0), {"a": model(1.0)}, 0, assess, Rule())
    assert decision.adopted == ["a"] and decision.weights["w"][0] == pytest.approx(0.5)
    assert calls == [0.0, 1.0, 0.5] and decision.evaluations == 1
    assert decision.held.start.losses.tolist() == GOOD and decision.held.anchor.losses.tolist() == GOOD


def test_a_model_that_breaks_scoring_is_refused_and_the_rest_decided():
    assess, _ = by_value({0.0: [0] * 4, 1.0: [0] * 4, 0.5: [0] * 4})  # nothing at 7: assessing it raises
    decision = decide(model(0.0), {"a": model(1.0), "bad": model(7.0)}, 0, assess, Rule())
    assert decision.adopted == ["a"] and "no model at 7" in decision.rejected["bad"] and "bad" not in decision.scores


def test_until_the_own_model_clears_the_skill_floor_the_site_trains_alone():
    assess, _ = by_value({0.0: [1, 1, 0, 0], 1.0: [0] * 4})  # own skill 0.5 < 0.6
    decision = decide(model(0.0), {"a": model(1.0)}, 0, assess, Rule(tau=0.0, skill_floor=0.6))
    assert decision.warming_up and decision.selected == [] and decision.weights["w"][0] == 0.0


def test_the_aggregate_is_judged_against_the_round_start_the_site_carries():
    assess, _ = by_value({0.0: [0] * 4, 1.0: [0] * 4, 0.5: [0] * 4})  # the aggregate 0.5: losses 0.2 everywhere
    assert decide(model(0.0), {"a": model(1.0)}, 0, assess, Rule()).adopted == ["a"]  # no start: the own model
    held = Held().after(assessment(GOOD), assessment(GOOD))
    assert decide(model(0.0), {"a": model(1.0)}, 0, assess, Rule(), held).adopted == ["a"]
    # a start whose losses were 0.01 on every sample: 0.19 more on each is significant, however few samples
    held = Held().after(assessment([0.01] * 4), assessment([0.01] * 4))
    decision = decide(model(0.0), {"a": model(1.0)}, 0, assess, Rule(), held)
    assert decision.adopted == [] and "significantly above" in decision.excluded["a"]
    assert decision.weights["w"][0] == 0.0


def test_known_assessments_are_taken_instead_of_a_pass():
    assess, calls = by_value({0.0: [0] * 4, 1.0: [0] * 4, 0.5: [0] * 4})
    own, peer = model(0.0), model(1.0)
    known = {id(own): assess(own), id(peer): assess(peer)}
    calls.clear()
    assert decide(own, {"a": peer}, 0, assess, Rule(), known=known).adopted == ["a"] and calls == [0.5]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"tau": 2}, "tau"),
        ({"gamma": 0}, "gamma"),
        ({"third_term": "x"}, "third_term"),
        ({"aggregation": "mean"}, "aggregation"),
    ],
)
def test_bad_rule_settings_are_refused_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Rule(**kwargs)

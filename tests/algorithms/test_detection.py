"""Detection metrics on hand-made labellings.

Round A: evaluated s1..s5, malicious {s1, s2}, labelled malicious {s1, s3}:
  TP = 1 (s1), FN = 1 (s2), FP = 1 (s3), TN = 2 (s4, s5)
  DAcc = (1 + 2) / 5 = 3/5, FPR = 1 / (1 + 2) = 1/3, FNR = 1 / (1 + 1) = 1/2.
Round B: evaluated s1, s4, s5 (s2 sent nothing), labelled {s1}: TP 1, TN 2, FP 0, FN 0.
Pooled A + B: TP 2, FP 1, TN 4, FN 1: DAcc 6/8, FPR 1/5, FNR 1/3 (not the mean of the ratios:
FNR's per-round mean would be (1/2 + 0) / 2 = 1/4).
"""

import math

import pytest

from lightyear.algorithms.detection import DetectionCounts, detection_counts, pool

EVALUATED = ["s1", "s2", "s3", "s4", "s5"]


def round_a():
    return detection_counts({"s1", "s2"}, EVALUATED, {"s1", "s3"})


def round_b():
    return detection_counts({"s1", "s2"}, ["s1", "s4", "s5"], ["s1"])


def test_counts_and_ratios_by_hand():
    c = round_a()
    assert (c.tp, c.fp, c.tn, c.fn) == (1, 1, 2, 1)
    assert c.evaluated == 5
    assert c.dacc == pytest.approx(3 / 5)
    assert c.fpr == pytest.approx(1 / 3)
    assert c.fnr == pytest.approx(1 / 2)


def test_malicious_senders_not_evaluated_are_left_out():
    c = round_b()
    assert (c.tp, c.fp, c.tn, c.fn) == (1, 0, 2, 0)
    assert (c.dacc, c.fpr, c.fnr) == (1.0, 0.0, 0.0)


def test_pool_sums_counts_then_takes_ratios():
    total = pool([round_a(), round_b()])
    assert total == DetectionCounts(tp=2, fp=1, tn=4, fn=1)
    assert total.dacc == pytest.approx(6 / 8)
    assert total.fpr == pytest.approx(1 / 5)
    assert total.fnr == pytest.approx(1 / 3)
    assert round_a() + round_b() == total
    assert pool([]) == DetectionCounts()


def test_zero_denominators_give_nan():
    no_attacker = detection_counts(set(), ["s1", "s2"], set())
    assert no_attacker.dacc == 1.0 and no_attacker.fpr == 0.0 and math.isnan(no_attacker.fnr)
    only_attackers = detection_counts({"s1"}, ["s1"], set())
    assert math.isnan(only_attackers.fpr) and only_attackers.fnr == 1.0 and only_attackers.dacc == 0.0
    nothing = DetectionCounts()
    assert math.isnan(nothing.dacc) and math.isnan(nothing.fpr) and math.isnan(nothing.fnr)


def test_flagged_must_have_been_evaluated():
    with pytest.raises(ValueError, match=r"flagged senders \['s9'\] were not evaluated"):
        detection_counts({"s1"}, EVALUATED, {"s1", "s9"})


def test_a_single_string_is_refused():
    with pytest.raises(ValueError, match="malicious must be a collection of sender names.*'site-1'"):
        detection_counts("site-1", ["site-1", "site-2"], set())


@pytest.mark.parametrize("kw", [{"tp": -1}, {"fn": 1.5}, {"fp": True}])
def test_counts_must_be_non_negative_integers(kw):
    with pytest.raises(ValueError, match="must be an integer count >= 0"):
        DetectionCounts(**kw)


def test_pool_refuses_other_things():
    with pytest.raises(ValueError, match="pool takes DetectionCounts, got dict"):
        pool([round_a(), {"tp": 1}])

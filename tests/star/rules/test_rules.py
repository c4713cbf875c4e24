"""The star aggregators as components, on small hand-made result sets: decisions, state kept
across rounds, and settings checked when the component is built."""

import json

import numpy as np
import pytest
from nvflare.apis.fl_context import FLContext

from lightyear.star.rules.afa import AfaAggregator
from lightyear.star.rules.asmr import AsmrAggregator
from lightyear.star.rules.cfl import CflAggregator
from lightyear.star.rules.fedcap import FedCapAggregator
from lightyear.star.rules.krum import KrumAggregator

CTX = FLContext()


def model(*xs):
    return {"w": np.array(xs, dtype=np.float32), "count": np.array(3, dtype=np.int64)}


def results(models, n=10.0):
    return {s: {"weights": m, "num_samples": n} for s, m in models.items()}


GLOBAL = model(0.0, 0.0, 0.0)


def test_krum_keeps_the_model_nearest_the_others_and_multi_krum_averages_m():
    models = {
        "a": model(1, 0, 0),
        "b": model(1.1, 0, 0),
        "c": model(0.9, 0.1, 0),
        "d": model(-5, 5, 5),
        "e": model(1, 0.05, 0),
    }
    agg = KrumAggregator()  # default_f(5) = 1
    decision = agg.aggregate(GLOBAL, results(models), 0, CTX)
    kept = decision.kept
    assert len(kept) == 1 and kept[0] != "d"
    np.testing.assert_array_equal(decision.weights["w"], models[kept[0]]["w"])
    multi = KrumAggregator(f=1, m=3)
    decision = multi.aggregate(GLOBAL, results(models), 1, CTX)
    assert "d" in decision.excluded and len(decision.kept) == 3 and decision.details["f"] == 1
    np.testing.assert_allclose(
        decision.weights["w"], np.mean([models[s]["w"] for s in decision.kept], axis=0), rtol=1e-6
    )


def test_krum_settings_are_checked_at_build_and_against_the_sites():
    for bad in ({"f": -1}, {"f": 1.5}, {"m": 0}, {"m": True}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            KrumAggregator(**bad)
    assert KrumAggregator().check_sites(3) == ""  # default_f(3) = 0
    assert "n > 2f + 2" in KrumAggregator(f=1).check_sites(4)


def test_afa_block_outlives_the_round_and_is_in_the_state():
    good = {s: model(1.0 + 0.01 * k, 1.0, 1.0 - 0.01 * k) for k, s in enumerate("abcd")}
    agg = AfaAggregator()
    rounds_to_block = None
    for r in range(10):
        decision = agg.aggregate(GLOBAL, results({**good, "e": model(-3, -3, -3)}), r, CTX)
        assert "e" not in decision.kept
        if decision.details["newly_blocked"]:
            rounds_to_block = r + 1
            break
    # Beta(3, 3 + k) puts P(p < 0.5) above 0.95 after k = 6 bad rounds
    assert rounds_to_block == 6
    state = json.loads(json.dumps(agg.state()))
    assert state["reputation"]["blocked"] == ["e"] and state["reputation"]["beta"]["e"] == 9.0
    assert agg.removed_sites() == ["e"]  # shown as `removed` in show_stats
    # the next round e sends a perfectly good model: it is still ignored
    decision = agg.aggregate(GLOBAL, results({**good, "e": model(1.0, 1.0, 1.0)}), 6, CTX)
    assert decision.details["ignored_blocked"] == ["e"] and "e" not in decision.details["weights"]
    out = decision.weights
    np.testing.assert_allclose(out["w"], np.mean([m["w"] for m in good.values()], axis=0), rtol=1e-6)
    assert out["count"] == GLOBAL["count"]


def test_afa_settings_are_checked_at_build():
    for bad, name in (
        ({"xi0": 0}, "xi0"),
        ({"delta_xi": -1}, "delta_xi"),
        ({"alpha0": 0}, "alpha0"),
        ({"block_threshold": 1.0}, "block_threshold"),
    ):
        with pytest.raises(ValueError, match=name):
            AfaAggregator(**bad)


def test_asmr_flags_the_outlier_and_min_gap_can_keep_everyone():
    models = {"a": model(1, 0, 0), "b": model(1, 0.1, 0), "c": model(1, 0, 0.1), "d": model(0, 1, 0)}
    agg = AsmrAggregator()
    decision = agg.aggregate(GLOBAL, results(models), 0, CTX)
    assert decision.excluded == ["d"]
    np.testing.assert_allclose(decision.weights["w"], np.mean([models[s]["w"] for s in "abc"], axis=0), rtol=1e-6)
    lenient = AsmrAggregator(min_gap=100.0)
    assert lenient.aggregate(GLOBAL, results(models), 0, CTX).excluded == []
    with pytest.raises(ValueError, match="min_gap"):
        AsmrAggregator(min_gap=-0.1)


def test_cfl_leaves_the_minority_cluster_out():
    models = {
        "a": model(1, 1, 0),
        "b": model(1, 0.9, 0),
        "c": model(0.9, 1, 0.1),
        "d": model(-1, -1, 0),
        "e": model(-1, -0.9, 0),
    }
    agg = CflAggregator()
    decision = agg.aggregate(GLOBAL, results(models), 0, CTX)
    assert decision.kept == ["a", "b", "c"] and decision.excluded == ["d", "e"]
    np.testing.assert_allclose(decision.weights["w"], np.mean([models[s]["w"] for s in "abc"], axis=0), rtol=1e-6)


def test_fedcap_customises_per_site_removes_for_good_and_saves_its_state():
    agg = FedCapAggregator(alpha=10.0, phi=0.1, t_norm=10.0)
    sites = ["a", "b", "c"]
    first = agg.site_models(sites, GLOBAL, 0, CTX)
    assert sorted(first) == sites and all(np.array_equal(m["w"], GLOBAL["w"]) for m in first.values())
    trained = {"a": model(1, 0, 0), "b": model(0, 1, 0), "c": model(20, 20, 20)}  # ||c - w^0|| = 34.6 > 10
    decision = agg.aggregate(GLOBAL, results(trained), 0, CTX)
    assert decision.details["removed_now"] == ["c"] and decision.kept == ["a", "b"]

    second = agg.site_models(sites, GLOBAL, 1, CTX)
    assert sorted(second) == ["a", "b"]  # c is sent nothing more
    # a's own model weighs phi = 0.1, b's 0.9 (b is the only other site in the pool)
    np.testing.assert_allclose(second["a"]["w"], [0.1, 0.9, 0], rtol=1e-6)
    np.testing.assert_allclose(second["b"]["w"], [0.9, 0.1, 0], rtol=1e-6)
    assert second["a"]["count"] == GLOBAL["count"]
    # a removed site's result is ignored whatever it sends
    decision = agg.aggregate(
        GLOBAL, results({"a": model(0.2, 0.9, 0), "b": model(0.9, 0.2, 0), "c": model(0.5, 0.5, 0)}), 1, CTX
    )
    assert decision.excluded == ["c"] and decision.kept == ["a", "b"]
    np.testing.assert_allclose(
        decision.weights["w"], [0.5, 0.5, 0], rtol=1e-6
    )  # Eq. 6 over the round-0 pool, equal counts

    state = json.loads(json.dumps(agg.state()))
    assert state["fedcap"]["removed"] == {"c": 0}
    assert agg.removed_sites() == ["c"]  # shown as `removed` in show_stats
    assert state["fedcap"]["round"] == 2 and state["fedcap"]["pool"] == ["a", "b"]
    arrays = agg.state_arrays()  # w^t and the recovered pool; the calibrated pool is recovered - w^t
    assert sorted(arrays) == ["global", "recovered/a", "recovered/b"]
    np.testing.assert_array_equal(arrays["global"], agg.fedcap.global_vector)
    for s in ("a", "b"):
        np.testing.assert_array_equal(arrays[f"recovered/{s}"], agg.fedcap.recovered[s])
        np.testing.assert_allclose(arrays[f"recovered/{s}"] - arrays["global"], agg.fedcap.calibrated[s])


def test_fedcap_settings_are_checked_at_build():
    for bad, name in (({"alpha": -1}, "alpha"), ({"phi": 1.5}, "phi"), ({"t_norm": 0}, "t_norm")):
        with pytest.raises(ValueError, match=name):
            FedCapAggregator(**bad)


def test_the_controller_saves_the_rule_state_with_the_run(tmp_path):
    from lightyear.star.controller import StarController

    agg = FedCapAggregator()
    agg.site_models(["a", "b"], GLOBAL, 0, CTX)
    decision = agg.aggregate(GLOBAL, results({"a": model(1, 0, 0), "b": model(0, 1, 0)}), 0, CTX)
    ctrl = StarController(rounds=1)
    ctrl.aggregator, ctrl._run_dir = agg, str(tmp_path)
    ctrl._keep_decision(0, decision)  # the controller keeps the rule's decisions
    ctrl._save_round(decision.weights)
    saved = json.loads((tmp_path / "aggregator_state.json").read_text())
    with np.load(tmp_path / "aggregator_state.npz") as arrays:
        assert sorted(arrays.files) == ["global", "recovered/a", "recovered/b"]
    assert saved["fedcap"]["pool"] == ["a", "b"] and saved["history"][0]["kept"] == ["a", "b"]
    assert (tmp_path / "global_model.npz").exists()

"""The star topology's simulated adversary: the server replaces the attackers' results with crafted
ones before its checks, in the attackers' own form, and a failure never stops the run.

Hand-worked case: global model g = {"w": [1, 1] (float32), "n": 7 (a counter)}; site-1 sends the
model [2, 1] (update [1, 0]), site-2 the model [1, 3] (update [0, 2]), attacker site-3 the
difference [2, 2] (WEIGHT_DIFF). Sign flipping: site-3 sends the difference [-2, -2], which the
server adds to g: [-1, -1]. Model replacement (scale n = 3): [6, 6], the model [7, 7].
"""

import json
import re

import numpy as np
import pytest
from nvflare.apis.dxo import DataKind, from_shareable
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import make_reply
from nvflare.apis.signal import Signal

from lightyear.algorithms.attacks import catalogue
from lightyear.algorithms.attacks.declaration import Attack, attack_rng
from lightyear.star.adversary import SimulatedAdversary, crafted_data, update_vector
from lightyear.star.aggregator import FedAvgAggregator
from lightyear.star.controller import StarController
from lightyear.star.messages import result_data
from lightyear.star.rules.fedcap import FedCapAggregator
from lightyear.star.rules.krum import KrumAggregator

from flare_fakes import StarServerEngine, answer_star_task, train_task_with

G = {"w": np.array([1.0, 1.0], dtype=np.float32), "n": np.array(7, dtype=np.int64)}


def weights(w, n=7, dtype=np.float32):
    return {"w": np.array(w, dtype=dtype), "n": np.array(n, dtype=np.int64)}


def round_results(attacker=None):
    return train_task_with(
        {
            "site-1": result_data(weights([2.0, 1.0]), 10, 0),
            "site-2": result_data(weights([1.0, 3.0]), 10, 0),
            "site-3": attacker
            if attacker is not None
            else result_data(weights([2.0, 2.0], n=0), 10, 0, DataKind.WEIGHT_DIFF),
        }
    )


def with_adversary(kind, knowledge="partial", attackers=("site-3",), aggregator=None, **params):
    ctrl = StarController(rounds=1, adversary_id="adversary", max_abs_weight=100.0)
    ctrl.aggregator = aggregator or FedAvgAggregator()
    assert ctrl._bind_adversary(SimulatedAdversary(kind, knowledge, list(attackers), params)) == ""
    return ctrl


def test_sign_flip_replaces_the_attackers_result_before_the_checks():
    ctrl = with_adversary("sf")
    kept = ctrl._collect(round_results(), G, round_num=0, fl_ctx=FLContext())
    np.testing.assert_array_equal(kept["site-3"]["weights"]["w"], [-1.0, -1.0])
    assert kept["site-3"]["weights"]["w"].dtype == np.float32 and int(kept["site-3"]["weights"]["n"]) == 7
    np.testing.assert_array_equal(kept["site-1"]["weights"]["w"], [2.0, 1.0])  # benign results untouched
    assert kept["site-3"]["num_samples"] == 10.0
    assert ctrl._attack == {
        "round": 0,
        "kind": "sf",
        "knowledge": "partial",
        "participants": 3,
        "crafted": ["site-3"],
        "absent": [],
        "known": ["site-3"],
        "settings": {},
    }


def test_the_crafted_result_keeps_the_attackers_form_and_dtype():
    ctrl = with_adversary("mr")
    raw = {
        "site-1": result_data(weights([2.0, 1.0]), 10, 0),
        "site-3": result_data(weights([3.0, 3.0], dtype=np.float64), 4, 0),
    }
    out, record = ctrl.adversary.rewrite(raw, {s: G for s in raw}, G, 0, None)
    dxo = from_shareable(out["site-3"])
    assert dxo.data_kind == DataKind.WEIGHTS and dxo.data["w"].dtype == np.float64
    np.testing.assert_array_equal(dxo.data["w"], [5.0, 5.0])  # g + 2 x [2, 2] (n = 2 participants)
    assert record["settings"] == {"scale": 2.0}
    diff = result_data(weights([2.0, 2.0], n=0), 10, 0, DataKind.WEIGHT_DIFF)
    out, _ = ctrl.adversary.rewrite({"site-1": raw["site-1"], "site-3": diff}, {"site-1": G, "site-3": G}, G, 0, None)
    dxo = from_shareable(out["site-3"])
    assert dxo.data_kind == DataKind.WEIGHT_DIFF and dxo.data["w"].dtype == np.float32 and int(dxo.data["n"]) == 0
    np.testing.assert_array_equal(dxo.data["w"], [4.0, 4.0])
    assert out["site-1"] is raw["site-1"]


def test_updates_are_taken_against_the_model_each_site_was_sent():
    """A customising rule (FedCAP) sends site-3 [0, 0]: its model [1, 1] is the update [1, 1],
    sign-flipped to the model [-1, -1]."""
    ctrl = with_adversary("sf")
    sent = {"site-3": {"w": np.zeros(2, dtype=np.float32), "n": np.array(7)}}
    task = train_task_with(
        {"site-1": result_data(weights([2.0, 1.0]), 10, 0), "site-3": result_data(weights([1.0, 1.0]), 10, 0)}
    )
    kept = ctrl._collect(task, G, round_num=0, fl_ctx=FLContext(), sent=sent)
    np.testing.assert_array_equal(kept["site-3"]["weights"]["w"], [-1.0, -1.0])


def test_pure_conversions_between_models_and_update_vectors():
    keys = ["a", "b"]
    model = {"a": np.array([[2.0, 3.0]], dtype=np.float32), "b": np.array([1.0]), "c": np.array(5)}
    sent = {"a": np.array([[1.0, 1.0]], dtype=np.float32), "b": np.array([4.0]), "c": np.array(0)}
    np.testing.assert_array_equal(update_vector(model, sent, keys), [1.0, 2.0, -3.0])
    back = crafted_data(np.array([1.0, 2.0, -3.0]), model, sent, keys, as_diff=False)
    np.testing.assert_array_equal(back["a"], model["a"])
    assert back["a"].dtype == np.float32 and back["b"].dtype == np.float64 and int(back["c"]) == 5
    diff = crafted_data(np.array([1.0, 2.0, -3.0]), model, sent, keys, as_diff=True)
    np.testing.assert_array_equal(diff["b"], [-3.0])
    with np.errstate(over="ignore"):
        huge = crafted_data(np.array([1e300, 0.0, 0.0]), model, sent, keys, as_diff=True)
    assert np.isinf(huge["a"][0, 0])  # beyond float32: the model checks refuse it


def test_a_crafted_result_that_fails_the_checks_is_rejected_like_any_other():
    """Model replacement with scale 100: [201, 201] exceeds max_abs_weight = 100."""
    ctrl = with_adversary("mr", scale=100.0)
    kept = ctrl._collect(round_results(), G, round_num=0, fl_ctx=FLContext())
    assert sorted(kept) == ["site-1", "site-2"] and ctrl._rejected == ["site-3"]


def test_full_knowledge_uses_the_benign_updates_and_partial_only_the_attackers():
    """IPM, epsilon 3: partial = -3 x site-3's [2, 2] -> the model [-5, -5]; full = -3 x the
    benign mean [0.5, 1] = [-1.5, -3] -> the model [-0.5, -2]."""
    partial = with_adversary("ipm")._collect(round_results(), G, 0, FLContext())
    np.testing.assert_array_equal(partial["site-3"]["weights"]["w"], [-5.0, -5.0])
    ctrl = with_adversary("ipm", "full")
    full = ctrl._collect(round_results(), G, 0, FLContext())
    np.testing.assert_array_equal(full["site-3"]["weights"]["w"], [-0.5, -2.0])
    assert ctrl._attack["known"] == ["site-1", "site-2"]


def test_an_attacker_that_sent_an_error_or_a_malformed_result_is_not_crafted_for():
    ctrl = with_adversary("mr")
    error = make_reply(ReturnCode.EXECUTION_EXCEPTION)
    kept = ctrl._collect(round_results(error), G, 0, FLContext())
    assert (
        sorted(kept) == ["site-1", "site-2"] and ctrl._attack["crafted"] == [] and ctrl._attack["absent"] == ["site-3"]
    )
    nan = result_data(weights([np.nan, 1.0]), 10, 0)
    kept = ctrl._collect(round_results(nan), G, 0, FLContext())
    assert (
        sorted(kept) == ["site-1", "site-2"] and ctrl._rejected == ["site-3"] and ctrl._attack["absent"] == ["site-3"]
    )


def test_a_crafting_failure_drops_the_attackers_results_and_the_round_goes_on(monkeypatch):
    ctrl = with_adversary("sf")

    def broken(*args, **kwargs):
        raise ValueError("simulated bug")

    monkeypatch.setattr("lightyear.star.adversary.craft_round", broken)
    kept = ctrl._collect(round_results(), G, 0, FLContext())
    assert sorted(kept) == ["site-1", "site-2"]
    assert ctrl._rejected == []  # dropped, not refused: the rule never evaluated it
    assert ctrl._attack["failed"] == "ValueError: simulated bug" and ctrl._attack["dropped"] == ["site-3"]


def test_adaptive_krum_gets_a_crafted_copy_selected():
    """5 sites, attackers site-4 and site-5, Krum with f = 1: the copies win Krum's choice."""
    sites = {f"site-{i}": weights([1.0 + 0.1 * i, 1.0 - 0.05 * i]) for i in range(1, 6)}
    ctrl = with_adversary("adaptive", "full", ("site-4", "site-5"), aggregator=KrumAggregator(f=1))
    kept = ctrl._collect(train_task_with({s: result_data(w, 10, 0) for s, w in sites.items()}), G, 0, FLContext())
    assert ctrl._attack["settings"]["lambda"] > 0 and ctrl._attack["settings"]["f"] == 1
    ctrl._keep_decision(0, ctrl.aggregator.aggregate(G, kept, 0, FLContext()))
    entry = ctrl.history[-1]  # the controller keeps the rule's decision with what was crafted
    assert entry["kept"][0] in ("site-4", "site-5") and entry["attack"]["kind"] == "adaptive"
    np.testing.assert_array_equal(kept["site-4"]["weights"]["w"], kept["site-5"]["weights"]["w"])


def test_adaptive_fedcap_sends_a_model_on_the_edge_of_the_ball_fedcap_keeps_in_every_round():
    """4 sites, attacker site-4, FedCAP with T_norm 2 (margin 0.02: r = 1.96). Round 0 sends
    everyone w^0 = G; in round 1 the sites get different customised models, so the attacker's
    update must be taken against its own model and w^t: both rounds, its recovered model lies
    exactly r from w^t, in the direction the targeted search chose, and FedCAP keeps it."""
    rule = FedCapAggregator(t_norm=2.0)
    ctrl = with_adversary("adaptive", "full", ("site-4",), aggregator=rule)
    steps = {"site-1": [0.5, 0.1], "site-2": [0.3, 0.4], "site-3": [0.6, 0.2], "site-4": [0.4, 0.3]}
    global_weights = G
    for round_num in range(2):
        sent = rule.site_models(sorted(steps), global_weights, round_num, FLContext())
        reference = rule.fedcap.global_vector.copy()  # w^t, this round's calibration reference
        if round_num == 1:  # customised: the attacker's model is not w^t
            assert np.linalg.norm(sent["site-4"]["w"] - reference) > 0.05
        results = {s: result_data(weights(sent[s]["w"] + np.array(d)), 10, round_num) for s, d in steps.items()}
        kept = ctrl._collect(train_task_with(results), global_weights, round_num, FLContext(), sent=sent)
        benign_mean = np.mean([kept[s]["weights"]["w"] - reference for s in ("site-1", "site-2", "site-3")], axis=0)
        calibrated = kept["site-4"]["weights"]["w"].astype(np.float64) - reference
        assert (
            np.linalg.norm(calibrated) == pytest.approx(1.96, rel=1e-5) and calibrated @ benign_mean < 0
        )  # against the benign mean
        assert ctrl._attack["settings"]["radius"] == pytest.approx(1.96) and ctrl._attack["known"] == [
            "site-1",
            "site-2",
            "site-3",
        ]
        decision = rule.aggregate(global_weights, kept, round_num, FLContext())
        global_weights = decision.weights
        assert rule.fedcap.norms["site-4"] == pytest.approx(1.96, rel=1e-6) and "site-4" in decision.kept
    assert rule.removed_sites() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("lf", "partial", ["site-3"]), "label flipping"),
        (("boom", "partial", ["site-3"]), "unknown attack 'boom'"),
        (("sf", "most", ["site-3"]), "unknown knowledge 'most'"),
        (("sf", "partial", []), "at least one site"),
        (("sf", "partial", "site-3"), "attackers must be a list"),
        (("sf", "partial", ["site-3"], {"scale": 2}), "attack 'sf' takes no setting attack_scale"),
        (("mr", "partial", ["site-3"], {"scale": -1}), "attack_scale must be a finite number > 0"),
        (("sf", "partial", ["site-3"], ["scale"]), "params must be a JSON object"),
    ],
)
def test_bad_adversary_arguments_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        SimulatedAdversary(*args)


def test_bad_seed_and_adversary_id_are_refused():
    with pytest.raises(ValueError, match="seed"):
        SimulatedAdversary("sf", "partial", ["site-3"], seed="x")
    with pytest.raises(ValueError, match="adversary_id must be a non-empty string .the id of a SimulatedAdversary"):
        StarController(adversary_id="")


def _start(tmp_path, components, sites=("site-1", "site-2", "site-3", "site-4"), rounds=2):
    ctrl = StarController(
        rounds=rounds, model="cnn", num_classes=10, in_channels=1, adversary_id="adversary", min_clients=3
    )
    engine = StarServerEngine(str(tmp_path), sites, components)
    ctx = FLContext()
    ctx.set_prop(ReservedKey.ENGINE, engine, private=True, sticky=False)
    ctrl.start_controller(ctx)
    return ctrl, engine, ctx


@pytest.mark.parametrize(
    ("adversary", "aggregator", "message"),
    [
        (None, FedAvgAggregator(), "names no component, not a SimulatedAdversary"),
        (FedAvgAggregator(), FedAvgAggregator(), "names a FedAvgAggregator, not a SimulatedAdversary"),
        (
            SimulatedAdversary("adaptive", "full", ["site-4"]),
            FedAvgAggregator(),
            "aims at a rule that declares one, and this job's rule FedAvgAggregator declares none",
        ),
        (
            SimulatedAdversary("adaptive", "partial", ["site-4"]),
            KrumAggregator(),
            "on Krum under partial knowledge .* needs at least 2 attackers",
        ),
        (
            SimulatedAdversary("adaptive", "full", ["site-4"], {"margin": 0.1}),
            KrumAggregator(),
            "the adaptive attack on KrumAggregator takes no attack_margin",
        ),
        (
            SimulatedAdversary("adaptive", "partial", ["site-4"]),
            FedCapAggregator(),
            "on FedCAP needs its calibration reference .* use --knowledge full",
        ),
        (
            SimulatedAdversary("sf", "partial", ["site-9"]),
            FedAvgAggregator(),
            "attackers \\['site-9'\\] are not sites of this job",
        ),
    ],
)
def test_a_missing_or_wrong_adversary_stops_the_run_before_training(tmp_path, adversary, aggregator, message):
    ctrl, engine, ctx = _start(tmp_path, {"aggregator": aggregator, "adversary": adversary})
    ctrl.broadcast_and_wait = lambda **kwargs: pytest.fail("no round may be sent")
    ctrl.control_flow(Signal(), ctx)
    reasons = [reason for _, reason in engine.events if reason]
    assert len(reasons) == 1 and re.search(message, reasons[0]), reasons
    assert ctrl.stats()["phase"] == "failed"


def test_an_attack_run_records_what_was_crafted_and_keeps_attackers_out_of_the_benign_mean(tmp_path):
    """4 sites, site-4 sign-flips under Krum; every round is recorded in adversary.jsonl and in the
    rule's history, and site-4's summary row names the attack; the detection metrics read the run."""
    from lightyear.experiments.detection import RunRecords, rule_for, star_decisions

    run_dir = tmp_path / "server" / "simulate_job"  # the simulator workspace's layout
    run_dir.mkdir(parents=True)
    ctrl, _, ctx = _start(
        run_dir, {"aggregator": KrumAggregator(), "adversary": SimulatedAdversary("sf", "partial", ["site-4"])}
    )
    start = ctrl.initial_weights()

    def broadcast_and_wait(task, fl_ctx, targets, min_responses, **kwargs):
        for k, site in enumerate(targets):
            trained = {key: (v + 0.01 * (k + 1) if v.dtype.kind == "f" else v) for key, v in start.items()}
            answer_star_task(task, site, result_data(trained, 10, 0))

    ctrl.broadcast_and_wait = broadcast_and_wait
    ctrl.control_flow(Signal(), ctx)
    lines = [json.loads(line) for line in (run_dir / "adversary.jsonl").read_text().splitlines()]
    assert [(r["round"], r["kind"], r["crafted"]) for r in lines] == [(0, "sf", ["site-4"]), (1, "sf", ["site-4"])]
    history = json.loads((run_dir / "aggregator_state.json").read_text())["history"]
    assert [h["attack"]["crafted"] for h in history] == [["site-4"], ["site-4"]]
    assert all("site-4" in h["excluded"] for h in history)  # Krum leaves the flipped model out
    rows = {r["site"]: r for r in json.loads((run_dir / "summary.json").read_text())}
    assert rows["site-4"]["malfunction"] == "sf" and rows["site-1"]["malfunction"] == "none"
    assert rows["mean_benign"]["malfunction"] == "n=3"
    sites = ["site-1", "site-2", "site-3", "site-4"]
    run = RunRecords("sf1", "krum", ["site-4"], sites, str(tmp_path), {"attack": "sf"})
    counts = [d.counts for d in star_decisions(run, rule_for("krum"))]
    assert [(c.tp, c.fn) for c in counts] == [(1, 0), (1, 0)]  # Krum (m = 1) left site-4 out both rounds


# ---------------------------------------------------------------------------- reparametrisation
def _cnn():
    import torch

    from lightyear.models import build_model
    from lightyear.training.weights import get_weights

    net = build_model("cnn", 10, 1, seed=0).eval()
    return net, get_weights(net), torch.randn(4, 1, 28, 28, generator=torch.Generator().manual_seed(0))


def _outputs(net, model, x):
    import torch

    from lightyear.training.weights import set_weights

    set_weights(net, model)
    with torch.no_grad():
        return net(x).numpy()


@pytest.mark.parametrize("knowledge", ["partial", "full"])
def test_a_reparametrising_attacker_sends_a_model_that_predicts_like_the_one_it_transformed(knowledge):
    net, g, x = _cnn()
    honest = {
        k: (v + np.float32(0.01) if v.dtype.kind == "f" else v) for k, v in g.items()
    }  # the attacker's trained model
    ctrl = StarController(rounds=1, adversary_id="adversary", max_abs_weight=1e9)
    ctrl.aggregator = FedAvgAggregator()
    assert (
        ctrl._bind_adversary(
            SimulatedAdversary("rescale_permute", knowledge, ["site-3"], {"factor": 10.0}, model="cnn")
        )
        == ""
    )
    raw = {"site-1": result_data(g, 10, 0), "site-3": result_data(honest, 10, 0)}
    out, record = ctrl.adversary.rewrite(raw, {s: g for s in raw}, g, 0, None)
    crafted = from_shareable(out["site-3"]).data
    base = honest if knowledge == "partial" else g  # its own model, or the model the server sent
    np.testing.assert_allclose(_outputs(net, crafted, x), _outputs(net, base, x), rtol=1e-4, atol=1e-5)
    assert max(float(np.abs(crafted[k] - base[k]).max()) for k in g) > 1.0  # far away in parameter space
    assert record["crafted"] == ["site-3"] and record["settings"]["attack_transform"] == "rescale_permute"
    assert record["known"] == (["site-3"] if knowledge == "partial" else [])
    again, _ = ctrl.adversary.rewrite(raw, {s: g for s in raw}, g, 0, None)
    np.testing.assert_array_equal(
        from_shareable(again["site-3"]).data["features.0.weight"], crafted["features.0.weight"]
    )  # drawn from the seed
    assert out["site-1"] is raw["site-1"]


def test_a_reparametrising_adversary_needs_the_jobs_network():
    with pytest.raises(ValueError, match="give the adversary model"):
        SimulatedAdversary("permute", "partial", ["site-3"])


def test_an_attack_that_draws_is_given_the_jobs_seed_and_the_round_by_the_adversary(monkeypatch):
    def craft(own_update, known, n, m, rng, sigma=1.0):
        return rng.normal(0.0, sigma, size=own_update.shape), {"sigma": sigma}

    noise = Attack("noise", "noise", ("sigma",), craft, needs_rng=True)
    table = {**catalogue.attacks(), "noise": noise}
    monkeypatch.setattr(catalogue, "attacks", lambda: table)

    adversary = SimulatedAdversary("noise", "partial", ["site-3"], {"sigma": 0.5}, seed=7)
    raw = {
        "site-1": result_data(weights([2.0, 1.0]), 10, 0),
        "site-3": result_data(weights([2.0, 2.0], n=0), 10, 0, DataKind.WEIGHT_DIFF),
    }
    sent = {s: G for s in raw}

    def sent_update(seed, round_num):
        adversary.seed = seed
        out, record = adversary.rewrite(raw, sent, G, round_num, None)
        assert record["settings"] == {"sigma": 0.5}
        return from_shareable(out["site-3"]).data["w"]

    drawn = sent_update(7, 2)  # the attacker sent a difference: the crafted one is a difference too
    np.testing.assert_array_equal(drawn, attack_rng(7, 2, 0).normal(0.0, 0.5, size=2).astype(np.float32))
    np.testing.assert_array_equal(sent_update(7, 2), drawn)
    assert not np.array_equal(sent_update(7, 3), drawn) and not np.array_equal(sent_update(8, 2), drawn)


def test_a_reparametrisation_draws_from_the_seed_the_round_and_the_attacker_as_before():
    from lightyear.algorithms.attacks.reparametrise import reparametrised
    from lightyear.algorithms.vectors import float_keys
    from lightyear.models import model_symmetries

    _, g, _ = _cnn()
    keys = float_keys(g)
    adversary = SimulatedAdversary(
        "rescale_permute", "full", ["site-2", "site-3"], {"factor": 10.0}, model="cnn", seed=9
    )
    got = adversary.reparametrised_round({"site-1": g, "site-3": g}, {"site-1": g, "site-3": g}, g, 4, keys)
    rng = np.random.default_rng([9, 4, 1])  # the derivation of the reparametrisations before attack_rng
    model, _ = reparametrised(g, model_symmetries("cnn", g, {}), "rescale_permute", 10.0, rng)
    np.testing.assert_array_equal(got.updates["site-3"], update_vector(model, g, keys))

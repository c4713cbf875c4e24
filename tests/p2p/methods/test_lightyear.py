"""The LIGHTYEAR site executor without a FLARE run: settings checks, buffering, deadline, rejection."""

import dataclasses

import numpy as np
import pytest
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.signal import Signal

from lightyear.algorithms.p2p.agreement import summarize_predictions
from lightyear.algorithms.p2p.validation_bounds import Held, Measured, excess
from lightyear.flare import constants as C
from lightyear.p2p.methods.lightyear import LightyearExecutor
from lightyear.p2p.wire.exchange import PeerExchange
from lightyear.training.site_runtime import SiteRuntime

from flare_fakes import SiteEngine, context, model_message

TRAIN = {"local_epochs": 1, "batch_size": 64, "device": "cpu"}  # the numerics asserted are the CPU's


FakeEngine = SiteEngine  # records the models a site sends, answers OK and ready


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"tau": 1.2}, "tau"),
        ({"gamma": 0.0}, "gamma"),
        ({"third_term": "x"}, "third_term"),
        ({"peer_deadline": -1}, "peer_deadline"),
        ({"peer_deadline": 0.5}, "peer_deadline"),
        ({"records_file": "../../etc/x.csv"}, "records_file"),
        ({"max_missed_rounds": 0}, "max_missed_rounds"),
        ({"skill_floor": 1.0}, "skill_floor"),
        ({"dataset": "mnist"}, "unknown dataset"),
        ({"model": "resnet"}, "unknown model"),
        ({"dataset_args": {"fraction": 0.5}}, "dataset_args"),
        ({"model_args": {"width": 3}}, "model_args"),
        ({"train_args": {"loss_args": {"gama": 2}}}, "loss_args"),
        ({"train_args": {"momentum": 1.0}}, "momentum"),
        ({"train_args": {"device": "tpu"}}, "device"),
        ({"max_abs_weight": -1}, "max_abs_weight"),
        ({"train_args": {"local_epochs": 0}}, "local_epochs"),
        ({"train_args": {"epochs": 3}}, "unknown train_args"),
        ({"transfer_dtype": "int8"}, "transfer_dtype"),
        ({"confidence": 1.5}, "confidence"),
        ({"drift_budget": -0.1}, "drift_budget"),
    ],
)
def test_bad_settings_stop_the_job_at_construction(kwargs, name):
    with pytest.raises(ValueError, match=name):
        LightyearExecutor(**kwargs)


@pytest.fixture(scope="module")
def peers():
    """Trained models of three digits sites (the neighbours' would-be messages)."""
    out = {}
    for site in ("site-2", "site-3"):
        rt = SiteRuntime(site, "digits", "cnn", seed=0, train_args=TRAIN, num_threads=1)
        rt.train(0)
        out[site] = rt.get_weights()
    return out


def make_executor(tmp_path, deadline=0.5, rounds=12, **kwargs):
    ex = LightyearExecutor(tau=0.0, gamma=0.95, train_args=TRAIN, num_threads=1, **kwargs)
    ex.peer_deadline = deadline  # below the 1 s a job may set: keeps the test fast
    ex.site = "site-1"
    ex.neighbours = ["site-2", "site-3", "site-4"]
    ex.runtime = SiteRuntime("site-1", "digits", "cnn", seed=0, train_args=TRAIN, num_threads=1)
    ex.exchange = PeerExchange(
        ex.neighbours,
        ex.neighbours,
        rounds,
        deadline,
        5.0,
        ex.max_missed_rounds,
        ex.max_abs_weight,
        lambda level, msg: None,
    )
    ex.exchange.reference = ex.runtime.get_weights()
    return ex


def test_round_skips_late_rejects_malformed_and_aggregates_the_rest(tmp_path, peers):
    ex = make_executor(tmp_path, aggregation="paper")
    engine = FakeEngine(str(tmp_path))
    ctx = context(engine)
    broken = {k: v.copy() for k, v in peers["site-3"].items()}
    first = next(k for k, v in broken.items() if v.dtype.kind == "f")
    broken[first][...] = np.nan
    ex._on_model(C.TOPIC_MODEL, model_message("site-2", 0, peers["site-2"]), ctx)
    ex._on_model(C.TOPIC_MODEL, model_message("site-3", 0, broken), ctx)
    # site-4 never delivers: skipped after peer_deadline
    row = ex._round(0, ctx, Signal())
    assert row["late"] == ["site-4"]
    assert row["rejected"] == ["site-3"]
    assert row["selected"] == ["site-2"]  # tau = 0 keeps every valid model
    assert row["site-3_score"] == "" and isinstance(row["site-2_score"], float)
    assert 0.4 < row["wait_s"] < 5.0
    # the paper's Eq. 18, gamma^0 = 1 and one selected peer: the new model is that peer's model
    new = ex.runtime.get_weights()
    np.testing.assert_allclose(new[first], peers["site-2"][first], rtol=1e-6)
    assert ex.exchange.buffer.models_held() == 0  # round 0 freed
    sends = [s for s in engine.sent if s[0] == C.TOPIC_MODEL]
    assert sends and sorted(sends[0][1]) == ["site-2", "site-3", "site-4"]
    assert sends[0][2][C.KEY_ROUND] == 0


def test_the_first_round_trains_before_the_start_handshake_is_waited_for_and_sends_after_it(tmp_path, peers):
    ex = make_executor(tmp_path, deadline=0.3)
    engine = FakeEngine(str(tmp_path))
    order = []
    trained = ex.local_update
    ex.local_update = lambda r: order.append("trained") or trained(r)
    ex.before_send = lambda: order.append(("greeted", len([s for s in engine.sent if s[0] == C.TOPIC_MODEL])))
    ex._round(0, context(engine), Signal())
    assert order == ["trained", ("greeted", 0)]  # nothing sent before the handshake ended
    assert [s for s in engine.sent if s[0] == C.TOPIC_MODEL] and ex.before_send is None  # once only


def test_empty_selection_keeps_the_own_model(tmp_path, peers):
    ex = make_executor(tmp_path, deadline=0.2)
    ex.rule = dataclasses.replace(ex.rule, tau=1.0)
    ctx = context(FakeEngine(str(tmp_path)))
    ex._on_model(C.TOPIC_MODEL, model_message("site-2", 0, peers["site-2"]), ctx)
    own_before = {}

    original = ex.aggregate

    def spy(round_num, own, received, inbox=None):
        own_before.update(own)
        return original(round_num, own, received, inbox=inbox)

    ex.aggregate = spy
    row = ex._round(0, ctx, Signal())
    assert row["selected"] == []
    new = ex.runtime.get_weights()
    for k in own_before:
        np.testing.assert_array_equal(new[k], own_before[k])


def test_model_handler_buffers_by_round_and_refuses_strangers(tmp_path, peers):
    ex = make_executor(tmp_path)
    ctx = context(FakeEngine(str(tmp_path)))
    good = peers["site-2"]
    assert ex._on_model(C.TOPIC_MODEL, model_message("site-2", 1, good), ctx).get_return_code() == ReturnCode.OK
    assert (
        ex._on_model(C.TOPIC_MODEL, model_message("site-9", 1, good), ctx).get_return_code()
        == ReturnCode.BAD_REQUEST_DATA
    )
    assert ex.exchange.buffer.models_held() == 1  # site-2's, for round 1
    ex.exchange.release(1)
    # a late model is acknowledged (so the sender stops re-sending) but not stored
    assert ex._on_model(C.TOPIC_MODEL, model_message("site-2", 0, good), ctx).get_return_code() == ReturnCode.OK
    assert ex.exchange.buffer.models_held() == 0


ReadyEngine = SiteEngine


def test_a_restarted_site_continues_from_its_last_checkpoint(tmp_path):
    import csv

    from lightyear.p2p.site.checkpoint import load_site_checkpoint

    config = {"rounds": 3, "seed": 0, "neighbours": {"site-1": []}}
    first = LightyearExecutor(train_args=TRAIN, num_threads=1, compute_slots=0)
    first.site = "site-1"
    ctx = context(ReadyEngine(str(tmp_path)))
    signal = Signal()
    reported = []

    def report(row, fl_ctx):
        reported.append(row["round"])
        if row["round"] == 1:
            signal.trigger("the site process dies after round 1")

    first._report = report
    assert first._run(config, ctx, signal) is None
    ckpt = load_site_checkpoint(str(tmp_path))
    assert ckpt.round == 1
    for key, value in first.runtime.get_weights().items():
        np.testing.assert_array_equal(ckpt.weights[key], value)

    again = LightyearExecutor(train_args=TRAIN, num_threads=1, compute_slots=0)
    again.site = "site-1"
    again._report = lambda row, fl_ctx: reported.append(row["round"])
    result = again._run(config, context(ReadyEngine(str(tmp_path))), Signal())
    assert reported == [0, 1, 2]
    with open(tmp_path / "rounds.csv", newline="") as f:
        assert [int(r["round"]) for r in csv.DictReader(f)] == [0, 1, 2]
    assert result["last_round"] == 2 and load_site_checkpoint(str(tmp_path)).round == 2


def test_cold_start_guard_trains_alone_until_the_own_model_is_clearly_better_than_chance(tmp_path, peers):
    ex = make_executor(tmp_path, skill_floor=0.95)  # a 1-epoch digits model is far from 0.95 skill
    own = ex.runtime.get_weights()
    outcome = ex.aggregate(0, own, dict(peers))
    assert outcome.fields["warming_up"] == 1 and outcome.fields["selected"] == []
    assert outcome.fields["own_skill"] < 0.95
    ex.rule = dataclasses.replace(ex.rule, skill_floor=0.0)  # the paper's rule: tau = 0 keeps every peer
    assert ex.aggregate(0, own, dict(peers)).fields["selected"] == ["site-2", "site-3"]


def rescaled(weights, factor=100.0, seed=0):
    """A copy of a digits CNN that computes exactly what ``weights`` computes (every unit scaled by factor or
    1/factor)."""
    from lightyear.algorithms.attacks.reparametrise import reparametrised
    from lightyear.models import model_symmetries

    return reparametrised(weights, model_symmetries("cnn", weights), "rescale", factor, np.random.default_rng(seed))[0]


def test_a_function_preserving_copy_wrecks_the_papers_average_and_is_excluded_by_the_validated_one(tmp_path, peers):
    honest, copy = peers["site-2"], rescaled(peers["site-2"])
    paper, validated = make_executor(tmp_path, aggregation="paper"), make_executor(tmp_path)
    own = paper.runtime.get_weights()
    assert paper.runtime.evaluate("val", copy)["acc"] == pytest.approx(
        paper.runtime.evaluate("val", honest)["acc"]
    )  # same predictions
    received = {"site-2": honest, "site-3": copy}
    broken = paper.aggregate(0, own, received)
    assert (
        broken.fields["selected"] == broken.fields["adopted"] == ["site-2", "site-3"]
    )  # the agreement score cannot tell them apart
    assert paper.runtime.evaluate("val", broken.weights)["acc"] < 0.3  # the mean of the two is another function
    kept = validated.aggregate(0, own, received)
    fields = kept.fields
    assert fields["aggregation"] == "validated" and fields["selected"] == ["site-2", "site-3"]
    assert "site-3" in fields["excluded"] and "site-3" not in fields["adopted"] and fields["site-3_excluded"]
    # the guarantee, measured as the site measures it: at its first aggregation against its own model
    mine, adopted = validated.assess(own), validated.assess(kept.weights)
    z = validated.rule.bounds.z
    assert excess(adopted.losses, mine.losses, z) <= 0 and excess(adopted.errors, mine.errors, z) <= 0
    assert adopted.performance == pytest.approx(fields["adopted_val_perf"]) and fields["validation_evals"] >= 1
    for key, value in kept.weights.items():
        if value.dtype.kind == "f":
            assert np.linalg.norm(value) <= 1.5 * np.linalg.norm(own[key]) + 1e-6


def test_the_first_round_is_judged_against_the_model_the_site_started_from(tmp_path):
    ex, paper = make_executor(tmp_path), make_executor(tmp_path, aggregation="paper")
    init = ex.runtime.get_weights()
    began = ex.assess(init)
    ex.local_update(0)
    np.testing.assert_array_equal(ex.held.start.losses, began.losses)  # measured before the site trained
    for more in (1, 2, 3):  # well past chance, where a weaker model shows
        ex.runtime.train(more)
    own = ex.runtime.get_weights()
    # a peer that learnt less than this site: its midpoint with the own model is worse than the own fresh model,
    # better than where the site began
    peer = {k: (init[k] + 0.2 * (v - init[k])).astype(v.dtype) if v.dtype.kind == "f" else v for k, v in own.items()}
    fresh, z = ex.assess(own), ex.rule.bounds.z
    midpoint = ex.assess({k: (own[k] + 0.5 * (peer[k] - own[k])).astype(own[k].dtype) for k in own})
    assert excess(midpoint.losses, fresh.losses, z) > 0  # refused against the own fresh model
    assert excess(midpoint.losses, began.losses, z) < 0 and excess(midpoint.errors, began.errors, z) <= 0
    fields = ex.aggregate(0, own, {"site-2": peer}).fields
    assert fields["adopted"] == ["site-2"] and fields["excluded"] == []
    assert fields["validation_evals"] == 2  # the start's pass and the aggregate's, both in the first round's record
    paper.local_update(0)  # the paper rule tests nothing, so it measures no start
    assert paper.held.start is None and paper.aggregate(0, own, {"site-2": peer}).fields["adopted"] == ["site-2"]
    alone = make_executor(tmp_path)
    alone.round_senders = lambda round_num: []  # no one to hear this round (``local``): nothing to judge, no pass
    alone.local_update(0)
    assert alone.held.start is None
    broken = make_executor(tmp_path)
    nan = np.full(len(began.losses), np.nan)
    broken.assess = lambda weights=None: dataclasses.replace(began, losses=nan, errors=nan)  # a start with NaN outputs
    broken.local_update(0)
    assert broken.held.start is None  # never a reference: a NaN reference would refuse nothing


@pytest.fixture(scope="module")
def trained():
    """A model trained well past chance on the receiving site's data (where a bad average shows)."""
    args = {"local_epochs": 4, "batch_size": 16, "device": "cpu"}
    rt = SiteRuntime("site-1", "digits", "cnn", seed=0, train_args=args, num_threads=1)
    rt.train(0)
    return rt.get_weights()


def test_bad_validated_aggregation_settings_stop_the_job_at_construction():
    for kwargs, name in (
        ({"aggregation": "mean"}, "aggregation"),
        ({"confidence": 0.2}, "confidence"),
        ({"max_norm_growth": "x"}, "max_norm_growth"),
        ({"max_peer_share": 0}, "max_peer_share"),
        ({"drift_budget": float("inf")}, "drift_budget"),
        ({"midpoint_barrier": 0.4, "align_units": True}, "align_units, midpoint_barrier: no longer settings"),
    ):
        with pytest.raises(ValueError, match=name):
            LightyearExecutor(**kwargs)


def test_a_round_records_the_new_models_validation_from_the_aggregation(tmp_path, peers):
    ex = make_executor(tmp_path)
    engine = FakeEngine(str(tmp_path))
    ctx = context(engine)
    for peer in ("site-2", "site-3"):
        ex._on_model(C.TOPIC_MODEL, model_message(peer, 0, peers[peer]), ctx)
    calls = []
    evaluate = ex.runtime.evaluate
    ex.runtime.evaluate = lambda split, weights=None: calls.append((split, weights is None)) or evaluate(split, weights)
    row = ex._round(0, ctx, Signal())
    assert row["validation_evals"] >= 1 and row["anchor_val_loss"] <= row["own_val_loss"]
    # the own model's figures came with its summary, an adopted model's from the aggregation:
    # only the test set is evaluated after
    assert calls.count(("val", True)) == 0 and calls.count(("test", True)) == 1
    fresh = evaluate("val")  # the new model, now the site's
    assert {k: row[f"val_{k}"] for k in fresh} == fresh
    assert (row["adopted_val_perf"], row["adopted_val_loss"]) == (fresh["acc"], fresh["loss"])
    # what the site carries to the next round: the model it adopted is where that round starts
    np.testing.assert_allclose(np.mean(ex.held.start.losses), fresh["loss"], rtol=1e-5)


def test_what_the_site_carries_across_rounds_survives_a_restart_and_a_damaged_one_is_refused():
    ex = LightyearExecutor()
    ex.held = Held(Measured(np.array([0.1, 0.2]), np.array([0.0, 1.0])), Measured(np.array([0.1, 0.1]), np.zeros(2)))
    state, arrays = ex.method_state()
    again = LightyearExecutor()
    again.restore_method_state(state, arrays)
    assert again.held.start.errors.tolist() == [0.0, 1.0] and again.held.anchor.losses.tolist() == [0.1, 0.1]
    for damaged in ({**arrays, "anchor_losses": np.array([np.nan, 0.1])}, {"start_losses": np.ones(2)}):
        with pytest.raises(ValueError, match="checkpoint's LIGHTYEAR"):
            again.restore_method_state(state, damaged)


def test_assess_gives_the_summary_the_validation_metrics_and_the_per_sample_figures_of_one_pass(peers):
    rt = SiteRuntime("site-1", "digits", "cnn", seed=0, train_args=TRAIN, num_threads=1)
    for weights in (None, peers["site-2"]):
        found = rt.assess(weights)
        probs, labels, _ = rt._predict("val", weights)  # the forward pass assess makes, summarised on its own
        expected = summarize_predictions(probs, labels, rt.config.ece_bins)
        assert (found.summary.performance, found.summary.ece) == (expected.performance, expected.ece)
        np.testing.assert_array_equal(found.summary.confidence, expected.confidence)
        assert found.metrics == rt.evaluate("val", weights)
        assert np.mean(found.losses) == pytest.approx(found.loss, rel=1e-4)
        assert 1.0 - np.mean(found.errors) == pytest.approx(found.performance)


def test_copies_of_the_own_function_are_left_out_before_averaging_and_do_not_shrink_the_others_step(
    tmp_path, trained, peers
):
    from lightyear.algorithms.attacks.reparametrise import reparametrised
    from lightyear.models import model_symmetries

    own = trained
    permuted = reparametrised(own, model_symmetries("cnn", own), "permute", 1.0, np.random.default_rng(5))[0]
    exact = {k: v.copy() for k, v in own.items()}
    received = {"site-2": peers["site-2"], "site-3": permuted, "site-4": exact}
    validated, paper = make_executor(tmp_path, max_norm_growth=100.0), make_executor(tmp_path, aggregation="paper")
    for ex in (validated, paper):
        ex.runtime.set_weights(own)  # the site scores against the model it just trained
    n = len(validated.assess().losses)  # a round that started from a model wrong on every sample: all pass
    validated.held = Held(start=Measured(np.full(n, 20.0), np.ones(n)))
    fields = (outcome := validated.aggregate(0, own, received)).fields
    assert fields["selected"] == ["site-2", "site-3", "site-4"]  # Eq. 17 cannot tell them apart
    assert fields["adopted"] == ["site-2"] and fields["excluded"] == ["site-3", "site-4"]
    assert "own model's function" in fields["site-3_excluded"] and fields["site-2_excluded"] == ""
    # the honest peer's step is the one it gets alone (gamma^0 * min(1/1, max_peer_share 0.5)), not a third of it
    for key, value in own.items():
        if value.dtype.kind == "f":
            np.testing.assert_allclose(outcome.weights[key], value + 0.5 * (peers["site-2"][key] - value), atol=1e-6)
    # the paper's rule averages what it selects, copies included
    assert paper.aggregate(0, own, received).fields["adopted"] == ["site-2", "site-3", "site-4"]


@pytest.fixture(scope="module")
def sibling():
    """Another model of the receiving site's data, trained from the same start on another path: it predicts
    much as the receiver's model does, and the models between the two predict as well."""
    args = {"local_epochs": 3, "batch_size": 32, "device": "cpu"}
    rt = SiteRuntime("site-1", "digits", "cnn", seed=0, train_args=args, num_threads=1)
    rt.train(0)
    return rt.get_weights()


def test_a_permuted_copy_of_another_model_is_left_out_after_averaging(tmp_path, trained, sibling):
    from lightyear.algorithms.attacks.reparametrise import reparametrised
    from lightyear.models import model_symmetries

    # partial knowledge: a permuted copy of an honest model predicts like it, not like the receiver's (no
    # copy of the own function); averaged with the receiver's model it predicts worse than either
    permuted = reparametrised(sibling, model_symmetries("cnn", sibling), "permute", 1.0, np.random.default_rng(5))[0]
    ex = make_executor(tmp_path)
    ex.held = Held(start=Measured.of(ex.assess(sibling)))  # a round that started from a model as good as the sibling
    ex.runtime.set_weights(trained)
    done = ex.aggregate(1, trained, {"site-2": sibling, "site-3": permuted})
    fields = done.fields
    assert fields["selected"] == ["site-2", "site-3"] and fields["site-3_perf"] == fields["site-2_perf"]
    assert fields["adopted"] == ["site-2"] and fields["excluded"] == ["site-3"]
    assert "the aggregate with it had" in fields["site-3_excluded"] and fields["site-2_excluded"] == ""
    # the whole aggregate and each contribution alone: 3 passes; the sibling's alone (weight 0.95 * 1/2) is
    # adopted as tested
    assert fields["validation_evals"] == 3 and done.val_metrics == ex.runtime.evaluate("val", done.weights)


def test_a_rescaled_copy_of_another_model_is_left_out_at_the_midpoint_on_its_norms(tmp_path, trained, sibling):
    from lightyear.algorithms.attacks.reparametrise import reparametrised
    from lightyear.models import model_symmetries

    # units scaled by 100 or 1/100: the copy predicts like the sibling, and halfway to it some entries of
    # the model are tens of times the receiver's; no pass is spent on it
    rescaled = reparametrised(sibling, model_symmetries("cnn", sibling), "rescale", 100.0, np.random.default_rng(5))[0]
    ex = make_executor(tmp_path)
    ex.held = Held(start=Measured.of(ex.assess(sibling)))  # a round that started from a model as good as the sibling
    ex.runtime.set_weights(trained)
    fields = ex.aggregate(1, trained, {"site-2": sibling, "site-3": rescaled}).fields
    assert fields["selected"] == ["site-2", "site-3"] and fields["site-3_perf"] == fields["site-2_perf"]
    assert fields["adopted"] == ["site-2"] and fields["excluded"] == ["site-3"]
    assert "the model halfway to it grew an entry's norm by" in fields["site-3_excluded"]
    assert fields["validation_evals"] == 1  # the honest peer's aggregate


@pytest.mark.parametrize("aggregation", ["validated", "paper"])
@pytest.mark.parametrize("attacker", ["honest", "rescaled"])
def test_an_adaptive_attackers_prediction_is_the_receivers_own_decision(
    tmp_path, trained, peers, aggregation, attacker
):
    # the receiver's recorded round, and the attacker's prediction of it with the same models on the same data:
    # one function decides both, so they agree on what is adopted, to the last bit up to the order of a sum
    ex = make_executor(tmp_path, aggregation=aggregation)
    ex.runtime.set_weights(trained)
    crafted = peers["site-3"] if attacker == "honest" else rescaled(peers["site-3"])
    for round_num in (0, 3):
        recorded = ex.aggregate(round_num, trained, {"site-2": peers["site-2"], "site-3": crafted})
        accepted, adopted = ex.predicted_outcome(round_num, trained, {"site-2": peers["site-2"]}, copies=1)(crafted)
        assert accepted == ("site-3" in recorded.fields["adopted"])
        for key, value in recorded.weights.items():
            np.testing.assert_allclose(adopted[key], value, rtol=1e-6, atol=1e-7)
        ex.held = (
            Held()
        )  # the attacker never sees the receiver's history: the receiver's first round is what it predicts

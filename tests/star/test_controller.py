"""The star controller keeps only well-formed, finite site models for aggregation, sends
per-site models one task per site, and reads DXO results."""

import numpy as np
from nvflare.apis.client import Client
from nvflare.apis.controller_spec import ClientTask, TaskCompletionStatus
from nvflare.apis.dxo import DXO, DataKind
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import make_reply
from nvflare.apis.signal import Signal

from lightyear.algorithms.aggregation import weighted_average
from lightyear.flare import constants as C
from lightyear.star.controller import StarController
from lightyear.star.messages import result_data

from flare_fakes import StarServerEngine, answer_star_task, train_task_with


def result(weights, n=10, rc=ReturnCode.OK, kind=DataKind.WEIGHTS):
    if rc != ReturnCode.OK:
        return make_reply(rc)
    return result_data(weights, n, 0, kind)


def test_malformed_nonfinite_and_failed_results_are_left_out():
    good = {"w": np.ones(3, dtype=np.float32)}
    task = train_task_with(
        {
            "site-1": result(good, 10),
            "site-2": result({"w": np.array([1.0, np.nan, 1.0], dtype=np.float32)}),
            "site-3": result({"w": np.ones(4, dtype=np.float32)}),
            "site-4": result(None, rc=ReturnCode.EXECUTION_EXCEPTION),
            "site-5": result({"w": np.full(3, 3.0, dtype=np.float32)}, 30),
        }
    )
    ctrl = StarController(rounds=1)
    kept = ctrl._collect(task, global_weights={"w": np.zeros(3, dtype=np.float32)}, round_num=2, fl_ctx=FLContext())
    assert sorted(kept) == ["site-1", "site-5"]
    # FedAvg over the kept models, weighted by samples: (1*10 + 3*30) / 40 = 2.5
    mean = weighted_average([kept[s]["weights"] for s in sorted(kept)], [kept[s]["num_samples"] for s in sorted(kept)])
    np.testing.assert_allclose(mean["w"], [2.5, 2.5, 2.5])


def test_round_zero_reference_is_the_initial_global_model_not_a_result():
    ctrl = StarController(rounds=1, model="cnn", num_classes=10, in_channels=1, seed=0)
    reference = ctrl.initial_weights()
    key = next(k for k, v in reference.items() if v.dtype.kind == "f")
    wrong = {"w": np.ones(3, dtype=np.float32)}  # well-formed by itself, but not this network
    good = {k: v.copy() for k, v in reference.items()}
    task = train_task_with({"site-1": result(wrong), "site-2": result(good)})
    kept = ctrl._collect(task, global_weights=reference, round_num=0, fl_ctx=FLContext())
    assert sorted(kept) == ["site-2"]
    assert kept["site-2"]["weights"][key].dtype == reference[key].dtype


def test_results_are_cast_to_the_global_dtype_and_overflow_is_rejected():
    global_weights = {"w": np.zeros(3, dtype=np.float32)}
    task = train_task_with(
        {
            "site-1": result({"w": np.full(3, 2.0, dtype=np.float64)}, 10),
            "site-2": result({"w": np.full(3, 1e300, dtype=np.float64)}, 10),  # inf in float32
        }
    )
    kept = StarController(rounds=1)._collect(task, global_weights, round_num=1, fl_ctx=FLContext())
    assert sorted(kept) == ["site-1"]
    assert kept["site-1"]["weights"]["w"].dtype == np.float32


def test_num_samples_are_validated_and_capped():
    global_weights = {"w": np.zeros(1, dtype=np.float32)}
    ones = {"w": np.ones(1, dtype=np.float32)}
    task = train_task_with(
        {
            "site-1": result(ones, 10),
            "site-2": result(ones, 20),
            "site-3": result(ones, 30),
            "site-4": result(ones, 10**9),  # claims a huge count
            "site-5": result(ones, float("nan")),
            "site-6": result(ones, -5),
            "site-7": result(ones, True),
        }
    )
    kept = StarController(rounds=1, max_sample_ratio=10)._collect(task, global_weights, round_num=1, fl_ctx=FLContext())
    assert sorted(kept) == ["site-1", "site-2", "site-3", "site-4"]
    # median of the valid claims (10, 20, 30, 1e9) is 25: site-4 is capped at 10 x 25 = 250
    assert kept["site-4"]["num_samples"] == 250.0
    assert kept["site-1"]["num_samples"] == 10.0


def test_default_min_clients_is_a_strict_majority():
    from lightyear.star.controller import default_min_clients

    assert [default_min_clients(n) for n in (1, 2, 3, 4, 5, 8)] == [1, 2, 2, 3, 3, 5]


def test_a_silent_site_costs_no_round_and_the_summary_is_always_written(tmp_path):
    """site-4 never answers: each round is aggregated from the 3 others (a strict majority of 4)."""
    import json

    from nvflare.apis.fl_constant import ReservedKey
    from nvflare.apis.signal import Signal

    from lightyear.star.aggregator import FedAvgAggregator

    sites = ["site-1", "site-2", "site-3", "site-4"]
    ctrl = StarController(rounds=2, model="cnn", num_classes=10, in_channels=1)
    ctx = FLContext()
    ctx.set_prop(
        ReservedKey.ENGINE,
        StarServerEngine(str(tmp_path), sites, {"aggregator": FedAvgAggregator()}),
        private=True,
        sticky=False,
    )
    ctrl.start_controller(ctx)
    waits = []

    def broadcast_and_wait(task, fl_ctx, targets, min_responses, **kwargs):
        waits.append(min_responses)
        for site in targets[:3]:  # site-4 is silent
            answer_star_task(task, site, result(ctrl.initial_weights(), 10))

    ctrl.broadcast_and_wait = broadcast_and_wait
    ctrl.control_flow(Signal(), ctx)
    assert waits == [3, 3, 3]
    assert (tmp_path / "global_model.npz").exists()
    rows = {r["site"]: r for r in json.loads((tmp_path / "summary.json").read_text())}
    assert rows["site-4"]["status"] == "dropped"
    assert all(rows[s]["status"] == "finished" for s in sites[:3])
    assert rows["mean_benign"]["malfunction"] == "n=3"


def test_a_weight_diff_result_is_added_to_the_model_that_site_was_sent():
    global_weights = {"w": np.zeros(2, dtype=np.float32), "n": np.array(5, dtype=np.int64)}
    sent = {"site-1": {"w": np.array([1.0, 2.0], dtype=np.float32), "n": np.array(5)}, "site-2": global_weights}
    diff = {"w": np.array([0.5, -1.0], dtype=np.float32), "n": np.array(0)}
    task = train_task_with(
        {"site-1": result(diff, 10, kind=DataKind.WEIGHT_DIFF), "site-2": result(diff, 10, kind=DataKind.WEIGHT_DIFF)}
    )
    kept = StarController(rounds=1)._collect(task, global_weights, round_num=1, fl_ctx=FLContext(), sent=sent)
    np.testing.assert_array_equal(kept["site-1"]["weights"]["w"], [1.5, 1.0])
    np.testing.assert_array_equal(kept["site-2"]["weights"]["w"], [0.5, -1.0])
    assert kept["site-1"]["weights"]["w"].dtype == np.float32
    assert int(kept["site-1"]["weights"]["n"]) == 5  # counters are never taken from a site


def test_results_that_are_no_usable_dxo_are_rejected_without_raising():
    global_weights = {"w": np.zeros(2, dtype=np.float32)}
    ok = {"w": np.ones(2, dtype=np.float32)}
    plain = make_reply(ReturnCode.OK)
    plain["weights"] = ok  # not a DXO
    metrics = DXO(DataKind.METRICS, data={"acc": 1.0}).update_shareable(make_reply(ReturnCode.OK))
    broken = make_reply(ReturnCode.OK)
    broken.set_header("__content_type__", "DXO")
    broken["DXO"] = {"kind": "WEIGHTS", "data": [1, 2], "meta": {}}  # data is no mapping
    big_sum = result(
        {"w": np.full(2, 3e38, dtype=np.float32)}, kind=DataKind.WEIGHT_DIFF
    )  # finite alone, inf once added
    sent = {"site-5": {"w": np.full(2, 3e38, dtype=np.float32)}}
    no_count = DXO(DataKind.WEIGHTS, data=ok).update_shareable(make_reply(ReturnCode.OK))
    task = train_task_with(
        {
            "site-1": plain,
            "site-2": metrics,
            "site-3": broken,
            "site-4": result(ok),
            "site-5": big_sum,
            "site-6": no_count,
        }
    )
    kept = StarController(rounds=1, max_abs_weight=None)._collect(
        task, global_weights, round_num=1, fl_ctx=FLContext(), sent=sent
    )
    assert sorted(kept) == ["site-4"]


def _mark(task, completion_status):
    """What FLARE's cancel_task does: mark the task; its monitor then removes it."""
    task.completion_status = completion_status


class _FakeSends:
    """Stands in for FLARE's communicator: records each send; the sites in ``answer`` reply at once."""

    def __init__(self, answer):
        self.answer, self.sent = answer, []

    def __call__(self, task, fl_ctx, targets):
        (site,) = targets
        self.sent.append((site, task))
        if site in self.answer:
            ct = ClientTask(Client(site, None), task)
            ct.result = result({"w": task.data["DXO"]["data"]["w"] + 1}, 10)
            ct.result_received_time = 1.0
            task.client_tasks.append(ct)
            task.completion_status = TaskCompletionStatus.OK


def test_per_site_models_go_one_task_per_site_and_stragglers_are_cancelled(monkeypatch):
    from lightyear.star.aggregator import FedAvgAggregator

    ctrl = StarController(rounds=1, wait_time_after_min_received=1.0)
    ctrl.aggregator = FedAvgAggregator()
    fake = _FakeSends(answer={"site-1", "site-2"})
    monkeypatch.setattr(ctrl, "send", fake)
    monkeypatch.setattr(ctrl, "cancel_task", _mark)
    models = {s: {"w": np.full(2, float(k), dtype=np.float32)} for k, s in enumerate(["site-1", "site-2", "site-3"])}
    tasks = ctrl._run_tasks(C.STAR_TRAIN_TASK, 4, models, True, need=2, abort_signal=Signal(), fl_ctx=FLContext())
    assert [s for s, _ in fake.sent] == ["site-1", "site-2", "site-3"]
    for site, task in fake.sent:  # each site's task carries its own model and the round
        dxo = task.data["DXO"]
        np.testing.assert_array_equal(dxo["data"]["w"], models[site]["w"])
        assert dxo["meta"]["current_round"] == 4
    assert tasks[2].completion_status == TaskCompletionStatus.CANCELLED  # site-3 never answered
    kept = ctrl._collect(tasks, {"w": np.zeros(2, dtype=np.float32)}, 4, FLContext(), sent=models)
    np.testing.assert_array_equal(kept["site-2"]["weights"]["w"], [2.0, 2.0])
    assert sorted(kept) == ["site-1", "site-2"]


def test_show_stats_follows_the_rounds_the_answers_and_the_rule(tmp_path):
    """What `show_stats JOB server` shows: before the start, mid-run (site-4 silent, site-3 shut
    out by the rule in round 0) and after the end."""
    from nvflare.apis.fl_constant import ReservedKey

    from lightyear.star.aggregator import FedAvgAggregator

    from flare_fakes import show_stats

    class ShutsOutSite3(FedAvgAggregator):
        """FedAvg that leaves site-3 out for good from round 0 on (as AFA blocks, FedCAP removes)."""

        decided = False

        def aggregate(self, global_weights, results, round_num, fl_ctx):
            kept = {s: r for s, r in results.items() if s != "site-3"}
            self.decided = True
            return self.decide(
                super().aggregate(global_weights, kept, round_num, fl_ctx).weights,
                kept,
                sorted(set(results) - set(kept)),
            )

        def removed_sites(self):
            return ["site-3"] if self.decided else []

    sites = ["site-1", "site-2", "site-3", "site-4"]
    ctrl = StarController(rounds=2, model="cnn", num_classes=10, in_channels=1)
    ctx = FLContext()
    ctx.set_prop(
        ReservedKey.ENGINE,
        StarServerEngine(str(tmp_path), sites, {"aggregator": ShutsOutSite3()}),
        private=True,
        sticky=False,
    )
    ctrl.start_controller(ctx)
    before = show_stats(ctrl)["StarController"]
    assert before["phase"] == "starting" and before["current_round"] is None and before["num_rounds"] == 2
    seen, weights = [], ctrl.initial_weights()

    def broadcast_and_wait(task, fl_ctx, targets, min_responses, **kwargs):
        seen.append(show_stats(ctrl)["StarController"])
        for site in targets[:3]:  # site-4 is silent
            answer_star_task(task, site, result(weights, 10))

    ctrl.broadcast_and_wait = broadcast_and_wait
    ctrl.control_flow(Signal(), ctx)
    round0, round1, evaluation = seen
    assert (round0["phase"], round0["current_round"], round0["sites"], round0["min_clients"]) == ("training", 0, 4, 3)
    assert round0["rounds_aggregated"] == 0 and round0["removed"] == []
    assert (round1["phase"], round1["current_round"], round1["sites_answered"], round1["not_answered"]) == (
        "training",
        1,
        3,
        ["site-4"],
    )
    assert round1["excluded"] == ["site-3"] and round1["removed"] == ["site-3"] and round1["sites_removed"] == 1
    assert round1["rounds_aggregated"] == 1 and round1["rounds_skipped"] == 0
    assert (evaluation["phase"], evaluation["current_round"]) == ("evaluating", 2)
    after = show_stats(ctrl)["StarController"]
    assert (after["phase"], after["current_round"], after["rounds_aggregated"]) == ("finished", 2, 2)
    assert (after["sites_answered"], after["not_answered"]) == (3, ["site-4"])  # final evaluations


def test_the_rules_history_lists_the_results_the_model_checks_refused(tmp_path):
    """site-4 sends a NaN model in round 1: Krum never sees it, but aggregator_state.json says it
    arrived and was refused (the detection metrics count it as evaluated and left out)."""
    import json

    from nvflare.apis.fl_constant import ReservedKey

    from lightyear.star.rules.krum import KrumAggregator

    sites = ["site-1", "site-2", "site-3", "site-4"]
    ctrl = StarController(rounds=2, model="cnn", num_classes=10, in_channels=1, min_clients=3)
    ctx = FLContext()
    ctx.set_prop(
        ReservedKey.ENGINE,
        StarServerEngine(str(tmp_path), sites, {"aggregator": KrumAggregator()}),
        private=True,
        sticky=False,
    )
    ctrl.start_controller(ctx)
    weights = ctrl.initial_weights()
    broken = {k: (np.full_like(v, np.nan) if v.dtype.kind == "f" else v) for k, v in weights.items()}
    calls = []

    def broadcast_and_wait(task, fl_ctx, targets, min_responses, **kwargs):
        calls.append(task.name)
        for site in targets:
            answer_star_task(task, site, result(broken if (site == "site-4" and len(calls) == 2) else weights, 10))

    ctrl.broadcast_and_wait = broadcast_and_wait
    ctrl.control_flow(Signal(), ctx)
    history = json.loads((tmp_path / "aggregator_state.json").read_text())["history"]
    assert [h["rejected"] for h in history] == [[], ["site-4"]]
    assert "site-4" not in history[1]["kept"] + history[1]["excluded"]
    assert sorted(history[0]["kept"] + history[0]["excluded"]) == sites

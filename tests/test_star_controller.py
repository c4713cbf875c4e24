"""The star controller keeps only well-formed, finite site models for aggregation."""

import numpy as np
from nvflare.apis.client import Client
from nvflare.apis.controller_spec import ClientTask, Task
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply

from lightyear.algorithms.aggregation import weighted_average
from lightyear.flare import constants as C
from lightyear.flare.star_controller import StarController
from flare_fakes import FakeWorkspace


def result(weights, n=10, rc=ReturnCode.OK):
    reply = make_reply(rc)
    reply[C.KEY_WEIGHTS] = weights
    reply[C.KEY_NUM_SAMPLES] = n
    return reply


def task_with(results):
    task = Task(name=C.STAR_TRAIN_TASK, data=Shareable())
    for name, res in results.items():
        ct = ClientTask(Client(name, None), task)
        ct.result = res
        task.client_tasks.append(ct)
    return task


def test_malformed_nonfinite_and_failed_results_are_left_out():
    good = {"w": np.ones(3, dtype=np.float32)}
    task = task_with(
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
    task = task_with({"site-1": result(wrong), "site-2": result(good)})
    kept = ctrl._collect(task, global_weights=reference, round_num=0, fl_ctx=FLContext())
    assert sorted(kept) == ["site-2"]
    assert kept["site-2"]["weights"][key].dtype == reference[key].dtype


def test_results_are_cast_to_the_global_dtype_and_overflow_is_rejected():
    global_weights = {"w": np.zeros(3, dtype=np.float32)}
    task = task_with(
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
    task = task_with(
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
    from lightyear.flare.star_controller import default_min_clients

    assert [default_min_clients(n) for n in (1, 2, 3, 4, 5, 8)] == [1, 2, 2, 3, 3, 5]


class _Engine:
    def __init__(self, root, sites, aggregator):
        self.workspace, self.sites, self.aggregator = FakeWorkspace(root), sites, aggregator

    def get_clients(self):
        return [Client(s, None) for s in self.sites]

    def get_workspace(self):
        return self.workspace

    def get_component(self, cid):
        return self.aggregator

    def fire_event(self, event_type, fl_ctx):
        pass


def test_a_silent_site_costs_no_round_and_the_summary_is_always_written(tmp_path):
    """site-4 never answers: each round is aggregated from the 3 others (a strict majority of 4)."""
    import json

    from nvflare.apis.fl_constant import ReservedKey
    from nvflare.apis.signal import Signal

    from lightyear.flare.star_aggregator import FedAvgAggregator

    sites = ["site-1", "site-2", "site-3", "site-4"]
    ctrl = StarController(rounds=2, model="cnn", num_classes=10, in_channels=1)
    ctx = FLContext()
    ctx.set_prop(ReservedKey.ENGINE, _Engine(str(tmp_path), sites, FedAvgAggregator()), private=True, sticky=False)
    ctrl.start_controller(ctx)
    waits = []

    def broadcast_and_wait(task, fl_ctx, targets, min_responses, **kwargs):
        waits.append(min_responses)
        for site in targets[:3]:  # site-4 is silent
            ct = ClientTask(Client(site, None), task)
            if task.name == C.STAR_TRAIN_TASK:
                ct.result = result({k: v.copy() for k, v in task.data[C.KEY_WEIGHTS].items()}, 10)
            else:
                ct.result = make_reply(ReturnCode.OK)
                ct.result[C.KEY_RESULT] = {"site": site, "malfunction": "none", "test": {"acc": 0.5}}
            task.client_tasks.append(ct)

    ctrl.broadcast_and_wait = broadcast_and_wait
    ctrl.control_flow(Signal(), ctx)
    assert waits == [3, 3, 3]
    assert (tmp_path / "global_model.npz").exists()
    rows = {r["site"]: r for r in json.loads((tmp_path / "summary.json").read_text())}
    assert rows["site-4"]["status"] == "dropped"
    assert all(rows[s]["status"] == "finished" for s in sites[:3])
    assert rows["mean_benign"]["malfunction"] == "n=3"

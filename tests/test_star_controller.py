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


def test_round_zero_reference_is_the_first_well_formed_result():
    task = task_with(
        {
            "site-1": result({"w": np.array([np.inf, 0.0, 0.0], dtype=np.float32)}),
            "site-2": result({"w": np.ones(3, dtype=np.float32)}),
            "site-3": result({"w": np.ones(5, dtype=np.float32)}),
        }
    )
    kept = StarController(rounds=1)._collect(task, global_weights=None, round_num=0, fl_ctx=FLContext())
    assert sorted(kept) == ["site-2"]

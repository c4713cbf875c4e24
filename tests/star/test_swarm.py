"""FLARE's Swarm Learning on a toolkit job: the site executor reads Swarm's tasks, the persistor, the job's files."""

import numpy as np
import pytest
from nvflare.apis.dxo import DXO, DataKind, from_shareable
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.signal import Signal
from nvflare.app_common.abstract.model import ModelLearnableKey, make_model_learnable
from nvflare.app_common.app_constant import AppConstants
from nvflare.app_common.shareablegenerators.full_model_shareable_generator import FullModelShareableGenerator

from lightyear.flare import constants as C
from lightyear.jobs import generate
from lightyear.star.executor import StarExecutor
from lightyear.star.messages import read_task
from lightyear.star.swarm import MODEL_FILE, SeededModelPersistor, swarm_job

from flare_fakes import SiteEngine, context
from repo import ROOT

TRAIN = {"local_epochs": 1, "batch_size": 64}


def swarm_task(weights, round_num, meta=None):
    """A learn task as Swarm's client controller hands it to the ``train`` executor: the model from
    FLARE's shareable generator, the round in the header."""
    task = FullModelShareableGenerator().learnable_to_shareable(make_model_learnable(weights, meta or {}), None)
    task.set_header(AppConstants.CURRENT_ROUND, round_num)
    return task


def test_a_task_without_the_round_in_its_dxo_takes_it_from_the_header():
    weights = {"w": np.ones(2, dtype=np.float32)}
    assert read_task(swarm_task(weights, 5)).round_num == 5
    assert read_task(swarm_task(weights, 5, {"current_round": 2})).round_num == 2  # the DXO's wins
    plain = DXO(data_kind=DataKind.WEIGHTS, data=weights).to_shareable()
    assert read_task(plain).round_num == 0


def test_the_persistor_gives_the_star_controllers_seeded_model_and_keeps_what_it_is_handed(tmp_path):
    persistor = SeededModelPersistor("cnn", num_classes=10, in_channels=1, seed=3, rounds=12)
    ctx = context(SiteEngine(str(tmp_path)))
    learnable = persistor.load(ctx)
    initial = learnable[ModelLearnableKey.WEIGHTS]
    again = SeededModelPersistor("cnn", num_classes=10, seed=3).initial_weights()
    assert all(np.array_equal(initial[k], again[k]) for k in initial)
    task = read_task(FullModelShareableGenerator().learnable_to_shareable(learnable, ctx))
    assert task.round_num == 0 and task.config == {"seed": 3, "rounds": 12}
    persistor.save(make_model_learnable({k: v + 1 for k, v in initial.items()}, {}), ctx)
    with np.load(tmp_path / MODEL_FILE) as kept:
        assert all(np.array_equal(kept[k], initial[k] + 1) for k in initial)
    with pytest.raises(ValueError, match="seed"):
        SeededModelPersistor("cnn", num_classes=10, seed=-1)


def test_the_star_executor_trains_swarm_tasks_in_their_round(tmp_path):
    ex = StarExecutor(train_args=TRAIN, num_threads=1, compute_slots=0)
    ctx = context(SiteEngine(str(tmp_path)), site="site-2")
    initial = SeededModelPersistor("cnn", num_classes=10, seed=0).load(ctx)
    task = swarm_task(initial[ModelLearnableKey.WEIGHTS], 0, initial[ModelLearnableKey.META])
    first = ex.execute(C.STAR_TRAIN_TASK, task, ctx, Signal())
    assert first.get_return_code() == ReturnCode.OK
    trained = from_shareable(first)
    assert trained.data_kind == DataKind.WEIGHTS and trained.get_meta_prop("current_round") == 0
    second = ex.execute(C.STAR_TRAIN_TASK, swarm_task(trained.data, 1), ctx, Signal())
    assert from_shareable(second).get_meta_prop("current_round") == 1
    rounds = (tmp_path / "rounds.csv").read_text().splitlines()
    assert [line.split(",")[0] for line in rounds[1:]] == ["0", "1"]  # batch order and records of rounds 0 and 1


def test_a_swarm_job_runs_the_star_jobs_site_executor_over_the_same_sites_rounds_and_seed():
    name, files = generate.build_job(f"{ROOT}/app_configs", "fedavg", "digits", seed=4, overrides={"rounds": 3})
    swarm = swarm_job(files, starting_client="site-1")
    client, server = swarm["app/config/config_fed_client.json"], swarm["app/config/config_fed_server.json"]
    star_executor = files["app/config/config_fed_client.json"]["executors"][0]["executor"]
    assert client["executors"][0] == {"tasks": ["train"], "executor": star_executor}
    controller = client["executors"][1]
    assert controller["tasks"] == ["swarm_*"] and controller["executor"]["args"]["min_responses_required"] == 8
    persistor = next(c for c in client["components"] if c["id"] == "persistor")
    expected = {"model": "cnn", "num_classes": 10, "in_channels": 1, "model_args": {}, "seed": 4, "rounds": 3}
    assert persistor["args"] == expected
    assert server["workflows"] == [
        {
            "id": "swarm_controller",
            "path": "nvflare.app_common.ccwf.SwarmServerController",
            "args": {"num_rounds": 3, "starting_client": "site-1"},
        }
    ]
    assert swarm["meta.json"]["deploy_map"] == files["meta.json"]["deploy_map"]
    assert swarm["meta.json"]["name"] == "swarm_digits"
    _, faulty = generate.build_job(f"{ROOT}/app_configs", "fedavg", "digits", malfunction="sfa", faulty=1)
    with pytest.raises(ValueError, match="no faulty sites"):
        swarm_job(faulty, starting_client="site-1")

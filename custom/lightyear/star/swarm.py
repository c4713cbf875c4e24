"""FLARE's Swarm Learning (``nvflare.app_common.ccwf``) on a job of this toolkit, as a yardstick: each round a
random client aggregates the others' results; the sites train with the star job's
:class:`~lightyear.star.executor.StarExecutor`, from the star controller's seeded initial model.
"""

from __future__ import annotations

import copy
import os

import numpy as np
from nvflare.apis.dxo import MetaKey
from nvflare.apis.fl_context import FLContext
from nvflare.app_common.abstract.model import ModelLearnable, ModelLearnableKey, make_model_learnable
from nvflare.app_common.abstract.model_persistor import ModelPersistor

from lightyear.checks import int_in, positive_int
from lightyear.flare.constants import KEY_CONFIG
from lightyear.records import save_npz_atomic

MODEL_FILE = "swarm_model.npz"
EXECUTOR = "lightyear.star.executor.StarExecutor"
PERSISTOR = "lightyear.star.swarm.SeededModelPersistor"
GENERATOR = "nvflare.app_common.shareablegenerators.full_model_shareable_generator.FullModelShareableGenerator"
AGGREGATOR = "nvflare.app_common.aggregators.intime_accumulate_model_aggregator.InTimeAccumulateWeightedAggregator"


class SeededModelPersistor(ModelPersistor):
    """Swarm Learning's model persistor: the seeded initial model; saves what it is handed (``swarm_model.npz``)."""

    def __init__(
        self,
        model: str,
        num_classes: int,
        in_channels: int = 1,
        model_args: dict | None = None,
        seed: int = 0,
        rounds: int = 1,
    ):
        super().__init__()
        for name, value in (("num_classes", num_classes), ("in_channels", in_channels), ("rounds", rounds)):
            positive_int(name, value)
        int_in("seed", seed, 0)
        self.model, self.num_classes, self.in_channels = model, num_classes, in_channels
        self.model_args, self.seed, self.rounds = dict(model_args or {}), seed, rounds

    def initial_weights(self) -> dict:
        """The seeded initial model, as every site and the star controller build it."""
        from lightyear.training.weights import seeded_weights  # torch: only when the model is built

        return seeded_weights(self.model, self.num_classes, self.in_channels, self.seed, self.model_args)

    def load_model(self, fl_ctx: FLContext) -> ModelLearnable:
        meta = {MetaKey.CURRENT_ROUND: 0, KEY_CONFIG: {"seed": self.seed, "rounds": self.rounds}}
        return make_model_learnable(self.initial_weights(), meta)

    def save_model(self, model_learnable: ModelLearnable, fl_ctx: FLContext):
        weights = model_learnable.get(ModelLearnableKey.WEIGHTS) or {}
        folder = fl_ctx.get_engine().get_workspace().get_run_dir(fl_ctx.get_job_id())
        save_npz_atomic(os.path.join(folder, MODEL_FILE), {k: np.asarray(v) for k, v in weights.items()})


def swarm_job(star_files: dict, starting_client: str) -> dict:
    """A Swarm Learning job's files from a star job's: its :data:`EXECUTOR`, sites, rounds and initial model, a round
    aggregated once every result is in, ``starting_client`` starting; Swarm's other settings are FLARE's defaults."""
    client = copy.deepcopy(star_files["app/config/config_fed_client.json"])
    executors = [e for e in client.get("executors", []) if e.get("executor", {}).get("path") == EXECUTOR]
    if len(executors) != 1 or any(key.startswith("app_faulty/") for key in star_files):
        raise ValueError(
            f"a Swarm job is built from a star job whose one site executor is {EXECUTOR} (no faulty sites)"
        )
    server = copy.deepcopy(star_files["app/config/config_fed_server.json"])
    star = server["workflows"][0]["args"]
    sites = [s for s in star_files["meta.json"]["deploy_map"]["app"] if s != "server"]
    executor = {"tasks": ["train"], "executor": executors[0]["executor"]}
    args = {k: star[k] for k in ("model", "num_classes", "in_channels", "model_args", "seed", "rounds")}
    own = ("persistor", "shareable_generator", "aggregator")
    ctl_args = {"learn_task_name": "train", **{f"{c}_id": c for c in own}, "min_responses_required": len(sites)}
    controller = {"id": "swarm_client_ctl", "path": "nvflare.app_common.ccwf.SwarmClientController", "args": ctl_args}
    client["executors"] = [executor, {"tasks": ["swarm_*"], "executor": controller}]
    client["components"] = [
        *[c for c in client.get("components", []) if c.get("id") not in own],
        {"id": "persistor", "path": PERSISTOR, "args": args},
        {"id": "shareable_generator", "path": GENERATOR, "args": {}},
        {"id": "aggregator", "path": AGGREGATOR, "args": {"expected_data_kind": "WEIGHTS"}},
    ]
    swarm_args = {"num_rounds": star["rounds"], "starting_client": starting_client}
    server["workflows"] = [
        {"id": "swarm_controller", "path": "nvflare.app_common.ccwf.SwarmServerController", "args": swarm_args}
    ]
    server["components"] = [c for c in server.get("components", []) if c.get("id") != "aggregator"]
    meta = copy.deepcopy(star_files["meta.json"])
    meta["name"] = meta["name"].replace(meta["lightyear"]["method"], "swarm", 1)
    meta["lightyear"] = {**meta["lightyear"], "method": "swarm", "topology": "swarm"}
    return {"app/config/config_fed_client.json": client, "app/config/config_fed_server.json": server, "meta.json": meta}

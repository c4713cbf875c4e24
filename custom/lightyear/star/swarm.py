"""FLARE's Swarm Learning (``nvflare.app_common.ccwf``) on a job of this toolkit, as a yardstick.

In Swarm Learning the server only coordinates: each round a randomly chosen client aggregates
the others' results (sample-weighted, FLARE's ``InTimeAccumulateWeightedAggregator``) and sends
the new model out for the next round. What a site trains is this toolkit's: the same
:class:`~lightyear.star.executor.StarExecutor` as a star FedAvg job (same data, network, training
settings and seed) handles Swarm's ``train`` tasks, which carry the model as a ``WEIGHTS`` DXO and
the round in the task's ``current_round`` header (:func:`lightyear.star.messages.read_task`).

:class:`SeededModelPersistor` gives Swarm the seeded initial model every site would build (the
star controller's), with the run settings the executor reads (seed, rounds), and keeps the model
it is handed (each round's aggregate on the aggregating client, the final one on every client) in
``swarm_model.npz`` in the run folder. :func:`swarm_job` turns a generated star job's files into a
Swarm job of the same settings.

Swarm's own records are FLARE's logs: each site's ``rounds.csv`` (written by the executor) holds
the received model's validation and test figures and the training time of every round; the final
model is evaluated from ``swarm_model.npz`` (``benchmarks/star_vs_p2p.py --swarm``).
"""

from __future__ import annotations

import copy
import os

import numpy as np
from nvflare.apis.dxo import MetaKey
from nvflare.apis.fl_context import FLContext
from nvflare.app_common.abstract.model import ModelLearnable, ModelLearnableKey, make_model_learnable
from nvflare.app_common.abstract.model_persistor import ModelPersistor

from lightyear.flare.constants import KEY_CONFIG

MODEL_FILE = "swarm_model.npz"
EXECUTOR = "lightyear.star.executor.StarExecutor"
PERSISTOR = "lightyear.star.swarm.SeededModelPersistor"


class SeededModelPersistor(ModelPersistor):
    """Swarm Learning's model persistor: the seeded initial model; saves what it is handed (module docstring)."""

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
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
        self.model, self.num_classes, self.in_channels = model, num_classes, in_channels
        self.model_args, self.seed, self.rounds = dict(model_args or {}), seed, rounds

    def initial_weights(self) -> dict:
        """The seeded initial model, as every site and the star controller build it."""
        from lightyear.models import build_model
        from lightyear.training.weights import get_weights

        net = build_model(self.model, self.num_classes, self.in_channels, seed=self.seed, **self.model_args)
        return get_weights(net)

    def load_model(self, fl_ctx: FLContext) -> ModelLearnable:
        meta = {MetaKey.CURRENT_ROUND: 0, KEY_CONFIG: {"seed": self.seed, "rounds": self.rounds}}
        return make_model_learnable(self.initial_weights(), meta)

    def save_model(self, model_learnable: ModelLearnable, fl_ctx: FLContext):
        weights = model_learnable.get(ModelLearnableKey.WEIGHTS) or {}
        folder = fl_ctx.get_engine().get_workspace().get_run_dir(fl_ctx.get_job_id())
        path = os.path.join(folder, MODEL_FILE)
        with open(path + ".tmp", "wb") as f:
            np.savez(f, **{k: np.asarray(v) for k, v in weights.items()})
        os.replace(path + ".tmp", path)


def swarm_job(star_files: dict, starting_client: str) -> dict:
    """The files of a Swarm Learning job from a star job's (:func:`lightyear.jobs.generate.build_job`):
    the star job's site executor (:data:`EXECUTOR`, its arguments as they are) for ``train`` tasks,
    Swarm's client controller for its own, and the server's Swarm controller, over the same sites
    and rounds, from the same seeded initial model (the star controller's settings). A round is
    aggregated once every site's result is in, as the star job's FedAvg does; Swarm's other
    settings are FLARE's defaults. ``starting_client``: the site that starts the first round.
    """
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
    controller = {
        "id": "swarm_client_ctl",
        "path": "nvflare.app_common.ccwf.SwarmClientController",
        "args": {
            "learn_task_name": "train",
            "persistor_id": "persistor",
            "shareable_generator_id": "shareable_generator",
            "aggregator_id": "aggregator",
            "min_responses_required": len(sites),
        },
    }
    client["executors"] = [executor, {"tasks": ["swarm_*"], "executor": controller}]
    client["components"] = [
        *[
            c
            for c in client.get("components", [])
            if c.get("id") not in ("persistor", "shareable_generator", "aggregator")
        ],
        {"id": "persistor", "path": PERSISTOR, "args": args},
        {
            "id": "shareable_generator",
            "path": "nvflare.app_common.shareablegenerators.full_model_shareable_generator.FullModelShareableGenerator",
            "args": {},
        },
        {
            "id": "aggregator",
            "path": "nvflare.app_common.aggregators.intime_accumulate_model_aggregator."
            "InTimeAccumulateWeightedAggregator",
            "args": {"expected_data_kind": "WEIGHTS"},
        },
    ]
    server["workflows"] = [
        {
            "id": "swarm_controller",
            "path": "nvflare.app_common.ccwf.SwarmServerController",
            "args": {"num_rounds": star["rounds"], "starting_client": starting_client},
        }
    ]
    server["components"] = [c for c in server.get("components", []) if c.get("id") != "aggregator"]
    meta = copy.deepcopy(star_files["meta.json"])
    meta["name"] = meta["name"].replace(meta["lightyear"]["method"], "swarm", 1)
    meta["lightyear"] = {**meta["lightyear"], "method": "swarm", "topology": "swarm"}
    return {"app/config/config_fed_client.json": client, "app/config/config_fed_server.json": server, "meta.json": meta}

"""Site side of the star topology: train the received model locally and send it back.

A ``train`` task evaluates the received model (one record row per round), trains it and returns the weights (or,
with ``send_update``, their difference to the received ones) as a DXO (:mod:`lightyear.star.messages`);
``evaluate`` scores the final model. A faulty site's corruption is a task result filter after this executor. Methods
override :meth:`~StarExecutor.train_round` (FedProx) or :meth:`~StarExecutor.evaluate_round` (personal models).
"""

from __future__ import annotations

import os
import time
import traceback

import numpy as np
from nvflare.apis.dxo import DataKind
from nvflare.apis.event_type import EventType
from nvflare.apis.executor import Executor
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal

from lightyear.algorithms.attacks.updates import LF
from lightyear.checks import boolean
from lightyear.flare import constants as C
from lightyear.flare.analytics import stream_round
from lightyear.records import RoundLog, check_records_file
from lightyear.star.messages import StarTask, read_task, result_data
from lightyear.training.compute_slots import ComputeSlots
from lightyear.training.site_runtime import SiteRuntime, runtime_arguments


class StarExecutor(Executor):
    def __init__(
        self,
        dataset: str = "digits",
        model: str = "cnn",
        dataset_args: dict | None = None,
        model_args: dict | None = None,
        train_args: dict | None = None,
        data_root: str | None = None,
        malfunction_id: str | None = None,
        num_threads: int = 1,
        compute_slots="auto",
        records_file: str = "rounds.csv",
        send_update: bool = False,
        flip_labels: bool = False,
    ):
        """Args: as :class:`~lightyear.p2p.site.executor.P2PExecutor`; ``malfunction_id`` only names the site's
        malfunction filter, for the summary. ``send_update``: send trained minus received (``WEIGHT_DIFF``) instead of
        the trained model. ``flip_labels``: train on flipped labels (the ``lf`` attack; attackers only)."""
        super().__init__()
        self.runtime_args = runtime_arguments(
            dataset, model, dataset_args, model_args, train_args, data_root, num_threads
        )
        self.malfunction_id = malfunction_id
        self.slots = ComputeSlots(compute_slots, group="star")
        self.records_file = check_records_file(records_file)
        self.send_update = boolean("send_update", send_update)
        self.flip_labels = boolean("flip_labels", flip_labels)
        self.runtime = None
        self.run_dir = ""
        self.log: RoundLog | None = None
        self.kind = LF if flip_labels else "none"
        self._round_start = 0.0

    def handle_event(self, event_type: str, fl_ctx: FLContext):
        if event_type == EventType.START_RUN:
            C.register_decomposers()
            if self.malfunction_id:
                component = fl_ctx.get_engine().get_component(self.malfunction_id)
                self.kind = LF if self.flip_labels else getattr(component, "kind", "none")

    def _ensure_runtime(self, config: dict, fl_ctx: FLContext) -> None:
        if self.runtime is None:
            site = fl_ctx.get_identity_name()
            self.runtime = SiteRuntime(site, seed=int(config.get("seed", 0)), **self.runtime_args)
            self.run_dir = fl_ctx.get_engine().get_workspace().get_run_dir(fl_ctx.get_job_id())
            self.log = RoundLog(os.path.join(self.run_dir, self.records_file))
            self.log_info(fl_ctx, f"data {self.runtime.data.sizes()}, device {self.runtime.trainer.device}")
            self.runtime_ready(fl_ctx)

    def runtime_ready(self, fl_ctx: FLContext) -> None:
        """Called once the site's data and model are built (a subclass builds its own state here)."""

    def execute(self, task_name: str, shareable: Shareable, fl_ctx: FLContext, abort_signal: Signal) -> Shareable:
        if task_name not in (C.STAR_TRAIN_TASK, C.STAR_EVAL_TASK):
            return make_reply(ReturnCode.TASK_UNKNOWN)
        try:
            self.slots.waited_s = 0.0
            self._round_start = time.time()
            with self.slots.hold(lambda: abort_signal.triggered):
                return self._execute(task_name, shareable, fl_ctx, abort_signal)
        except Exception as exc:  # noqa: BLE001 - the server gets the reason
            self.log_error(fl_ctx, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            reply = make_reply(ReturnCode.EXECUTION_EXCEPTION)
            reply[C.KEY_ERROR] = f"{type(exc).__name__}: {exc}"
            return reply

    def evaluate_round(self, task: StarTask) -> tuple[dict, dict, dict]:
        """(record fields, val metrics, test metrics) of the model this site reports: here the received one."""
        rt = self.runtime
        val, test = rt.evaluate("val"), rt.evaluate("test")
        return {"model": "global" if task.weights is not None else "initial"}, val, test

    def data_options(self) -> dict:
        """Keywords of ``SiteRuntime.train`` that change what a site trains on; every ``train_round`` passes them."""
        return {"flip_labels": True} if self.flip_labels else {}

    def train_round(self, task: StarTask) -> dict:
        """Train the received model for the round; the trainer's ``train_loss``, ``train_samples`` and extra fields."""
        return self.runtime.train(task.round_num, **self.data_options())

    def _execute(self, task_name: str, shareable: Shareable, fl_ctx: FLContext, abort_signal: Signal) -> Shareable:
        task = read_task(shareable)
        self._ensure_runtime(task.config, fl_ctx)
        rt = self.runtime
        if task.weights is not None:
            rt.set_weights(task.weights)
        received = rt.get_weights()
        e0 = time.perf_counter()
        fields, val, test = self.evaluate_round(task)
        timing = {"eval_s": time.perf_counter() - e0, "slot_wait_s": self.slots.waited_s}
        timing["round_start"] = self._round_start
        row = {"round": task.round_num, "site": rt.site, **fields}
        row.update({f"val_{k}": v for k, v in val.items()})
        row.update({f"test_{k}": v for k, v in test.items()})
        if task_name == C.STAR_EVAL_TASK:
            row["train_loss"] = ""
            self.log.write({**row, **timing, "train_s": "", "round_end": time.time()})
            reply = make_reply(ReturnCode.OK)
            reply[C.KEY_RESULT] = {"site": rt.site, "malfunction": self.kind, "val": val, "test": test}
            return reply
        if abort_signal.triggered:
            return make_reply(ReturnCode.TASK_ABORTED)
        t0 = time.perf_counter()
        stats = dict(self.train_round(task))
        row["train_loss"] = stats.pop("train_loss")
        samples = stats.pop("train_samples")
        row.update(stats)
        row.update(timing, train_s=time.perf_counter() - t0, round_end=time.time())
        self.log.write(row)
        stream_round(self, row, fl_ctx)
        weights = rt.get_weights()
        if not self.send_update:
            return result_data(weights, samples, task.round_num, DataKind.WEIGHTS)
        diff = {k: (v - received[k]) if np.issubdtype(v.dtype, np.floating) else v for k, v in weights.items()}
        return result_data(diff, samples, task.round_num, DataKind.WEIGHT_DIFF)

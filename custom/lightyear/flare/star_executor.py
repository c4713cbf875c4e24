"""Site side of the star topology: train the global model locally and send it back.

Each ``train`` task evaluates the received global model on the site's validation and test sets
(one record row per round, written at once), trains it for the local epochs and returns the
weights with the training-sample count. ``evaluate`` scores the final global model. A faulty
site's corruption happens after this executor, in a task result filter
(:class:`~lightyear.flare.malfunction_filter.MalfunctionFilter`).
"""

from __future__ import annotations

import os
import traceback

from nvflare.apis.event_type import EventType
from nvflare.apis.executor import Executor
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal

from lightyear.flare import constants as C
from lightyear.records import RoundLog, check_records_file
from lightyear.training.compute_slots import ComputeSlots


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
    ):
        """Args: as :class:`~lightyear.flare.p2p_executor.P2PExecutor`; ``malfunction_id`` only
        names the site's malfunction filter so that the summary can tell benign from faulty sites."""
        super().__init__()
        from lightyear.training.site_runtime import runtime_arguments

        self.runtime_args = runtime_arguments(dataset, model, dataset_args, model_args, train_args, data_root, num_threads)
        self.malfunction_id = malfunction_id
        self.slots = ComputeSlots(compute_slots, group="star")
        self.records_file = check_records_file(records_file)
        self.runtime = None
        self.log: RoundLog | None = None
        self.kind = "none"

    def handle_event(self, event_type: str, fl_ctx: FLContext):
        if event_type == EventType.START_RUN:
            C.register_decomposers()
            if self.malfunction_id:
                component = fl_ctx.get_engine().get_component(self.malfunction_id)
                self.kind = getattr(component, "kind", "none")

    def _ensure_runtime(self, config: dict, fl_ctx: FLContext) -> None:
        if self.runtime is None:
            from lightyear.training.site_runtime import SiteRuntime

            site = fl_ctx.get_identity_name()
            self.runtime = SiteRuntime(site, seed=int(config.get("seed", 0)), **self.runtime_args)
            run_dir = fl_ctx.get_engine().get_workspace().get_run_dir(fl_ctx.get_job_id())
            self.log = RoundLog(os.path.join(run_dir, self.records_file))
            self.log_info(fl_ctx, f"data {self.runtime.data.sizes()}, device {self.runtime.trainer.device}")

    def execute(self, task_name: str, shareable: Shareable, fl_ctx: FLContext, abort_signal: Signal) -> Shareable:
        if task_name not in (C.STAR_TRAIN_TASK, C.STAR_EVAL_TASK):
            return make_reply(ReturnCode.TASK_UNKNOWN)
        try:
            with self.slots.hold(lambda: abort_signal.triggered):
                return self._execute(task_name, shareable, fl_ctx, abort_signal)
        except Exception as exc:  # noqa: BLE001 - the server gets the reason
            self.log_error(fl_ctx, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            reply = make_reply(ReturnCode.EXECUTION_EXCEPTION)
            reply[C.KEY_ERROR] = f"{type(exc).__name__}: {exc}"
            return reply

    def _execute(self, task_name: str, shareable: Shareable, fl_ctx: FLContext, abort_signal: Signal) -> Shareable:
        self._ensure_runtime(shareable.get(C.KEY_CONFIG) or {}, fl_ctx)
        round_num = int(shareable.get(C.KEY_ROUND, 0))
        weights = shareable.get(C.KEY_WEIGHTS)
        rt = self.runtime
        if weights is not None:
            rt.set_weights(weights)
        val, test = rt.evaluate("val"), rt.evaluate("test")
        row = {"round": round_num, "site": rt.site, "model": "global" if weights is not None else "initial"}
        row.update({f"val_{k}": v for k, v in val.items()})
        row.update({f"test_{k}": v for k, v in test.items()})
        reply = make_reply(ReturnCode.OK)
        if task_name == C.STAR_EVAL_TASK:
            row["train_loss"] = ""
            self.log.write(row)
            reply[C.KEY_RESULT] = {"site": rt.site, "malfunction": self.kind, "val": val, "test": test}
            return reply
        if abort_signal.triggered:
            return make_reply(ReturnCode.TASK_ABORTED)
        stats = rt.train(round_num)
        row["train_loss"] = stats["train_loss"]
        self.log.write(row)
        reply[C.KEY_ROUND] = round_num
        reply[C.KEY_WEIGHTS] = rt.get_weights()
        reply[C.KEY_NUM_SAMPLES] = stats["train_samples"]
        return reply

"""Server side of the star topology: scatter the global model, gather, aggregate, repeat.

Round 0 sends no weights: every site starts from the same seeded initial model. Each round's
global model is checkpointed (``global_model.npz`` in the run folder) as soon as it is made.
After the last round the final global model is sent out once more for evaluation on every
site's test set, and ``summary.csv``/``summary.json`` are written.
"""

from __future__ import annotations

import os

import numpy as np
from nvflare.apis.client import Client
from nvflare.apis.controller_spec import Task
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.impl.controller import Controller
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal

from lightyear.algorithms.model_check import model_problems
from lightyear.checks import integer, positive_int, positive_seconds
from lightyear.flare import constants as C
from lightyear.flare.star_aggregator import StarAggregator
from lightyear.records import format_table, summarize_sites, write_summary


class StarController(Controller):
    def __init__(
        self,
        aggregator_id: str = "aggregator",
        rounds: int = 12,
        seed: int = 0,
        min_clients: int | None = None,
        train_timeout: float = 3600.0,
        wait_time_after_min_received: int = 10,
    ):
        """Args:
        aggregator_id: id of a :class:`~lightyear.flare.star_aggregator.StarAggregator` component.
        rounds: communication rounds.
        seed: the job seed, sent to the sites.
        min_clients: results needed to aggregate a round (default: every site).
        train_timeout: seconds a round's training task may take; late sites are left out of that round.
        wait_time_after_min_received: seconds to wait for the rest once ``min_clients`` answered.
        """
        super().__init__()
        self.aggregator_id = aggregator_id
        self.rounds = positive_int("rounds", rounds)
        self.seed = integer("seed", seed)
        self.min_clients = None if min_clients is None else positive_int("min_clients", min_clients)
        self.train_timeout = positive_seconds("train_timeout", train_timeout)
        self.wait_time_after_min_received = int(wait_time_after_min_received)
        self.aggregator: StarAggregator | None = None

    def start_controller(self, fl_ctx: FLContext):
        C.register_decomposers()
        engine = fl_ctx.get_engine()
        self.aggregator = engine.get_component(self.aggregator_id)
        if not isinstance(self.aggregator, StarAggregator):
            self.system_panic(f"aggregator_id {self.aggregator_id!r} names no StarAggregator component", fl_ctx)
        self._run_dir = engine.get_workspace().get_run_dir(fl_ctx.get_job_id())

    def stop_controller(self, fl_ctx: FLContext):
        pass

    def _task(self, name: str, round_num: int, weights, timeout: float) -> Task:
        data = Shareable()
        data[C.KEY_ROUND] = round_num
        data[C.KEY_CONFIG] = {"seed": self.seed, "rounds": self.rounds}
        data[C.KEY_WEIGHTS] = weights
        return Task(name=name, data=data, timeout=int(timeout))

    def control_flow(self, abort_signal: Signal, fl_ctx: FLContext):
        sites = sorted(c.name for c in fl_ctx.get_engine().get_clients())
        need = min(self.min_clients or len(sites), len(sites))
        global_weights = None
        for round_num in range(self.rounds):
            if abort_signal.triggered:
                return
            task = self._task(C.STAR_TRAIN_TASK, round_num, global_weights, self.train_timeout)
            self.broadcast_and_wait(
                task=task,
                fl_ctx=fl_ctx,
                targets=sites,
                min_responses=need,
                wait_time_after_min_received=self.wait_time_after_min_received,
                abort_signal=abort_signal,
            )
            if abort_signal.triggered:
                return
            results = self._collect(task, global_weights, round_num, fl_ctx)
            if len(results) < need:
                self.system_panic(f"round {round_num}: only {len(results)} valid results, {need} needed", fl_ctx)
                return
            global_weights = self.aggregator.aggregate(global_weights, results, round_num, fl_ctx)
            np.savez(os.path.join(self._run_dir, "global_model.npz"), **global_weights)
            self.log_info(fl_ctx, f"round {round_num}: aggregated {sorted(results)}")

        task = self._task(C.STAR_EVAL_TASK, self.rounds, global_weights, self.train_timeout)
        self.broadcast_and_wait(task=task, fl_ctx=fl_ctx, targets=sites, min_responses=len(sites), abort_signal=abort_signal)
        finals = []
        for ct in task.client_tasks:
            result = ct.result
            if isinstance(result, Shareable) and result.get_return_code() == ReturnCode.OK and result.get(C.KEY_RESULT):
                finals.append(dict(result[C.KEY_RESULT], status="finished"))
        finals += [{"site": s, "status": "dropped", "test": {}} for s in sites if s not in {f["site"] for f in finals}]
        rows = summarize_sites(finals)
        path = write_summary(rows, self._run_dir)
        self.log_info(fl_ctx, f"final test metrics of the global model (written to {path}):\n{format_table(rows)}")

    def _collect(self, task: Task, global_weights, round_num: int, fl_ctx: FLContext) -> dict:
        """The round's valid results, checked against the global model's keys and shapes."""
        ok = []
        for ct in task.client_tasks:
            result = ct.result
            if isinstance(result, Shareable) and result.get_return_code() == ReturnCode.OK:
                ok.append((ct.client.name, result))
            else:
                rc = result.get_return_code() if isinstance(result, Shareable) else "no result"
                reason = result.get(C.KEY_ERROR, "") if isinstance(result, Shareable) else ""
                self.log_warning(fl_ctx, f"round {round_num}: {ct.client.name} returned {rc} {reason}")
        reference = global_weights
        if reference is None:  # round 0: the first finite, well-formed result fixes keys and shapes
            candidates = (r.get(C.KEY_WEIGHTS) for _, r in ok)
            reference = next((w for w in candidates if isinstance(w, dict) and not model_problems(w, w)), {})
        results = {}
        for site, result in ok:
            weights = result.get(C.KEY_WEIGHTS)
            problems = model_problems(weights, reference or {})
            if problems:
                self.log_warning(fl_ctx, f"round {round_num}: rejected the model of {site}: {'; '.join(problems)}")
                continue
            results[site] = {"weights": weights, "num_samples": int(result.get(C.KEY_NUM_SAMPLES, 1))}
        return results

    def process_result_of_unknown_task(self, client: Client, task_name: str, client_task_id: str, result: Shareable, fl_ctx: FLContext):
        self.log_warning(fl_ctx, f"ignored a result of unknown task {task_name!r} from {client.name}")

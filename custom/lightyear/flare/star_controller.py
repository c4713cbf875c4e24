"""Server side of the star topology: scatter the global model, gather, aggregate, repeat.

The server builds the seeded initial global model (the same network every site would build)
and sends it in round 0; its keys, shapes and dtypes are the reference every result is checked
against, so no site's result decides what a well-formed model is. A round is aggregated once
``min_clients`` sites answered (the rest get ``wait_time_after_min_received`` more seconds); a
round with too few valid results keeps the global model and the run goes on. Each round's
global model (``global_model.npz``) and the aggregator's state (``aggregator_state.json``) are
written atomically as soon as they exist. After the last round the final global model goes out
once more for evaluation on every site's test set, and ``summary.csv``/``summary.json`` are
written, also when the run stops early.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
from nvflare.apis.client import Client
from nvflare.apis.controller_spec import Task
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.impl.controller import Controller
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal

from lightyear.algorithms.model_check import DEFAULT_MAX_ABS, check_max_abs, model_problems
from lightyear.checks import integer, positive_int, positive_seconds
from lightyear.flare import constants as C
from lightyear.flare.star_aggregator import StarAggregator
from lightyear.records import atomic_write, format_table, save_npz_atomic, summarize_sites, write_summary


def default_min_clients(n_sites: int) -> int:
    """All but the faulty budget: a strict majority, n - floor((n - 1) / 2) (8 sites: 5)."""
    return n_sites - (n_sites - 1) // 2


def valid_num_samples(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value) and value > 0


def capped_counts(counts: dict[str, float], max_ratio: float | None) -> dict[str, float]:
    """Cap each site's claimed sample count at ``max_ratio`` x the round's median claim, so that
    one site cannot take over a sample-weighted mean by claiming a huge count."""
    if not counts or max_ratio is None:
        return dict(counts)
    cap = max_ratio * float(np.median(list(counts.values())))
    return {s: min(float(n), cap) for s, n in counts.items()}


class StarController(Controller):
    def __init__(
        self,
        aggregator_id: str = "aggregator",
        rounds: int = 12,
        seed: int = 0,
        model: str = "cnn",
        model_args: dict | None = None,
        num_classes: int = 10,
        in_channels: int = 1,
        min_clients: int | None = None,
        train_timeout: float = 3600.0,
        wait_time_after_min_received: float = 10.0,
        max_sample_ratio: float | None = 10.0,
        max_abs_weight: float | None = DEFAULT_MAX_ABS,
    ):
        """Args:
        aggregator_id: id of a :class:`~lightyear.flare.star_aggregator.StarAggregator` component.
        rounds: communication rounds.
        seed: the job seed: the initial global model is built from it.
        model, model_args, num_classes, in_channels: the network (as the sites build it).
        min_clients: results needed to aggregate a round (default: a strict majority of the
            sites, n - floor((n-1)/2), i.e. all but the largest faulty minority).
        train_timeout: seconds a round's training task may take.
        wait_time_after_min_received: seconds to wait for the rest once ``min_clients`` answered.
        max_sample_ratio: a site's claimed training-sample count is capped at this multiple of
            the round's median claim (None: no cap).
        max_abs_weight: a result with a value beyond this magnitude is rejected (None: no bound).
        """
        super().__init__()
        self.aggregator_id = aggregator_id
        self.rounds = positive_int("rounds", rounds)
        self.seed = integer("seed", seed)
        self.model, self.model_args = model, dict(model_args or {})
        self.num_classes = positive_int("num_classes", num_classes)
        self.in_channels = positive_int("in_channels", in_channels)
        self.min_clients = None if min_clients is None else positive_int("min_clients", min_clients)
        self.train_timeout = positive_seconds("train_timeout", train_timeout)
        self.wait_time_after_min_received = positive_seconds("wait_time_after_min_received", wait_time_after_min_received)
        if max_sample_ratio is not None and (not valid_num_samples(max_sample_ratio) or max_sample_ratio < 1):
            raise ValueError(f"max_sample_ratio must be a number >= 1 or null (no cap), got {max_sample_ratio!r}")
        self.max_sample_ratio = max_sample_ratio
        self.max_abs_weight = check_max_abs(max_abs_weight)
        from lightyear.site_settings import model_options

        allowed = model_options(model)
        if allowed is not None and set(self.model_args) - allowed:
            raise ValueError(f"model_args {sorted(set(self.model_args) - allowed)} are not options of model {model!r}; allowed: {sorted(allowed)}")
        self.aggregator: StarAggregator | None = None
        self._run_dir = ""
        self._finals: list[dict] = []
        self._sites: list[str] = []

    def initial_weights(self) -> dict:
        """The seeded initial global model, as every site would build it."""
        from lightyear.models import build_model
        from lightyear.training.weights import get_weights

        net = build_model(self.model, self.num_classes, self.in_channels, seed=self.seed, **self.model_args)
        return get_weights(net)

    def start_controller(self, fl_ctx: FLContext):
        C.register_decomposers()
        engine = fl_ctx.get_engine()
        self.aggregator = engine.get_component(self.aggregator_id)
        if not isinstance(self.aggregator, StarAggregator):
            self.system_panic(f"aggregator_id {self.aggregator_id!r} names no StarAggregator component", fl_ctx)
        self._run_dir = engine.get_workspace().get_run_dir(fl_ctx.get_job_id())

    def stop_controller(self, fl_ctx: FLContext):
        pass

    def _task(self, name: str, round_num: int, weights) -> Task:
        data = Shareable()
        data[C.KEY_ROUND] = round_num
        data[C.KEY_CONFIG] = {"seed": self.seed, "rounds": self.rounds}
        data[C.KEY_WEIGHTS] = weights
        data.update(self.aggregator.task_extras(round_num) if self.aggregator else {})
        return Task(name=name, data=data, timeout=int(self.train_timeout))

    def control_flow(self, abort_signal: Signal, fl_ctx: FLContext):
        self._sites = sorted(c.name for c in fl_ctx.get_engine().get_clients())
        try:
            self._control(abort_signal, fl_ctx)
        finally:
            self._write_summary(fl_ctx)

    def _control(self, abort_signal: Signal, fl_ctx: FLContext) -> None:
        sites = self._sites
        need = min(self.min_clients or default_min_clients(len(sites)), len(sites))
        global_weights = self.initial_weights()
        self.log_info(fl_ctx, f"{len(sites)} sites, {self.rounds} rounds; a round is aggregated once {need} sites answered")
        for round_num in range(self.rounds):
            if abort_signal.triggered:
                return
            task = self._task(C.STAR_TRAIN_TASK, round_num, global_weights)
            self._broadcast(task, sites, need, abort_signal, fl_ctx)
            if abort_signal.triggered:
                return
            results = self._collect(task, global_weights, round_num, fl_ctx)
            if len(results) < need:
                self.log_error(fl_ctx, f"round {round_num}: only {len(results)} valid results, {need} needed: the global model is kept")
                continue
            global_weights = self.aggregator.aggregate(global_weights, results, round_num, fl_ctx)
            save_npz_atomic(os.path.join(self._run_dir, "global_model.npz"), global_weights)
            state = self.aggregator.state()
            if state:
                blob = json.dumps(state, default=float).encode()
                atomic_write(os.path.join(self._run_dir, "aggregator_state.json"), lambda f: f.write(blob))
            self.log_info(fl_ctx, f"round {round_num}: aggregated {sorted(results)}")

        task = self._task(C.STAR_EVAL_TASK, self.rounds, global_weights)
        self._broadcast(task, sites, need, abort_signal, fl_ctx)
        for ct in task.client_tasks:
            result = ct.result
            if isinstance(result, Shareable) and result.get_return_code() == ReturnCode.OK and isinstance(result.get(C.KEY_RESULT), dict):
                self._finals.append(dict(result[C.KEY_RESULT], site=ct.client.name, status="finished", last_round=self.rounds - 1))

    def _broadcast(self, task: Task, sites, need: int, abort_signal: Signal, fl_ctx: FLContext) -> None:
        self.broadcast_and_wait(
            task=task,
            fl_ctx=fl_ctx,
            targets=sites,
            min_responses=need,
            wait_time_after_min_received=int(math.ceil(self.wait_time_after_min_received)),
            abort_signal=abort_signal,
        )

    def _write_summary(self, fl_ctx: FLContext) -> None:
        if not self._sites:
            return
        done = {f["site"] for f in self._finals}
        missing = [{"site": s, "status": "dropped", "reason": "no final evaluation result", "test": {}} for s in self._sites if s not in done]
        rows = summarize_sites(self._finals + missing)
        path = write_summary(rows, self._run_dir)
        self.log_info(fl_ctx, f"final test metrics of the global model (written to {path}):\n{format_table(rows)}")

    def _collect(self, task: Task, global_weights: dict, round_num: int, fl_ctx: FLContext) -> dict:
        """The round's valid results, checked against the global model; results are keyed by the
        identity FLARE authenticated and cast to the global model's dtypes."""
        claimed, models = {}, {}
        for ct in task.client_tasks:
            site, result = ct.client.name, ct.result
            if not (isinstance(result, Shareable) and result.get_return_code() == ReturnCode.OK):
                rc = result.get_return_code() if isinstance(result, Shareable) else "no result"
                reason = result.get(C.KEY_ERROR, "") if isinstance(result, Shareable) else ""
                self.log_warning(fl_ctx, f"round {round_num}: {site} returned {rc} {reason}")
                continue
            weights, n = result.get(C.KEY_WEIGHTS), result.get(C.KEY_NUM_SAMPLES)
            problems = model_problems(weights, global_weights, self.max_abs_weight)
            if not valid_num_samples(n):
                problems.append(f"num_samples must be a finite positive number, got {n!r}")
            if problems:
                self.log_warning(fl_ctx, f"round {round_num}: rejected the result of {site}: {'; '.join(problems)}")
                continue
            claimed[site] = float(n)
            models[site] = {k: np.asarray(v).astype(global_weights[k].dtype, copy=False) for k, v in weights.items()}
            models[site].update({k: global_weights[k] for k in global_weights if not np.issubdtype(global_weights[k].dtype, np.floating)})
        counts = capped_counts(claimed, self.max_sample_ratio)
        for site in counts:
            if counts[site] < claimed[site]:
                self.log_warning(fl_ctx, f"round {round_num}: {site} claimed {claimed[site]:g} samples; capped at {counts[site]:g}")
        return {s: {"weights": models[s], "num_samples": counts[s]} for s in models}

    def process_result_of_unknown_task(self, client: Client, task_name: str, client_task_id: str, result: Shareable, fl_ctx: FLContext):
        self.log_warning(fl_ctx, f"ignored a result of unknown task {task_name!r} from {client.name}")

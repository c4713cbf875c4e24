"""Server side of the peer-to-peer topology: configures the sites and monitors their rounds.

The server never receives, stores or aggregates model weights. It sends every site one task
carrying the rounds, the seed and each site's neighbour list, then watches the per-round
progress the sites report. A site that does not pick up the task within ``start_timeout`` ends
the run with an error that says how to fix it; a site silent for ``progress_timeout`` is dropped
and the others go on. At the end it writes ``summary.csv``/``summary.json`` (every site's final
test metrics, mean and std over benign sites) and ``progress.jsonl`` (every round record the sites
reported, one JSON object a line).
"""

from __future__ import annotations

import json
import os
import threading
import time

from nvflare.apis.client import Client
from nvflare.apis.controller_spec import ClientTask, Task
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.impl.controller import Controller
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal

from lightyear.checks import integer, positive_int, positive_seconds
from lightyear.flare import constants as C
from lightyear.flare.topology import TOPOLOGIES, neighbours_of
from lightyear.records import format_table, summarize_sites, write_summary


class P2PController(Controller):
    def __init__(
        self,
        rounds: int = 12,
        seed: int = 0,
        topology: str = "full",
        start_timeout: float = 40.0,
        progress_timeout: float = 900.0,
        run_timeout: float = 86400.0,
        topology_args: dict | None = None,
    ):
        """Args:
        rounds: communication rounds every site runs.
        seed: the job seed (data splits, initial model, batch order, malfunction draws).
        topology: ``full`` (every site a neighbour of every other), ``ring``, or ``none``
            (sites train alone: the local-training baseline).
        start_timeout: seconds within which every site must pick up the run task.
        progress_timeout: seconds a site may stay silent (no round finished) before it is dropped.
        run_timeout: seconds the whole run may take.
        topology_args: extra arguments of the topology (see ``lightyear.flare.topology``).
        """
        super().__init__()
        self.rounds = positive_int("rounds", rounds)
        self.seed = integer("seed", seed)
        if topology not in TOPOLOGIES:
            raise ValueError(f"unknown topology {topology!r}; choose one of {', '.join(TOPOLOGIES)}")
        self.topology = topology
        self.topology_args = dict(topology_args or {})
        self.start_timeout = positive_seconds("start_timeout", start_timeout)
        self.progress_timeout = positive_seconds("progress_timeout", progress_timeout)
        self.run_timeout = positive_seconds("run_timeout", run_timeout)
        self._lock = threading.Lock()
        self._last_seen: dict[str, float] = {}
        self._results: dict[str, dict] = {}
        self._errors: dict[str, str] = {}

    def start_controller(self, fl_ctx: FLContext):
        C.register_decomposers()
        fl_ctx.get_engine().register_aux_message_handler(topic=C.TOPIC_PROGRESS, message_handle_func=self._on_progress)
        self._run_dir = fl_ctx.get_engine().get_workspace().get_run_dir(fl_ctx.get_job_id())

    def stop_controller(self, fl_ctx: FLContext):
        pass

    def _on_progress(self, topic: str, request: Shareable, fl_ctx: FLContext) -> Shareable:
        row = request.get(C.KEY_PROGRESS) or {}
        site = str(row.get("site", "?"))
        with self._lock:
            self._last_seen[site] = time.monotonic()
            with open(os.path.join(self._run_dir, "progress.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
        summary = ", ".join(
            f"{k} {row[k]:.4f}" if isinstance(row.get(k), float) else f"{k} {row.get(k)}"
            for k in ("selected", "val_acc", "val_dice", "test_acc", "test_dice", "wait_s")
            if k in row
        )
        self.log_info(fl_ctx, f"progress {site} round {row.get('round')}: {summary}")
        return make_reply(ReturnCode.OK)

    def _on_result(self, client_task: ClientTask, fl_ctx: FLContext):
        site = client_task.client.name
        result = client_task.result
        rc = result.get_return_code() if isinstance(result, Shareable) else None
        with self._lock:
            if rc == ReturnCode.OK and result.get(C.KEY_RESULT):
                self._results[site] = result[C.KEY_RESULT]
            else:
                self._errors[site] = (result.get(C.KEY_ERROR) if isinstance(result, Shareable) else None) or f"return code {rc}"

    def control_flow(self, abort_signal: Signal, fl_ctx: FLContext):
        clients: list[Client] = fl_ctx.get_engine().get_clients()
        sites = sorted(c.name for c in clients)
        if not sites:
            self.system_panic("no site is connected to run the job", fl_ctx)
            return
        neighbours = {s: neighbours_of(s, sites, self.topology, seed=self.seed, **self.topology_args) for s in sites}
        self.log_info(fl_ctx, f"{len(sites)} sites, topology {self.topology}, {self.rounds} rounds, seed {self.seed}")
        data = Shareable()
        data[C.KEY_CONFIG] = {"rounds": self.rounds, "seed": self.seed, "neighbours": neighbours}
        task = Task(
            name=C.P2P_RUN_TASK,
            data=data,
            timeout=int(self.run_timeout),
            result_received_cb=self._on_result,
        )
        self.broadcast(task=task, fl_ctx=fl_ctx, targets=sites, min_responses=len(sites))
        start = time.monotonic()
        dropped: set[str] = set()
        while True:
            if abort_signal.triggered:
                self.cancel_task(task, fl_ctx=fl_ctx)
                return
            now = time.monotonic()
            with self._lock:
                done = set(self._results) | set(self._errors)
                errors = dict(self._errors)
            if errors:
                self.cancel_task(task, fl_ctx=fl_ctx)
                message = "; ".join(f"{s}: {e}" for s, e in sorted(errors.items()))
                self._write_summary(sites, dropped | set(errors), fl_ctx)
                self.system_panic(f"the peer-to-peer run failed: {message}", fl_ctx)
                return
            started = {ct.client.name for ct in task.client_tasks}
            if now - start > self.start_timeout and started != set(sites):
                missing = sorted(set(sites) - started)
                self.cancel_task(task, fl_ctx=fl_ctx)
                self.system_panic(
                    f"sites {missing} did not start the run within start_timeout={self.start_timeout:g} s. Every site "
                    "of a peer-to-peer job runs at the same time: in FLARE's simulator give -t equal to the number of "
                    f"sites (nvflare simulator JOB -w WORKSPACE -t {len(sites)}); in a deployment check that they are connected",
                    fl_ctx,
                )
                return
            for site in sorted(started - done - dropped):
                with self._lock:
                    last = self._last_seen.get(site, start)
                if now - last > self.progress_timeout:
                    dropped.add(site)
                    self.log_error(fl_ctx, f"{site} reported no round for {self.progress_timeout:g} s: dropped from the run")
            if done | dropped >= set(sites):
                break
            if task.completion_status is not None and not (set(sites) - done - dropped):
                break
            if task.completion_status is not None:
                self.log_error(fl_ctx, f"run task ended ({task.completion_status}) before {sorted(set(sites) - done)} finished")
                dropped |= set(sites) - done
                break
            time.sleep(0.5)
        if dropped:
            self.cancel_task(task, fl_ctx=fl_ctx)
        self._write_summary(sites, dropped, fl_ctx)

    def _write_summary(self, sites: list[str], failed: set[str], fl_ctx: FLContext) -> None:
        with self._lock:
            results = [dict(r, status="finished") for r in self._results.values()]
        results += [{"site": s, "status": "dropped", "test": {}} for s in sorted(failed) if s not in self._results]
        if not results:
            return
        rows = summarize_sites(results)
        path = write_summary(rows, self._run_dir)
        self.log_info(fl_ctx, f"final test metrics (written to {path}):\n{format_table(rows)}")

    def process_result_of_unknown_task(self, client: Client, task_name: str, client_task_id: str, result: Shareable, fl_ctx: FLContext):
        self.log_warning(fl_ctx, f"ignored a result of unknown task {task_name!r} from {client.name}")

"""Site side of the peer-to-peer topology: the rounds run on the sites, not on the server.

One long task (``lightyear_p2p_run``) carries the neighbour lists, rounds and seed. Each round a
site trains locally, sends its model to every neighbour as a client-to-client message, waits for
the neighbours' models of that round until ``peer_deadline``, rejects malformed ones, lets the
aggregation rule (a subclass's :meth:`P2PExecutor.aggregate`) build its new model, evaluates it,
writes one record row and reports progress to the server.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
import time
import traceback

import numpy as np
from nvflare.apis.event_type import EventType
from nvflare.apis.executor import Executor
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal

from lightyear.algorithms.model_check import model_problems
from lightyear.checks import positive_seconds
from lightyear.flare import constants as C
from lightyear.flare.peer_buffer import PeerModelBuffer
from lightyear.flare.process_memory import limit_malloc_arenas, release_free_memory
from lightyear.records import RoundLog
from lightyear.training.compute_slots import ComputeSlots, resolve_slots
from lightyear.training.weights import num_bytes

TRANSFER_DTYPES = ("float32", "float16")


@dataclass
class Aggregation:
    """What an aggregation rule returns: the new weights, record fields, and seconds spent scoring."""

    weights: dict
    fields: dict = field(default_factory=dict)
    score_s: float = 0.0


class P2PExecutor(Executor):
    """Base of the peer-to-peer executors; subclasses implement :meth:`aggregate`."""

    def __init__(
        self,
        dataset: str = "digits",
        model: str = "cnn",
        dataset_args: dict | None = None,
        model_args: dict | None = None,
        train_args: dict | None = None,
        data_root: str | None = None,
        peer_deadline: float = 120.0,
        ready_timeout: float = 45.0,
        send_timeout: float = 60.0,
        transfer_dtype: str = "float32",
        malfunction_id: str | None = None,
        num_threads: int = 1,
        compute_slots="auto",
        records_file: str = "rounds.csv",
    ):
        """Args:
        dataset, dataset_args, data_root: the site's data (see ``lightyear.data``).
        model, model_args: the network (see ``lightyear.models``).
        train_args: local training settings (``lightyear.training.trainer.TrainConfig`` fields).
        peer_deadline: seconds a site waits for its neighbours' models after sending its own;
            a neighbour that has not delivered by then is skipped for that round.
        ready_timeout: seconds to wait at the start until every neighbour answers.
        send_timeout: seconds one send to the neighbours may take.
        transfer_dtype: ``float32`` or ``float16`` (half the bytes on the wire).
        malfunction_id: id of a :class:`~lightyear.flare.malfunction_filter.MalfunctionFilter`
            component that corrupts what this site sends; None for a benign site.
        num_threads: torch CPU threads of this site's process (1 suits many sites on few cores).
        compute_slots: how many sites on one machine may compute at once (``auto`` = its CPU
            count, 0 = no limit); see :mod:`lightyear.training.compute_slots`.
        records_file: the per-round CSV written in the site's run folder.
        """
        super().__init__()
        from lightyear.training.site_runtime import runtime_arguments

        # bad training settings stop the job before it starts
        self.runtime_args = runtime_arguments(dataset, model, dataset_args, model_args, train_args, data_root, num_threads)
        self.peer_deadline = positive_seconds("peer_deadline", peer_deadline)
        self.ready_timeout = positive_seconds("ready_timeout", ready_timeout)
        self.send_timeout = positive_seconds("send_timeout", send_timeout)
        if transfer_dtype not in TRANSFER_DTYPES:
            raise ValueError(f"transfer_dtype must be one of {TRANSFER_DTYPES}, got {transfer_dtype!r}")
        self.transfer_dtype = transfer_dtype
        self.malfunction_id = malfunction_id
        self.records_file = records_file
        self.compute_slots = resolve_slots(compute_slots)
        self.slots = ComputeSlots(0)  # replaced by the shared slots when the run starts
        self.buffer = PeerModelBuffer()
        self.neighbours: list[str] = []
        self.ready = False
        self.runtime = None
        self.malfunction = None
        self.site = ""
        self._send_threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ aggregation rule
    def aggregate(self, round_num: int, own: dict, received: dict[str, dict]) -> Aggregation:
        """Build the new own model from the own model and the valid models received this round."""
        raise NotImplementedError

    # ------------------------------------------------------------------ FLARE events
    def handle_event(self, event_type: str, fl_ctx: FLContext):
        if event_type == EventType.START_RUN:
            limit_malloc_arenas()
            C.register_decomposers()
            engine = fl_ctx.get_engine()
            engine.register_aux_message_handler(topic=C.TOPIC_PING, message_handle_func=self._on_ping)
            engine.register_aux_message_handler(topic=C.TOPIC_MODEL, message_handle_func=self._on_model)
            self.site = fl_ctx.get_identity_name()
            if self.malfunction_id:
                self.malfunction = engine.get_component(self.malfunction_id)
                if self.malfunction is None or not hasattr(self.malfunction, "corrupt"):
                    self.system_panic(
                        f"malfunction_id {self.malfunction_id!r} names no MalfunctionFilter component in this site's config",
                        fl_ctx,
                    )

    def _on_ping(self, topic: str, request: Shareable, fl_ctx: FLContext) -> Shareable:
        reply = make_reply(ReturnCode.OK)
        reply["ready"] = self.ready
        return reply

    def _on_model(self, topic: str, request: Shareable, fl_ctx: FLContext) -> Shareable:
        sender = request.get_peer_prop(key=ReservedKey.IDENTITY_NAME, default=None)
        round_num = request.get(C.KEY_ROUND)
        if sender not in self.neighbours or not isinstance(round_num, int):
            self.log_warning(fl_ctx, f"refused a model from {sender!r} (round {round_num!r}): not a neighbour or no round")
            return make_reply(ReturnCode.BAD_REQUEST_DATA)
        if not self.buffer.put(round_num, sender, request.get(C.KEY_WEIGHTS)):
            self.log_warning(fl_ctx, f"model from {sender} for round {round_num} arrived after that round ended: dropped")
        return make_reply(ReturnCode.OK)

    # ------------------------------------------------------------------ the run
    def execute(self, task_name: str, shareable: Shareable, fl_ctx: FLContext, abort_signal: Signal) -> Shareable:
        if task_name != C.P2P_RUN_TASK:
            self.log_error(fl_ctx, f"unknown task {task_name!r}")
            return make_reply(ReturnCode.TASK_UNKNOWN)
        try:
            result = self._run(shareable.get(C.KEY_CONFIG) or {}, fl_ctx, abort_signal)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the server as a message
            message = f"{self.site}: {type(exc).__name__}: {exc}"
            self.log_error(fl_ctx, message + "\n" + traceback.format_exc())
            reply = make_reply(ReturnCode.EXECUTION_EXCEPTION)
            reply[C.KEY_ERROR] = message
            return reply
        if result is None:
            return make_reply(ReturnCode.TASK_ABORTED)
        reply = make_reply(ReturnCode.OK)
        reply[C.KEY_RESULT] = result
        return reply

    def _run(self, config: dict, fl_ctx: FLContext, abort_signal: Signal) -> dict | None:
        from lightyear.training.site_runtime import SiteRuntime

        rounds, seed = int(config["rounds"]), int(config["seed"])
        self.neighbours = sorted(config.get("neighbours", {}).get(self.site, []))
        self.slots = ComputeSlots(self.compute_slots, group=f"{fl_ctx.get_job_id()}")
        with self.slots.hold():
            self.runtime = SiteRuntime(self.site, seed=seed, **self.runtime_args)
        self.log_info(fl_ctx, f"data {self.runtime.data.sizes()}, neighbours {self.neighbours}, device {self.runtime.trainer.device}")
        self.ready = True
        self._handshake(fl_ctx, abort_signal)

        run_dir = fl_ctx.get_engine().get_workspace().get_run_dir(fl_ctx.get_job_id())
        log = RoundLog(os.path.join(run_dir, self.records_file))
        kind = self.malfunction.kind if self.malfunction is not None else "none"
        val = test = {}
        for round_num in range(rounds):
            if abort_signal.triggered:
                return None
            row = self._round(round_num, fl_ctx, abort_signal)
            if row is None:
                return None
            val, test = row.pop("_val"), row.pop("_test")
            log.write(row)
            self._report(row, fl_ctx)
            release_free_memory()
        for thread in self._send_threads:
            thread.join(timeout=self.send_timeout)
        return {"site": self.site, "malfunction": kind, "rounds": rounds, "val": val, "test": test}

    def _handshake(self, fl_ctx: FLContext, abort_signal: Signal) -> None:
        """Wait until every neighbour runs this job and is ready, or fail with the reason."""
        engine = fl_ctx.get_engine()
        pending = set(self.neighbours)
        deadline = time.monotonic() + self.ready_timeout
        while pending and not abort_signal.triggered:
            replies = engine.send_aux_request(
                targets=sorted(pending), topic=C.TOPIC_PING, request=Shareable(), timeout=3.0, fl_ctx=fl_ctx
            ) or {}
            for peer, reply in replies.items():
                if isinstance(reply, Shareable) and reply.get_return_code() == ReturnCode.OK and reply.get("ready"):
                    pending.discard(peer)
            if not pending:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"neighbours {sorted(pending)} did not answer within ready_timeout={self.ready_timeout:g} s. "
                    "Every site of a peer-to-peer job must run at the same time: in FLARE's simulator give "
                    f"-t equal to the number of sites (e.g. nvflare simulator JOB -w WORKSPACE -t {len(self.neighbours) + 1}); "
                    "in a deployment check that those sites are connected"
                )
            time.sleep(0.5)
        self.log_info(fl_ctx, f"all {len(self.neighbours)} neighbours ready")

    def _round(self, round_num: int, fl_ctx: FLContext, abort_signal: Signal) -> dict | None:
        rt = self.runtime
        self.slots.waited_s = 0.0
        t0 = time.perf_counter()
        with self.slots.hold():
            train_stats = rt.train(round_num)
            own = rt.get_weights()
        t1 = time.perf_counter()

        outgoing, applied = own, "none"
        if self.malfunction is not None:
            outgoing, applied = self.malfunction.corrupt(own, round_num, self.site)
            self.log_info(fl_ctx, f"round {round_num}: malfunction sends a {applied} model")
        outgoing = self._to_wire(outgoing)
        sent = {"bytes": 0}
        if self.neighbours:
            thread = threading.Thread(
                target=self._send_model, args=(round_num, outgoing, fl_ctx.get_engine(), sent), daemon=True
            )
            thread.start()
            self._send_threads = [t for t in self._send_threads if t.is_alive()] + [thread]

        received = self.buffer.wait_for(round_num, self.neighbours, self.peer_deadline, abort=lambda: abort_signal.triggered)
        if abort_signal.triggered:
            return None
        t2 = time.perf_counter()
        late = sorted(set(self.neighbours) - set(received))
        if late:
            self.log_warning(fl_ctx, f"round {round_num}: no model from {late} within peer_deadline={self.peer_deadline:g} s; skipped this round")
        valid, rejected = {}, {}
        for peer, weights in received.items():
            problems = model_problems(weights, own)
            if problems:
                rejected[peer] = "; ".join(problems)
                self.log_warning(fl_ctx, f"round {round_num}: rejected the model of {peer}: {rejected[peer]}")
            else:
                valid[peer] = {k: np.asarray(v).astype(own[k].dtype, copy=False) for k, v in weights.items()}

        with self.slots.hold():
            outcome = self.aggregate(round_num, own, valid)
        t3 = time.perf_counter()
        self.buffer.release(round_num)
        with self.slots.hold():
            rt.set_weights(outcome.weights)
            val, test = rt.evaluate("val"), rt.evaluate("test")
        t4 = time.perf_counter()

        row = {"round": round_num, "site": self.site, "malfunction": applied}
        row.update(outcome.fields)
        row.update({"late": late, "rejected": sorted(rejected), "train_loss": train_stats["train_loss"]})
        row.update({f"val_{k}": v for k, v in val.items()})
        row.update({f"test_{k}": v for k, v in test.items()})
        if self._send_threads:
            self._send_threads[-1].join(timeout=2.0)
        row.update(
            {
                "train_s": t1 - t0,
                "wait_s": t2 - t1,
                "score_s": outcome.score_s,
                "aggregate_s": (t3 - t2) - outcome.score_s,
                "eval_s": t4 - t3,
                "slot_wait_s": self.slots.waited_s,
                "model_bytes": num_bytes(outgoing),
                "bytes_sent": sent["bytes"],
                "send_s": sent.get("send_s", ""),
                "neighbours": len(self.neighbours),
            }
        )
        row["_val"], row["_test"] = val, test
        self.log_info(
            fl_ctx,
            f"round {round_num}: selected {outcome.fields.get('selected', '-')}, val "
            + ", ".join(f"{k} {v:.4f}" for k, v in val.items())
            + ", test "
            + ", ".join(f"{k} {v:.4f}" for k, v in test.items()),
        )
        return row

    def _to_wire(self, weights: dict) -> dict:
        if self.transfer_dtype == "float32":
            return weights
        return {k: (v.astype(np.float16) if np.issubdtype(v.dtype, np.floating) else v) for k, v in weights.items()}

    def _send_model(self, round_num: int, weights: dict, engine, sent: dict) -> None:
        """Send this round's model to every neighbour; re-send only to those that did not answer OK."""
        fl_ctx = engine.new_context()
        pending = set(self.neighbours)
        deadline = time.monotonic() + self.peer_deadline
        size = num_bytes(weights)
        start = time.perf_counter()
        while pending and time.monotonic() < deadline:
            request = Shareable()
            request[C.KEY_ROUND] = round_num
            request[C.KEY_WEIGHTS] = weights
            timeout = max(1.0, min(self.send_timeout, deadline - time.monotonic()))
            replies = engine.send_aux_request(
                targets=sorted(pending), topic=C.TOPIC_MODEL, request=request, timeout=timeout, fl_ctx=fl_ctx
            ) or {}
            for peer, reply in replies.items():
                if isinstance(reply, Shareable) and reply.get_return_code() == ReturnCode.OK:
                    pending.discard(peer)
                    sent["bytes"] += size
            if pending:
                time.sleep(1.0)
        if not pending:
            sent["send_s"] = time.perf_counter() - start
        if pending:
            self.log_warning(fl_ctx, f"round {round_num}: could not deliver the model to {sorted(pending)}")

    def _report(self, row: dict, fl_ctx: FLContext) -> None:
        """Send the round's record to the server (fire and forget: the server only monitors)."""
        message = Shareable()
        message[C.KEY_PROGRESS] = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in row.items()}
        try:
            fl_ctx.get_engine().send_aux_request(
                targets=["server"], topic=C.TOPIC_PROGRESS, request=message, timeout=0.0, fl_ctx=fl_ctx
            )
        except Exception as exc:  # noqa: BLE001 - monitoring must never stop training
            self.log_warning(fl_ctx, f"could not report progress to the server: {exc}")

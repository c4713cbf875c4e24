"""Site side of the peer-to-peer topology: the rounds run on the sites, not on the server.

One long task (``lightyear_p2p_run``) carries the graph, rounds and seed. :meth:`P2PExecutor._start` sets the site up;
each :meth:`P2PExecutor._round` trains, sends (what the outgoing hook may replace), collects until ``peer_deadline``,
aggregates (:meth:`P2PExecutor.aggregate`, which a method implements), evaluates, records and checkpoints. Every run
ends with ``site_status.json``: ``finished``, ``stopped``, ``failed`` or ``aborted``, the reason and the last round.
"""

from __future__ import annotations

import os
import time
import traceback

from nvflare.apis.event_type import EventType
from nvflare.apis.executor import Executor
from nvflare.apis.fl_constant import ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal

from lightyear.algorithms.model_check import DEFAULT_MAX_ABS, check_max_abs
from lightyear.checks import boolean, non_empty_string, positive_int, positive_seconds
from lightyear.flare import constants as C
from lightyear.flare import received_payloads
from lightyear.flare.analytics import stream_round
from lightyear.flare.early_pings import quiet_early_pings
from lightyear.flare.process_memory import HeapTrimmer, limit_malloc_arenas
from lightyear.models import model_symmetries
from lightyear.p2p.site.aggregation import Aggregation
from lightyear.p2p.site.checkpoint import CHECKPOINT_FILE, SiteCheckpoint, save_site_checkpoint
from lightyear.p2p.site.handshake import (
    ABORTED,
    FAILED,
    FINISHED,
    READY,
    STARTING,
    STOPPED,
    NeighboursGone,
    ping_answer,
)
from lightyear.p2p.site.isolation import (
    DEFAULT_MAX_ISOLATED_ROUNDS,
    IsolationWatch,
    SiteIsolated,
    check_max_isolated_rounds,
)
from lightyear.p2p.site.result_watch import DeliveryWatch, watch_delivery
from lightyear.p2p.site.resume import check_resume_from, find_checkpoint, resume_into
from lightyear.p2p.site.run_start import ExchangeSettings, graph_neighbours, greet_neighbours, open_exchange
from lightyear.p2p.site.sampling import RoundSampling, check_sample_setting
from lightyear.p2p.site.sending import OutgoingHook, Sending, SendingRun, encoded, hook_problem
from lightyear.p2p.wire.cell_gate import PeerGate
from lightyear.p2p.wire.exchange import Inbox, PeerExchange, PerReceiver
from lightyear.p2p.wire.payload import FLOAT16_DELTA, TRANSFER_DTYPES, check_transfer_dtype
from lightyear.records import RoundLog, check_records_file, write_site_status
from lightyear.training.compute_slots import ComputeSlots, resolve_slots
from lightyear.training.site_runtime import SiteRuntime, runtime_arguments
from lightyear.training.weights import num_bytes

FLIPPED_LABELS = "lf"
"""What the records call a site that trains on flipped labels (``lightyear.algorithms.attacks.updates.LF``)."""

__all__ = ["Aggregation", "P2PExecutor", "TRANSFER_DTYPES"]


class P2PExecutor(Executor):
    """Base of the peer-to-peer executors; subclasses implement :meth:`aggregate`."""

    shares_dataset_size = False
    """True: every model message carries this site's training-set size (for rules weighting by it)."""

    predicted_outcome = None
    """None, or ``predicted_outcome(round_num, receiver, others, copies)``: the defence's oracle for an attacker."""

    def __init__(
        self,
        dataset: str = "digits",
        model: str = "cnn",
        dataset_args: dict | None = None,
        model_args: dict | None = None,
        train_args: dict | None = None,
        data_root: str | None = None,
        peer_deadline: float = 120.0,
        ready_timeout: float = 90.0,
        send_timeout: float = 60.0,
        max_missed_rounds: int = 2,
        max_abs_weight: float | None = DEFAULT_MAX_ABS,
        transfer_dtype: str = "float32",
        malfunction_id: str | None = None,
        attack_id: str | None = None,
        flip_labels: bool = False,
        num_threads: int = 1,
        compute_slots="auto",
        records_file: str = "rounds.csv",
        sample_neighbours=None,
        max_isolated_rounds: int | None = DEFAULT_MAX_ISOLATED_ROUNDS,
        resume_from: str | None = None,
    ):
        """Args (the job settings of ``docs/jobs-and-settings.md`` and ``docs/methods.md``):
        dataset, dataset_args, data_root, model, model_args, train_args, num_threads: the site's data, network and
            training (:func:`~lightyear.training.site_runtime.runtime_arguments`).
        peer_deadline, ready_timeout, send_timeout: seconds to wait each round for the neighbours' models (a late one
            is skipped), at the start for every neighbour to answer, and for one send.
        max_missed_rounds: a neighbour that missed this many rounds in a row is no longer waited for (still heard).
        max_abs_weight: a received model with a value beyond this magnitude is rejected (None: no bound).
        transfer_dtype: ``float32``, ``float16`` or ``float16_delta`` (:mod:`lightyear.p2p.wire.payload`).
        malfunction_id, attack_id: id of a :class:`~lightyear.flare.malfunction_filter.MalfunctionFilter` or an
            :class:`~lightyear.p2p.site.sending.OutgoingHook` changing what this site sends; None: benign.
        flip_labels: train on labels (y + 1) mod C (the label-flipping attack).
        compute_slots: sites of one machine computing at once (``auto`` = its CPU count, 0 = no limit).
        records_file: file name of the per-round CSV in the site's run folder.
        sample_neighbours, max_isolated_rounds, resume_from: see :mod:`lightyear.p2p.site.sampling`,
            :mod:`lightyear.p2p.site.isolation` and :mod:`lightyear.p2p.site.resume`.
        """
        super().__init__()
        quiet_early_pings()  # built before the job cell takes messages: a peer's early ping is no ERROR
        self.runtime_args = runtime_arguments(
            dataset, model, dataset_args, model_args, train_args, data_root, num_threads
        )
        self.peer_deadline = positive_seconds("peer_deadline", peer_deadline)
        self.ready_timeout = positive_seconds("ready_timeout", ready_timeout)
        self.send_timeout = positive_seconds("send_timeout", send_timeout)
        self.max_missed_rounds = positive_int("max_missed_rounds", max_missed_rounds)
        self.max_abs_weight = check_max_abs(max_abs_weight)
        self.transfer_dtype = check_transfer_dtype(transfer_dtype)
        self.max_isolated_rounds = check_max_isolated_rounds(max_isolated_rounds)
        self.isolation = IsolationWatch(self.max_isolated_rounds)
        self.resume_from = check_resume_from(resume_from)
        self.run_dir: str | None = None
        self.last_round = -1
        self.malfunction_id = malfunction_id
        if attack_id is not None:
            non_empty_string("attack_id", attack_id, note="the id of an attack component (PeerAttacker), or null")
        boolean("flip_labels", flip_labels, note="true: train on labels (y + 1) mod C")
        self.attack_id, self.flip_labels = attack_id, flip_labels
        self.records_file = check_records_file(records_file)
        self.compute_slots = resolve_slots(compute_slots)
        check_sample_setting(sample_neighbours)
        self.sample_neighbours = sample_neighbours
        self.slots = ComputeSlots(0)  # replaced by the shared slots when the run starts
        self.exchange: PeerExchange | None = None
        self.heap = HeapTrimmer()  # gives freed heap back as models arrive, once the site grew by a threshold
        self.sampling: RoundSampling | None = None
        self.rounds = 0
        self.seed = 0
        self.neighbours: list[str] = []
        self.in_neighbours: list[str] = []
        self.ready = False
        self.state, self.state_reason = STARTING, ""  # what a ping is answered (lightyear.p2p.site.handshake)
        self.runtime = None
        self.malfunction = None
        self.before_send = None  # the first round's wait for the start handshake
        self.attack: OutgoingHook | None = None
        self.site = ""
        self._abort = lambda: False
        self.delivery: DeliveryWatch | None = None
        self.gate = PeerGate(lambda level, message: getattr(self.logger, level)(message))

    # ------------------------------------------------------------------ the rule
    def aggregate(
        self, round_num: int, own: dict, received: dict[str, dict], inbox: Inbox | None = None
    ) -> Aggregation:
        """The new own model from the own model and the valid models received (``inbox``: the whole round's)."""
        raise NotImplementedError

    def exchange_mode(self) -> tuple[bool, float]:
        """(asynchronous, seconds to wait for new models) of this rule's exchange; synchronous by default."""
        return False, 5.0

    def method_state(self) -> tuple[dict, dict]:
        """(JSON state, array state) the rule keeps across rounds; saved in every checkpoint."""
        return {}, {}

    def restore_method_state(self, state: dict, arrays: dict) -> None:
        """Take back what :meth:`method_state` returned, when a site resumes."""

    def local_update(self, round_num: int) -> dict:
        """The round's local step on ``self.runtime``; returns the training statistics."""
        return self.runtime.train(round_num, flip_labels=self.flip_labels)

    def awaited_senders(self, round_num: int, senders: list[str]) -> list[str]:
        """Which of this round's ``senders`` to wait for (default: all of them)."""
        return senders

    def round_senders(self, round_num: int) -> list[str]:
        """The in-neighbours this site takes models from in ``round_num``."""
        if self.sampling is None:
            return list(self.exchange.receive_from)
        return self.sampling.senders(self.site, round_num)

    def round_receivers(self, round_num: int) -> list[str]:
        """The out-neighbours this site sends its model to in ``round_num``."""
        return list(self.exchange.send_to) if self.sampling is None else self.sampling.receivers(self.site, round_num)

    # ------------------------------------------------------------------ FLARE events
    def handle_event(self, event_type: str, fl_ctx: FLContext):
        if event_type == EventType.START_RUN:
            limit_malloc_arenas()
            received_payloads.install()  # models forwarded inside the server's message
            C.register_decomposers()
            engine = fl_ctx.get_engine()
            self.gate.watch(engine)  # before the handlers: nothing from a peer is decoded unchecked
            engine.register_aux_message_handler(topic=C.TOPIC_PING, message_handle_func=self._on_ping)
            engine.register_aux_message_handler(topic=C.TOPIC_MODEL, message_handle_func=self._on_model)
            engine.register_aux_message_handler(topic=C.TOPIC_FORWARD, message_handle_func=self._on_model)
            self.site = fl_ctx.get_identity_name()
            if self.malfunction_id and (problem := self._bind_malfunction(engine)):
                self.system_panic(problem, fl_ctx)
            if self.attack_id and (problem := self._bind_outgoing_hook(engine)):
                self.system_panic(problem, fl_ctx)
        elif event_type in (EventType.AFTER_SEND_TASK_RESULT, EventType.END_RUN) and self.delivery is not None:
            self.delivery.disarm()

    def _bind_malfunction(self, engine) -> str:
        """Take the component ``malfunction_id`` names; the reason the run cannot start, or ""."""
        self.malfunction = engine.get_component(self.malfunction_id)
        if self.malfunction is None or not hasattr(self.malfunction, "corrupt"):
            return f"malfunction_id {self.malfunction_id!r} names no MalfunctionFilter component in this site's config"
        return ""

    def _bind_outgoing_hook(self, engine) -> str:
        """Take the component ``attack_id`` names; the reason the run cannot start, or ""."""
        component = engine.get_component(self.attack_id)
        problem = hook_problem(self.attack_id, component, self.predicted_outcome, type(self).__name__)
        self.attack = None if problem else component
        return problem

    def _on_ping(self, topic: str, request: Shareable, fl_ctx: FLContext) -> Shareable:
        return ping_answer(self.state, self.state_reason, self.ready)

    def _on_model(self, topic: str, request: Shareable, fl_ctx: FLContext) -> Shareable:
        exchange = self.exchange
        if exchange is None:
            return make_reply(ReturnCode.SERVICE_UNAVAILABLE)
        try:
            return exchange.on_model(request, topic)
        except Exception as exc:  # noqa: BLE001 - a message can only get its sender refused
            self.log_warning(fl_ctx, f"refused a model message: {type(exc).__name__}: {exc}")
            return make_reply(ReturnCode.BAD_REQUEST_DATA)
        finally:  # the copies decoding made of the message, freed by now, go back to the system
            self.heap.check()

    # ------------------------------------------------------------------ the run
    def execute(self, task_name: str, shareable: Shareable, fl_ctx: FLContext, abort_signal: Signal) -> Shareable:
        if task_name != C.P2P_RUN_TASK:
            self.log_error(fl_ctx, f"unknown task {task_name!r}")
            return make_reply(ReturnCode.TASK_UNKNOWN)
        try:
            result = self._run(shareable.get(C.KEY_CONFIG) or {}, fl_ctx, abort_signal)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the server as a message
            stopped = isinstance(exc, (SiteIsolated, NeighboursGone))
            message = f"{self.site}: {exc}" if stopped else f"{self.site}: {type(exc).__name__}: {exc}"
            self.log_error(fl_ctx, message if stopped else message + "\n" + traceback.format_exc())
            self._end(STOPPED if stopped else FAILED, message, fl_ctx)
            reply = make_reply(ReturnCode.EXECUTION_EXCEPTION)
            reply[C.KEY_ERROR] = message
        else:
            if result is None:
                self._end(ABORTED, "the run was aborted", fl_ctx)
                return make_reply(ReturnCode.TASK_ABORTED)
            self._end(FINISHED, "", fl_ctx)
            reply = make_reply(ReturnCode.OK)
            reply[C.KEY_RESULT] = result
        self._watch_delivery(fl_ctx)
        return reply

    def _watch_delivery(self, fl_ctx: FLContext) -> None:
        """End this job process if the result cannot reach the server (:mod:`lightyear.p2p.site.result_watch`)."""
        self.delivery = watch_delivery(self, fl_ctx.get_engine(), self.peer_deadline, f"{self.site}: ", self.run_dir)

    def _end(self, state: str, reason: str, fl_ctx: FLContext) -> None:
        """The run ended: a ping now says how (and that this site takes no models), and so does site_status.json."""
        self.state, self.state_reason, self.ready = state, reason, False
        try:
            if self.run_dir is not None:
                checkpoint = os.path.join(self.run_dir, CHECKPOINT_FILE)
                kept = checkpoint if os.path.exists(checkpoint) else ""
                write_site_status(self.run_dir, self.site, state, reason, self.last_round, kept)
        except OSError as exc:
            self.log_warning(fl_ctx, f"could not write site_status.json: {exc}")

    def _log(self, fl_ctx: FLContext):
        """``log(level, message)`` into this component's FLARE log."""
        return lambda level, message: getattr(self, f"log_{level}")(fl_ctx, message)

    def _run(self, config: dict, fl_ctx: FLContext, abort_signal: Signal) -> dict | None:
        start, meta = self._start(config, fl_ctx, abort_signal)  # everything before the first round
        rounds, run_dir = self.rounds, self.run_dir
        log = RoundLog(os.path.join(run_dir, self.records_file))
        val = test = {}
        for round_num in range(start, rounds):
            if abort_signal.triggered:
                return None
            row = self._round(round_num, fl_ctx, abort_signal)
            if row is None:
                return None
            val, test = row.pop("_val"), row.pop("_test")
            log.write(row)
            state, arrays = self.method_state()
            save_site_checkpoint(run_dir, SiteCheckpoint(round_num, self.runtime.get_weights(), meta, state, arrays))
            self.last_round = round_num
            self._report(row, fl_ctx)
            if self.isolation.cut_off:
                raise SiteIsolated(self.isolation.reason(round_num, self.peer_deadline))
        if start >= rounds:
            val, test = self.runtime.evaluate("val"), self.runtime.evaluate("test")
        self.exchange.wait_sent(self.send_timeout)
        return {
            "site": self.site,
            "malfunction": self._kind(),
            "rounds": rounds,
            "last_round": rounds - 1,
            "val": val,
            "test": test,
        }

    def _start(self, config: dict, fl_ctx: FLContext, abort_signal: Signal) -> tuple[int, dict]:
        """Set the site up for the task's ``config``; (the first round to train, the checkpoint metadata). The
        checkpoint is found before the model is built (fails fast) and checked against it before any use."""
        rounds, seed = int(config["rounds"]), int(config["seed"])
        graph = config.get("neighbours", {})
        send_to, receive_from = graph_neighbours(graph, self.site)
        self.neighbours, self.in_neighbours = sorted(set(send_to) | set(receive_from)), receive_from
        self.rounds, self.seed = rounds, seed
        self.sampling = RoundSampling(graph, seed, self.sample_neighbours) if graph else None
        self._abort = lambda: abort_signal.triggered
        log = self._log(fl_ctx)
        run_dir = self.run_dir = fl_ctx.get_engine().get_workspace().get_run_dir(fl_ctx.get_job_id())
        meta = {"rounds": rounds, "seed": seed}
        found, source, fix = find_checkpoint(run_dir, meta, self.site, self.resume_from)
        start = 0 if found is None else found.round + 1
        self.last_round = start - 1
        self.isolation = IsolationWatch(self.max_isolated_rounds)
        self.slots = ComputeSlots(self.compute_slots, group=f"{fl_ctx.get_job_id()}")
        with self.slots.hold(self._abort):
            self.runtime = SiteRuntime(self.site, seed=seed, **self.runtime_args)
        initial = self.runtime.get_weights() if self.transfer_dtype == FLOAT16_DELTA else None  # the seeded model
        if found is not None:
            checkpoint = resume_into(self.runtime, self.restore_method_state, source, fix, self.max_abs_weight, rounds)
            self.log_info(fl_ctx, f"resuming from the checkpoint of round {checkpoint.round} in {source}")
        reference = self.runtime.get_weights()
        asynchronous, async_wait = self.exchange_mode()
        settings = ExchangeSettings(
            rounds,
            self.peer_deadline,
            self.send_timeout,
            self.max_missed_rounds,
            self.max_abs_weight,
            self.transfer_dtype,
            asynchronous,
            async_wait,
            self.runtime.data.sizes()["train"] if self.shares_dataset_size else None,
        )
        self.exchange, secure = open_exchange(
            self.site, config, settings, send_to, receive_from, start, reference, initial, self.gate, log, fl_ctx
        )
        if self.attack is not None:  # from now on the other attackers' models are taken
            self.attack.begin_run(self._sending_run(graph, start, reference, secure, log))
        self.log_info(
            fl_ctx,
            f"data {self.runtime.data.sizes()}, sends to {send_to}, receives from {receive_from}, "
            f"device {self.runtime.trainer.device}",
        )
        self.ready, self.state = True, READY
        self.before_send = greet_neighbours(
            self.neighbours, self.exchange, self.ready_timeout, self._abort, log, fl_ctx
        )
        return start, meta

    def _sending_run(self, graph: dict, start: int, reference: dict, secure: bool, log) -> SendingRun:
        """The run as the outgoing hook may know it (:class:`~lightyear.p2p.site.sending.SendingRun`)."""
        runtime = self.runtime
        return SendingRun(
            self.site,
            graph,
            self.rounds,
            start,
            self.peer_deadline,
            self.send_timeout,
            self.max_abs_weight,
            log,
            reference,
            self.exchange.codec,
            secure,
            symmetries=lambda: model_symmetries(runtime.model_name, reference, runtime.model_args),
            evaluate=runtime.evaluate,
            oracle=self.predicted_outcome,
        )

    def _kind(self) -> str:
        """What the site's records name it: its attack, ``lf`` (flipped labels), its malfunction or ``none``."""
        if self.attack is not None:
            return self.attack.kind
        if self.flip_labels:
            return FLIPPED_LABELS
        return self.malfunction.kind if self.malfunction is not None else "none"

    # ------------------------------------------------------------------ one round
    def _round(self, round_num: int, fl_ctx: FLContext, abort_signal: Signal) -> dict | None:
        """One round; its record row (``_val`` and ``_test`` hold the metrics), or None when aborted."""
        rt, exchange, engine, log = self.runtime, self.exchange, fl_ctx.get_engine(), self._log(fl_ctx)
        self.slots.waited_s = 0.0
        senders, receivers = self.round_senders(round_num), self.round_receivers(round_num)
        round_start = time.time()
        with self.slots.hold(self._abort):
            w0 = time.perf_counter()
            start = rt.get_weights() if self.attack is not None else None  # the round-start model
            train_stats = self.local_update(round_num)
            own = rt.get_weights()
            train_s = time.perf_counter() - w0
        if self.before_send is not None:
            self.before_send()  # the first round: the start handshake
            self.before_send = None
        t1 = time.perf_counter()

        outgoing, kind, hook_fields = self._outgoing(round_num, start, own, senders, receivers, engine, log)
        outgoing = encoded(exchange.codec, outgoing)
        sent = exchange.send(round_num, outgoing, engine, targets=receivers)
        inbox: Inbox = exchange.collect(
            round_num, self._abort, senders=senders, wait_for=self.awaited_senders(round_num, senders)
        )
        if abort_signal.triggered:
            return None
        t2 = time.perf_counter()
        if inbox.late:
            log(
                "warning",
                f"round {round_num}: no model from {inbox.late} within peer_deadline={self.peer_deadline:g} s; "
                "skipped this round",
            )
        for peer, reason in inbox.rejected.items():
            log("warning", f"round {round_num}: rejected the model of {peer}: {reason}")

        with self.slots.hold(self._abort):  # one slot for aggregation and evaluation: one queueing, not two
            a0 = time.perf_counter()
            outcome = self.aggregate(round_num, own, inbox.valid, inbox=inbox)
            aggregate_s = time.perf_counter() - a0 - outcome.score_s
            exchange.release(round_num)
            e0 = time.perf_counter()
            rt.set_weights(outcome.weights)
            val = dict(outcome.val_metrics) if outcome.val_metrics is not None else rt.evaluate("val")
            test = rt.evaluate("test")
            eval_s = time.perf_counter() - e0
        for peer, reason in outcome.rejected.items():
            log("warning", f"round {round_num}: rejected the model of {peer} while scoring it: {reason}")

        row = {"round": round_num, "site": self.site, "malfunction": kind, **outcome.fields, **hook_fields}
        rejected = sorted(set(inbox.rejected) | set(outcome.rejected))
        row.update({"late": inbox.late, "rejected": rejected, "not_waited_for": inbox.not_waited_for})
        row.update({"senders": senders, "receivers": receivers, "train_loss": train_stats["train_loss"]})
        row.update({f"{split}_{k}": v for split, got in (("val", val), ("test", test)) for k, v in got.items()})
        exchange.wait_last_send(2.0)  # so that the record has the bytes this round delivered
        self.isolation.update(bool(senders or receivers), bool(inbox.heard), sent["bytes"] > 0)
        one_model = next(iter(outgoing.values()), {}) if isinstance(outgoing, PerReceiver) else outgoing
        row.update(
            {
                "train_s": train_s,
                "wait_s": t2 - t1,
                "score_s": outcome.score_s,
                "aggregate_s": aggregate_s,
                "eval_s": eval_s,
                "slot_wait_s": self.slots.waited_s,
                "round_start": round_start,
                "round_end": time.time(),
                "model_bytes": num_bytes(one_model),
                "sent_bytes": sent["bytes"],
                "send_s": sent["send_s"],
                "neighbours": len(self.neighbours),
                "isolated_rounds": self.isolation.count,
            }
        )
        row["_val"], row["_test"] = val, test
        log(
            "info",
            f"round {round_num}: selected {outcome.fields.get('selected', '-')}, val "
            + ", ".join(f"{k} {v:.4f}" for k, v in val.items())
            + ", test "
            + ", ".join(f"{k} {v:.4f}" for k, v in test.items()),
        )
        return row

    def _outgoing(self, round_num, start, own, senders, receivers, engine, log) -> tuple[dict, str, dict]:
        """(what this site sends, what its records call it, the hook's record fields); the own model stays honest."""
        outgoing, kind, fields = own, FLIPPED_LABELS if self.flip_labels else "none", {}
        if self.malfunction is not None:
            outgoing, kind = self.malfunction.corrupt(own, round_num, self.site)
            log("info", f"round {round_num}: malfunction sends a {kind} model")
        if self.attack is not None:
            exchange = self.exchange
            sending = Sending(
                round_num,
                start,
                own,
                senders,
                receivers,
                engine,
                peek=lambda peers, timeout, abort: exchange.peek(round_num, peers, timeout, abort),
                compute=lambda: self.slots.hold(self._abort),
                abort=self._abort,
            )
            outgoing, fields = self.attack.outgoing(sending)
            kind = self.attack.kind
        return outgoing, kind, fields

    def _report(self, row: dict, fl_ctx: FLContext) -> None:
        """Send a round's record to the server (fire and forget) and TensorBoard (:mod:`lightyear.flare.analytics`)."""
        stream_round(self, row, fl_ctx)
        message = Shareable()
        message[C.KEY_PROGRESS] = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in row.items()}
        try:
            fl_ctx.get_engine().send_aux_request(
                targets=[C.SERVER], topic=C.TOPIC_PROGRESS, request=message, timeout=0.0, fl_ctx=fl_ctx
            )
        except Exception as exc:  # noqa: BLE001 - monitoring must never stop training
            self.log_warning(fl_ctx, f"could not report progress to the server: {exc}")

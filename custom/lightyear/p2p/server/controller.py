"""Server side of the peer-to-peer topology: configures the sites and watches their rounds (it never holds weights).

Each site gets one run task; a site whose run raises is ``failed``, one that stops answering liveness pings or reports
no round for ``progress_timeout`` is ``dropped``, and the others go on. ``progress.jsonl`` keeps one record per site
and round; ``summary.csv``/``summary.json`` are written at the end (also on abort).
"""

from __future__ import annotations

import json
import os
import threading
import time

from nvflare.apis.client import Client
from nvflare.apis.controller_spec import ClientTask, Task
from nvflare.apis.fl_constant import ReservedKey, ReturnCode
from nvflare.apis.fl_context import FLContext
from nvflare.apis.impl.controller import Controller
from nvflare.apis.shareable import Shareable, make_reply
from nvflare.apis.signal import Signal

from lightyear.checks import integer, mapping, positive_int, positive_seconds
from lightyear.flare import constants as C
from lightyear.flare import run_stats
from lightyear.flare.early_pings import quiet_early_pings
from lightyear.flare.end_imports import import_in_background
from lightyear.flare.placement import p2p_simulator_advice
from lightyear.flare.process_memory import limit_malloc_arenas, release_free_memory
from lightyear.flare.round_ledger import RoundLedger
from lightyear.flare.worker_deaths import WORKER_DIED, WorkerDeaths
from lightyear.p2p import secure_messages as secure_setting
from lightyear.p2p.server import model_relay
from lightyear.p2p.server.model_relay import ModelRelay
from lightyear.p2p.server.site_status import SiteStatus
from lightyear.p2p.topology import build_graph, check_graph, check_topology_args
from lightyear.p2p.wire.cell_gate import PeerGate
from lightyear.records import format_table, summarize_sites, write_summary

COMPUTE_ALLOWANCE_S = 600.0
"""Seconds of computing a round may take beyond waiting for peers, in the default ``progress_timeout``."""
MAX_PROGRESS_BYTES = 1 << 20
"""The largest round record kept, as JSON (a site's record holds a few fields per peer)."""


def default_progress_timeout(peer_deadline: float) -> float:
    return 2.0 * peer_deadline + COMPUTE_ALLOWANCE_S


def check_progress_timeout(progress_timeout: float, peer_deadline: float) -> float:
    """``progress_timeout``; ValueError when under 2 x ``peer_deadline`` (sites waiting for a dead peer would drop)."""
    if progress_timeout < 2.0 * peer_deadline:
        raise ValueError(
            f"progress_timeout={progress_timeout:g} s is shorter than 2 x peer_deadline={peer_deadline:g} s: "
            "healthy sites waiting for a dead neighbour would be dropped. Raise progress_timeout (or leave it out: "
            f"it then defaults to 2 x peer_deadline + {COMPUTE_ALLOWANCE_S:g} s) or lower peer_deadline"
        )
    return progress_timeout


class P2PController(Controller):
    def __init__(
        self,
        rounds: int = 12,
        seed: int = 0,
        topology: str = "full",
        peer_deadline: float = 120.0,
        start_timeout: float = 90.0,
        progress_timeout: float | None = None,
        liveness_interval: float = 10.0,
        liveness_failures: int = 3,
        run_timeout: float = 86400.0,
        topology_args: dict | None = None,
        secure_messages="auto",
        model_route: str = model_relay.AUTO,
    ):
        """Args:
        rounds: communication rounds every site runs.
        seed: the job seed (data splits, initial model, batch order, malfunction draws).
        topology: ``full``, ``ring``, ``k_regular``, ``random`` or ``none`` (:mod:`lightyear.p2p.topology`), with
            its ``topology_args``; ``none``: sites train alone.
        peer_deadline: the sites' ``peer_deadline``, to which the server's timeouts are matched.
        start_timeout: seconds within which every site must pick up the run task.
        progress_timeout: seconds without a round before a site is dropped, >= 2 x peer_deadline (default: that + 600).
        liveness_interval, liveness_failures: a site that fails this many pings (this far apart) in a row is dropped.
        run_timeout: seconds the whole run may take.
        secure_messages: ``"auto"``, true or false: models encrypted end to end (:mod:`lightyear.p2p.secure_messages`).
        model_route: ``"server"``, ``"direct"`` or ``"auto"`` (the server); :mod:`lightyear.p2p.server.model_relay`.
        """
        super().__init__()
        quiet_early_pings()  # the liveness ping may reach a site before its handler: no WARNING line
        self.rounds = positive_int("rounds", rounds)
        self.seed = integer("seed", seed)
        if topology_args is not None:
            mapping("topology_args", topology_args)
        check_topology_args(topology, topology_args or {})
        self.topology = topology
        self.topology_args = dict(topology_args or {})
        self.peer_deadline = positive_seconds("peer_deadline", peer_deadline)
        self.start_timeout = positive_seconds("start_timeout", start_timeout)
        if progress_timeout is None:
            progress_timeout = default_progress_timeout(self.peer_deadline)
        self.progress_timeout = check_progress_timeout(
            positive_seconds("progress_timeout", progress_timeout), self.peer_deadline
        )
        self.liveness_interval = positive_seconds("liveness_interval", liveness_interval)
        self.liveness_failures = positive_int("liveness_failures", liveness_failures)
        self.run_timeout = positive_seconds("run_timeout", run_timeout)
        self.secure_messages = secure_setting.check_setting(secure_messages)
        self.model_route = model_relay.check_route(model_route)
        self.relay: ModelRelay | None = None
        self.gate = PeerGate(self._log)  # the server's cell: uploads bounded before FLARE assembles them
        self.status: SiteStatus | None = None
        self._lock = threading.Lock()
        self._run_dir = ""
        self._phase = run_stats.STARTING
        self._worker_deaths = WorkerDeaths()
        self._ledger = RoundLedger(self.rounds)  # the rounds whose record progress.jsonl holds, by site

    def start_controller(self, fl_ctx: FLContext):
        C.register_decomposers()
        engine = fl_ctx.get_engine()
        if not self.gate.watch(engine):
            self.log_info(fl_ctx, "the server's cell takes no incoming filter: uploads are bounded once assembled")
        engine.register_aux_message_handler(topic=C.TOPIC_PROGRESS, message_handle_func=self._on_progress)
        for topic in (C.TOPIC_DECLARE, C.TOPIC_UPLOAD, C.TOPIC_CERTIFICATES):
            engine.register_aux_message_handler(topic=topic, message_handle_func=self._on_relay)
        self._run_dir = fl_ctx.get_engine().get_workspace().get_run_dir(fl_ctx.get_job_id())
        self._worker_deaths.install()  # before the simulator starts the site workers
        import_in_background()  # what FLARE imports when the run ends, off the end of the run

    def stop_controller(self, fl_ctx: FLContext):
        self._worker_deaths.remove()
        if self.relay is not None:
            self.relay.stop()

    def handle_event(self, event_type: str, fl_ctx: FLContext):
        super().handle_event(event_type, fl_ctx)
        run_stats.add_stats(self, event_type, fl_ctx, self.stats)

    def stats(self) -> dict:
        """The run's progress for FLARE's ``show_stats``: phase, rounds, relay counts, :meth:`SiteStatus.snapshot`."""
        out = {"phase": self._phase, "num_rounds": self.rounds, "topology": self.topology}
        if self.relay is not None:
            out["relay"] = dict(self.relay.counts.as_dict(), held_bytes=self.relay.in_flight_bytes())
        status = self.status
        if status is None:
            return dict(out, current_round=None, sites=0)
        snap = status.snapshot()
        for state in ("failed", "dropped"):
            snap[state] = {site: run_stats.short(reason) for site, reason in snap[state].items()}
        return dict(out, **snap)

    def _on_progress(self, topic: str, request: Shareable, fl_ctx: FLContext) -> Shareable:
        row = request.get(C.KEY_PROGRESS)
        site = request.get_peer_prop(key=ReservedKey.IDENTITY_NAME, default=None)
        status = self.status
        if status is None or not isinstance(row, dict) or site not in status.sites:
            self.log_warning(fl_ctx, f"ignored a progress message from {site!r}")
            return make_reply(ReturnCode.BAD_REQUEST_DATA)
        if row.get("site") != site:
            self.log_warning(fl_ctx, f"progress message from {site} names site {row.get('site')!r}: recorded as {site}")
        row, round_num = dict(row, site=site), row.get("round")
        line = json.dumps(row, default=str)
        if len(line) > MAX_PROGRESS_BYTES:
            problem = f"the record takes {len(line)} bytes, more than {MAX_PROGRESS_BYTES}"
        else:
            problem = self._ledger.claim(site, round_num)
        if not problem:
            with self._lock, open(os.path.join(self._run_dir, "progress.jsonl"), "a") as f:
                f.write(line + "\n")
        status.progress(site, None if problem else round_num)
        if problem:
            self.log_warning(fl_ctx, f"progress message from {site} not recorded: {problem}")
            return make_reply(ReturnCode.BAD_REQUEST_DATA)
        summary = ", ".join(
            f"{k} {row[k]:.4f}" if isinstance(row.get(k), float) else f"{k} {row.get(k)}"
            for k in ("selected", "val_acc", "val_dice", "test_acc", "test_dice", "wait_s")
            if k in row
        )
        self.log_info(fl_ctx, f"progress {site} round {row.get('round')}: {summary}")
        return make_reply(ReturnCode.OK)

    def _log(self, level: str, text: str) -> None:
        getattr(self.logger, level)(text)

    def _on_relay(self, topic: str, request: Shareable, fl_ctx: FLContext) -> Shareable:
        """A site's message for the relay; without one: "not yet" while the run starts, else refused."""
        relay = self.relay
        if relay is None:
            starting = self._phase == run_stats.STARTING
            return make_reply(ReturnCode.SERVICE_UNAVAILABLE if starting else ReturnCode.BAD_REQUEST_DATA)
        token = request.get(C.KEY_TOKEN)
        claimed = request.get_peer_prop(key=ReservedKey.IDENTITY_NAME, default=None)
        if topic == C.TOPIC_DECLARE:
            code, _ = relay.on_declare(token, request.get(C.KEY_LIMIT), claimed, request.get(C.KEY_CERTIFICATE))
            return make_reply(code)
        if topic == C.TOPIC_UPLOAD:
            return make_reply(relay.on_upload(token, request, claimed)[0])
        code, _, found = relay.on_certificates(token, request.get(C.KEY_NAMES), claimed)
        reply = make_reply(code)
        reply[C.KEY_CERTIFICATES] = found
        return reply

    def _open_relay(self, neighbours: dict, secure: bool, fl_ctx: FLContext) -> str:
        """The route the sites send models by; builds the relay when it is the server."""
        route = model_relay.resolve_route(self.model_route, self.topology)
        if route != model_relay.SERVER:
            return route
        engine = fl_ctx.get_engine()

        def send(targets: list[str], topic: str, message: dict, timeout: float) -> dict:
            request = Shareable()
            request.update(message)
            replies = engine.send_aux_request(
                targets=targets, topic=topic, request=request, timeout=timeout, fl_ctx=engine.new_context()
            )
            return {t: r.get_return_code() for t, r in (replies or {}).items() if isinstance(r, Shareable)}

        self.relay = ModelRelay(
            neighbours,
            self.rounds,
            self.peer_deadline,
            min(model_relay.SEND_TIMEOUT, self.peer_deadline),
            send,
            self._log,
            on_bound=lambda limit: self.gate.open(limit, False),
            on_idle=release_free_memory,
            sealed=secure,
        )
        limit_malloc_arenas()  # the relay's threads (a delivery worker per receiver) share few malloc arenas
        return route

    def _on_result(self, client_task: ClientTask, fl_ctx: FLContext):
        site = client_task.client.name  # the identity FLARE authenticated, not what the result claims
        result = client_task.result
        rc = result.get_return_code() if isinstance(result, Shareable) else None
        payload = result.get(C.KEY_RESULT) if isinstance(result, Shareable) else None
        if rc == ReturnCode.OK and isinstance(payload, dict):
            self.status.finish(site, dict(payload, site=site))
            self.log_info(fl_ctx, f"{site} finished its rounds")
        else:
            reason = (result.get(C.KEY_ERROR) if isinstance(result, Shareable) else None) or f"return code {rc}"
            self.status.fail(site, str(reason)[:2000])
            self.log_error(fl_ctx, f"{site} failed: {reason}; the other sites go on")

    def control_flow(self, abort_signal: Signal, fl_ctx: FLContext):
        clients: list[Client] = fl_ctx.get_engine().get_clients()
        sites = sorted(c.name for c in clients)
        if not sites:
            self.system_panic("no site is connected to run the job", fl_ctx)
            return
        self.status = SiteStatus(sites)
        phase = run_stats.FAILED
        try:
            phase = self._control(sites, abort_signal, fl_ctx)
        finally:
            self._phase = phase
            self._write_summary(fl_ctx)

    def _control(self, sites: list[str], abort_signal: Signal, fl_ctx: FLContext) -> str:
        """Run the sites to the end; the phase the run ended in (see :mod:`lightyear.flare.run_stats`)."""
        try:
            neighbours = build_graph(sites, self.topology, seed=self.seed, **self.topology_args)
            if self.topology != "none":
                check_graph(neighbours, sites)
        except ValueError as exc:
            reasons = dict.fromkeys(sites, f"no usable topology: {exc}")
            return self._fail(reasons, f"cannot build the {self.topology} topology over {sites}: {exc}", fl_ctx)
        try:  # how models travel: refused at the start when the deployment cannot do what the job asks
            secure = secure_setting.resolve(
                self.secure_messages, secure_setting.deployment_secure(fl_ctx), "the server"
            )
            route = self._open_relay(neighbours, secure, fl_ctx)
        except (RuntimeError, ValueError) as exc:
            return self._fail(dict.fromkeys(sites, str(exc)), str(exc), fl_ctx)
        self.log_info(
            fl_ctx,
            f"{len(sites)} sites, topology {self.topology} {neighbours}, {self.rounds} rounds, seed {self.seed}, "
            f"secure peer messages {'on' if secure else 'off'}, models routed {route}",
        )
        tasks = {}
        for site in sites:  # a task each: the relay's token is the site's alone
            data = Shareable()
            data[C.KEY_CONFIG] = {
                "rounds": self.rounds,
                "seed": self.seed,
                "neighbours": neighbours,
                "secure_messages": secure,
                "model_route": route,
                "token": self.relay.tokens[site] if self.relay is not None else None,
            }
            tasks[site] = Task(
                name=C.P2P_RUN_TASK, data=data, timeout=int(self.run_timeout), result_received_cb=self._on_result
            )
            self.broadcast(task=tasks[site], fl_ctx=fl_ctx, targets=[site], min_responses=1)
        self._phase = run_stats.TRAINING
        status = self.status
        start = time.monotonic()
        next_ping = start + self.liveness_interval
        while not abort_signal.triggered:
            now = time.monotonic()
            started = {site for site, task in tasks.items() if task.client_tasks}
            for site in started:
                status.start(site)
            dead = self._worker_deaths.lost_sites(sites, started)
            if dead:  # the simulator will never run these sites: end now, not after start_timeout
                self._cancel(tasks, fl_ctx)
                return self._fail(
                    dead,
                    f"sites {sorted(dead)}: {WORKER_DIED}; every site of a peer-to-peer run must start, so the "
                    "run ends now (FLARE's start race: the same run started again normally works; "
                    "lightyear-simulate and lightyear-sweep do that once)",
                    fl_ctx,
                )
            if now - start > self.start_timeout and started != set(sites):
                missing = sorted(set(sites) - started)
                self._cancel(tasks, fl_ctx)
                return self._fail(
                    dict.fromkeys(missing, f"did not start within start_timeout={self.start_timeout:g} s"),
                    f"sites {missing} did not start the run within start_timeout={self.start_timeout:g} s: "
                    + p2p_simulator_advice(len(sites)),
                    fl_ctx,
                )
            if now - start > self.run_timeout:
                for site in status.running():
                    status.drop(site, f"still running after run_timeout={self.run_timeout:g} s")
                self.log_error(fl_ctx, f"the run took longer than run_timeout={self.run_timeout:g} s: stopped")
                break
            for site in status.silent_since(now, self.progress_timeout):
                status.drop(site, f"reported no round for {self.progress_timeout:g} s")
                self.log_error(
                    fl_ctx, f"{site} reported no round for {self.progress_timeout:g} s: dropped from the run"
                )
            if now >= next_ping:
                self._ping(status.running(), fl_ctx)
                next_ping = time.monotonic() + self.liveness_interval
            for site in status.running():
                ended = tasks[site].completion_status
                if ended is not None:
                    status.drop(site, f"its run task ended ({ended}) without a result")
            if status.all_done():
                break
            time.sleep(0.5)
        if abort_signal.triggered or status.dropped():
            self._cancel(tasks, fl_ctx)
        if self.relay is not None:
            self.relay.stop()
            self.log_info(fl_ctx, f"models handed on by the server: {self.relay.counts.as_dict()}")
        return run_stats.ABORTED if abort_signal.triggered else run_stats.FINISHED

    def _fail(self, reasons: dict, panic: str, fl_ctx: FLContext) -> str:
        """Drop each site of ``reasons`` (site -> why) and end the run with ``panic``."""
        for site, reason in reasons.items():
            self.status.drop(site, reason)
        self.system_panic(panic, fl_ctx)
        return run_stats.FAILED

    def _cancel(self, tasks: dict, fl_ctx: FLContext) -> None:
        for task in tasks.values():
            if task.completion_status is None:
                self.cancel_task(task, fl_ctx=fl_ctx)

    def _ping(self, sites: list[str], fl_ctx: FLContext) -> None:
        """Ask every running site whether it is alive; drop one that failed ``liveness_failures`` pings in a row."""
        if not sites:
            return
        try:
            replies = fl_ctx.get_engine().send_aux_request(
                targets=sites,
                topic=C.TOPIC_PING,
                request=Shareable(),
                timeout=min(10.0, self.liveness_interval),
                fl_ctx=fl_ctx,
                optional=True,
            )
        except Exception as exc:  # noqa: BLE001 - a failed ping is counted like an unanswered one
            self.log_warning(fl_ctx, f"liveness ping failed: {exc}")
            replies = {}
        for site in sites:
            reply = (replies or {}).get(site)
            alive = isinstance(reply, Shareable) and reply.get_return_code() == ReturnCode.OK
            if self.status.ping(site, alive) >= self.liveness_failures:
                self.status.drop(
                    site, f"stopped answering the server ({self.liveness_failures} liveness pings in a row)"
                )
                self.log_error(fl_ctx, f"{site} stopped answering: dropped from the run; the other sites go on")

    def _write_summary(self, fl_ctx: FLContext) -> None:
        results = self.status.results() if self.status is not None else []
        if not results:
            return
        rows = summarize_sites(results)
        path = write_summary(rows, self._run_dir)
        self.log_info(fl_ctx, f"final test metrics (written to {path}):\n{format_table(rows)}")

    def process_result_of_unknown_task(
        self, client: Client, task_name: str, client_task_id: str, result: Shareable, fl_ctx: FLContext
    ):
        self.log_warning(fl_ctx, f"ignored a result of unknown task {task_name!r} from {client.name}")

"""Server side of the star topology: send the model(s), gather, aggregate, repeat.

The seeded initial global model is the reference every result is checked against. A rule that customises the model
per site (:meth:`~lightyear.star.aggregator.StarAggregator.site_models`) gets one task per site, waited for as a
broadcast. A round is aggregated once ``min_clients`` sites answered (the rest get ``wait_time_after_min_received``
more), else the global model is kept; each round's model and rule state are written atomically, the final summary
also on an early stop. If an attack job's adversary fails to craft, the attackers' results are dropped, not sent
honest (which would turn them benign unseen). A site lost at the start stops the run
(:class:`~lightyear.star.per_site_tasks.StartWatch`).
"""

from __future__ import annotations

import functools
import math

from nvflare.apis.client import Client
from nvflare.apis.controller_spec import Task
from nvflare.apis.fl_context import FLContext
from nvflare.apis.impl.controller import Controller
from nvflare.apis.shareable import Shareable
from nvflare.apis.signal import Signal

from lightyear.algorithms.model_check import DEFAULT_MAX_ABS, check_max_abs
from lightyear.checks import integer, non_empty_string, positive_int, positive_seconds
from lightyear.flare import constants as C
from lightyear.flare import run_stats
from lightyear.records import format_table
from lightyear.star import round_results, run_files
from lightyear.star.adversary import ADVERSARY_FILE, SimulatedAdversary, bind_adversary
from lightyear.star.aggregator import StarAggregator
from lightyear.star.messages import task_data
from lightyear.star.per_site_tasks import LOST_AT_START, StartWatch, wait_like_broadcast
from lightyear.star.results import valid_num_samples


def default_min_clients(n_sites: int) -> int:
    """A strict majority, n - floor((n - 1) / 2): all but the largest faulty minority."""
    return n_sites - (n_sites - 1) // 2


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
        adversary_id: str | None = None,
    ):
        """Args:
        aggregator_id: id of a :class:`~lightyear.star.aggregator.StarAggregator` component.
        seed, model, model_args, num_classes, in_channels: the seeded initial network (as the sites build it).
        min_clients: results needed to aggregate a round (default: :func:`default_min_clients` of the sites).
        train_timeout, wait_time_after_min_received: seconds a training task may take, and to wait for the rest once
            ``min_clients`` answered.
        max_sample_ratio: cap of a site's claimed sample count, as a multiple of the round's median (None: no cap).
        max_abs_weight: a result with a value beyond this magnitude is rejected (None: no bound).
        adversary_id: id of a :class:`~lightyear.star.adversary.SimulatedAdversary` component (attack jobs only)."""
        super().__init__()
        self.aggregator_id = aggregator_id
        self.rounds = positive_int("rounds", rounds)
        self.seed = integer("seed", seed)
        self.model, self.model_args = model, dict(model_args or {})
        self.num_classes = positive_int("num_classes", num_classes)
        self.in_channels = positive_int("in_channels", in_channels)
        self.min_clients = None if min_clients is None else positive_int("min_clients", min_clients)
        self.train_timeout = positive_seconds("train_timeout", train_timeout)
        self.wait_time_after_min_received = positive_seconds(
            "wait_time_after_min_received", wait_time_after_min_received
        )
        if max_sample_ratio is not None and (not valid_num_samples(max_sample_ratio) or max_sample_ratio < 1):
            raise ValueError(f"max_sample_ratio must be a number >= 1 or null (no cap), got {max_sample_ratio!r}")
        self.max_sample_ratio = max_sample_ratio
        self.max_abs_weight = check_max_abs(max_abs_weight)
        if adversary_id is not None:
            note = "the id of a SimulatedAdversary component, or null: no attack"
            non_empty_string("adversary_id", adversary_id, note=note)
        self.adversary_id = adversary_id
        self.adversary: SimulatedAdversary | None = None
        self._refused = ""  # why the run cannot start (set at START_RUN)
        self._attack: dict | None = None  # the adversary's record of the current round
        self.history: list[dict] = []  # every round's decision of the rule (aggregator_state.json)
        from lightyear.training.settings import model_options

        allowed = model_options(model)
        if allowed is not None and set(self.model_args) - allowed:
            raise ValueError(
                f"model_args {sorted(set(self.model_args) - allowed)} are not options of model {model!r}; "
                f"allowed: {sorted(allowed)}"
            )
        self.aggregator: StarAggregator | None = None
        self._run_dir = ""
        self._finals: list[dict] = []
        self._rejected: list[str] = []  # sites whose results _collect refused in the current round
        self._sites: list[str] = []
        self._starts = StartWatch()
        self._lost: dict[str, str] = {}  # site -> why it is dropped: its worker died before it fetched a task
        self._phase, self._round, self._need = run_stats.STARTING, None, None
        self._progress = {
            "sites_answered": 0,
            "not_answered": [],
            "excluded": [],
            "sites_removed": 0,
            "removed": [],
            "rounds_aggregated": 0,
            "rounds_skipped": 0,
        }

    def initial_weights(self) -> dict:
        """The seeded initial global model, as every site would build it."""
        from lightyear.training.weights import seeded_weights  # torch: only when the model is built

        return seeded_weights(self.model, self.num_classes, self.in_channels, self.seed, self.model_args)

    def start_controller(self, fl_ctx: FLContext):
        C.register_decomposers()
        engine = fl_ctx.get_engine()
        self.aggregator = engine.get_component(self.aggregator_id)
        if not isinstance(self.aggregator, StarAggregator):
            self.system_panic(f"aggregator_id {self.aggregator_id!r} names no StarAggregator component", fl_ctx)
        if self.adversary_id is not None:
            self._refused = self._bind_adversary(engine.get_component(self.adversary_id))
            if self._refused:
                self.system_panic(self._refused, fl_ctx)
        self._run_dir = engine.get_workspace().get_run_dir(fl_ctx.get_job_id())
        self._starts.deaths.install()  # before the simulator starts the site workers

    def _bind_adversary(self, component) -> str:
        """Take the job's adversary; why the run cannot start, or ""."""
        try:
            self.adversary = bind_adversary(component, self.adversary_id, self.aggregator)
        except ValueError as exc:
            return str(exc)
        return ""

    def stop_controller(self, fl_ctx: FLContext):
        self._starts.deaths.remove()

    def handle_event(self, event_type: str, fl_ctx: FLContext):
        super().handle_event(event_type, fl_ctx)
        run_stats.add_stats(self, event_type, fl_ctx, self.stats)

    def stats(self) -> dict:
        """The run's progress for FLARE's ``show_stats``: phase, current round (0-based; ``num_rounds`` in the final
        evaluation), the last round's answers, the sites the rule excluded or removed, rounds aggregated or skipped."""
        state = {"phase": self._phase, "current_round": self._round, "num_rounds": self.rounds}
        return {**state, "sites": len(self._sites), "min_clients": self._need, **self._progress}

    def _note(self, **changes) -> None:
        """Update :meth:`stats` (replaced whole: the stats request comes from another thread)."""
        self._progress = {**self._progress, **changes}

    def _task(self, name: str, round_num: int, weights) -> Task:
        config = {"seed": self.seed, "rounds": self.rounds}
        extras = self.aggregator.task_extras(round_num) if self.aggregator else {}
        return Task(name=name, data=task_data(weights, round_num, config, extras), timeout=int(self.train_timeout))

    def control_flow(self, abort_signal: Signal, fl_ctx: FLContext):
        self._sites = sorted(c.name for c in fl_ctx.get_engine().get_clients())
        phase = run_stats.FAILED
        try:
            phase = self._control(abort_signal, fl_ctx)
        finally:
            self._phase = phase
            self._write_summary(fl_ctx)

    def _control(self, abort_signal: Signal, fl_ctx: FLContext) -> str:
        """Train, then evaluate; the phase the run ended in (see :mod:`lightyear.flare.run_stats`)."""
        sites = self._sites
        need = self._need = min(self.min_clients or default_min_clients(len(sites)), len(sites))
        if self._refused:
            return run_stats.FAILED  # already reported at the start
        problem = self.aggregator.check_sites(len(sites))
        strangers = sorted(set(self.adversary.attackers) - set(sites)) if self.adversary else []
        if strangers and not problem:
            problem = f"the adversary's attackers {strangers} are not sites of this job (sites: {sites})"
        if problem:
            self.system_panic(problem, fl_ctx)
            return run_stats.FAILED
        global_weights = self.initial_weights()
        self.log_info(
            fl_ctx, f"{len(sites)} sites, {self.rounds} rounds; a round is aggregated once {need} sites answered"
        )
        for round_num in range(self.rounds):
            if abort_signal.triggered:
                return run_stats.ABORTED
            self._phase, self._round = run_stats.TRAINING, round_num
            per_site = self.aggregator.site_models(sites, global_weights, round_num, fl_ctx)
            if per_site is not None and not per_site:
                self.log_error(fl_ctx, f"round {round_num}: the rule left no site to train; training ends")
                break
            sent = per_site if per_site is not None else {s: global_weights for s in sites}
            tasks = self._run_tasks(
                C.STAR_TRAIN_TASK, round_num, sent, per_site is not None, need, abort_signal, fl_ctx
            )
            if abort_signal.triggered:
                return run_stats.ABORTED
            if self._stop_if_lost(fl_ctx):
                return run_stats.FAILED
            results = self._collect(tasks, global_weights, round_num, fl_ctx, sent=sent)
            self._note(sites_answered=len(results), not_answered=sorted(set(sent) - set(results)))
            round_need = min(need, len(sent))
            problem = f"only {len(results)} valid results, {round_need} needed" if len(results) < round_need else ""
            if not problem:
                try:
                    decision = self.aggregator.aggregate(global_weights, results, round_num, fl_ctx)
                except ValueError as exc:
                    problem = f"{type(self.aggregator).__name__} failed ({exc})"
            if problem:
                self.log_error(fl_ctx, f"round {round_num}: {problem}: the global model is kept")
                self._note(rounds_skipped=self._progress["rounds_skipped"] + 1)
                continue
            global_weights = decision.weights
            self._keep_decision(round_num, decision)
            self._save_round(global_weights)
            self.log_info(fl_ctx, f"round {round_num}: aggregated {sorted(results)}")

        self._phase, self._round = run_stats.EVALUATING, self.rounds
        final = self.aggregator.site_models(sites, global_weights, self.rounds, fl_ctx)
        sent = {s: (final or {}).get(s, global_weights) for s in sites}
        tasks = self._run_tasks(C.STAR_EVAL_TASK, self.rounds, sent, final is not None, need, abort_signal, fl_ctx)
        if not abort_signal.triggered and self._stop_if_lost(fl_ctx):
            return run_stats.FAILED
        self._finals += round_results.final_rows(tasks, self.rounds - 1, self.adversary)
        evaluated = {f["site"] for f in self._finals}
        self._note(sites_answered=len(evaluated), not_answered=sorted(set(sites) - evaluated))
        return run_stats.ABORTED if abort_signal.triggered else run_stats.FINISHED

    def _keep_decision(self, round_num: int, decision) -> None:
        """The rule's decision into the history (with the results the checks refused and what the adversary
        crafted), and into the progress."""
        if decision.kept is not None:
            entry = {
                "round": int(round_num),
                "kept": decision.kept,
                "excluded": decision.excluded,
                "rejected": sorted(self._rejected),
                **decision.details,
            }
            self.history.append({**entry, "attack": self._attack} if self._attack is not None else entry)
        removed = self.aggregator.removed_sites()
        done = self._progress["rounds_aggregated"] + 1
        self._note(
            rounds_aggregated=done, excluded=list(decision.excluded or []), removed=removed, sites_removed=len(removed)
        )

    def _save_round(self, global_weights: dict) -> None:
        run_files.save_round(self._run_dir, global_weights, self.history, self.aggregator)

    def _run_tasks(
        self, name: str, round_num: int, sent: dict, per_site: bool, need: int, abort_signal: Signal, fl_ctx: FLContext
    ) -> list[Task]:
        """Send the round's task (one broadcast, or one task per site) and wait for it; the tasks."""
        need = min(need, len(sent))
        if not per_site:
            task = self._task(name, round_num, next(iter(sent.values())))
            self.broadcast_and_wait(
                task=task,
                fl_ctx=fl_ctx,
                targets=sorted(sent),
                min_responses=need,
                wait_time_after_min_received=int(math.ceil(self.wait_time_after_min_received)),
                abort_signal=abort_signal,
            )
            return self._starts.note([task])
        tasks = {site: self._task(name, round_num, sent[site]) for site in sorted(sent)}
        for site, task in tasks.items():
            self.send(task=task, fl_ctx=fl_ctx, targets=[site])
        wait_after = self.wait_time_after_min_received
        wait_like_broadcast(list(tasks.values()), need, wait_after, abort_signal, self.cancel_task)
        return self._starts.note(list(tasks.values()))

    def _stop_if_lost(self, fl_ctx: FLContext) -> bool:
        """Stop the run (a system panic) when a site was lost at the start (the reason goes to its summary row)."""
        self._lost = self._starts.lost(self._sites)
        if self._lost:
            self.system_panic(f"sites {sorted(self._lost)}: {LOST_AT_START}", fl_ctx)
        return bool(self._lost)

    def _write_summary(self, fl_ctx: FLContext) -> None:
        if not self._sites:
            return
        rows, path = run_files.write_final_summary(self._finals, self._sites, self._run_dir, self._lost)
        self.log_info(
            fl_ctx, f"final test metrics of each site's evaluated model (written to {path}):\n{format_table(rows)}"
        )

    def _collect(
        self, tasks, global_weights: dict, round_num: int, fl_ctx: FLContext, sent: dict | None = None
    ) -> dict:
        """The round's valid results (:mod:`lightyear.star.round_results`), the attackers' crafted first. ``tasks``: a
        Task or a list; ``sent``: the model each site was sent (default: the global model)."""
        tasks = [tasks] if isinstance(tasks, Task) else list(tasks)
        sent = round_results.sent_models(tasks, sent, global_weights)
        self._rejected = []
        warn = functools.partial(self.log_warning, fl_ctx)
        raw = round_results.answered(tasks, round_num, warn)
        if self.adversary is not None:
            raw = self._craft(raw, sent, global_weights, round_num, fl_ctx)
        results, self._rejected = round_results.checked(
            raw, sent, global_weights, round_num, self.max_abs_weight, self.max_sample_ratio, warn
        )
        return results

    def _craft(self, raw: dict, sent: dict, reference: dict, round_num: int, fl_ctx: FLContext) -> dict:
        """The round's OK results, the attackers' crafted (dropped if crafting fails); the record is logged, appended
        to ``adversary.jsonl`` and kept for the history."""
        raw, record = round_results.crafted(self.adversary, raw, sent, reference, round_num, self.max_abs_weight)
        self.adversary.log_round(record, fl_ctx)
        self._attack = record
        if not self._run_dir:  # not started (in-process tests): nowhere to write
            return raw
        try:
            run_files.append_attack_record(self._run_dir, record)
        except OSError as exc:
            self.log_error(
                fl_ctx, f"round {round_num}: could not append to {ADVERSARY_FILE} ({exc}); the history keeps the record"
            )
        return raw

    def process_result_of_unknown_task(
        self, client: Client, task_name: str, client_task_id: str, result: Shareable, fl_ctx: FLContext
    ):
        self.log_warning(
            fl_ctx, f"ignored a result of unknown task {task_name!r} (or one that came too late) from {client.name}"
        )

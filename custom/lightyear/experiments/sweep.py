"""``lightyear-sweep SPEC --out DIR``: run every run of a sweep description with the FLARE simulator, resumably.

Finished runs are skipped, so the same command continues after a crash, a kill or Ctrl-C; a failed run is recorded
with the reason from its log. Every job is generated and checked before anything is written. Usage and options:
docs/jobs-and-settings.md, "Experiments".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time

from lightyear import configs as config_folders
from lightyear.cli import UserError, command, folder_name, output_folder
from lightyear.experiments import progress, run_outcome, run_status, runner, slurm
from lightyear.experiments.sweep_spec import SweepSpec, expand, read_spec
from lightyear.jobs.folders import check_replaceable
from lightyear.records import atomic_write

SPEC_COPY = "spec.json"
PLAN = "sweep.json"
LOCK = ".sweep.lock"
PROG = "lightyear-sweep"
STALL_MINUTES = 60.0
"""Default of ``--stall-timeout``: minutes a run may go without writing anything before it is stopped."""


class SweepError(UserError):
    """A sweep that cannot start; the message says what to change."""


def plan(spec: SweepSpec, configs: str, out: str) -> tuple[list, list[str]]:
    """([(run, job files)] still to run, [runs already finished]), every job generated before any training."""
    todo, done, stale = [], [], []
    for run in spec.runs:
        try:
            files = runner.job_files(run, configs)
        except UserError as exc:
            raise SweepError(f"run {run.name}: {exc}") from exc
        folder = runner.run_dir(out, run.name)
        if not runner.is_finished(folder):
            try:  # a job folder holding another's files would stop the sweep mid-way, with runs going
                check_replaceable(os.path.join(folder, "job"))
            except UserError as exc:
                raise SweepError(f"run {run.name}: {exc}") from exc
            todo.append((run, files))
        elif runner.matches_job(folder, files):
            done.append(run.name)
        else:
            stale.append(run.name)
    if stale:
        raise SweepError(
            f"{len(stale)} finished run(s) used other settings than the spec now gives ({', '.join(stale[:3])}"
            f"{', ...' if len(stale) > 3 else ''}): choose another --out, or delete those run folders to run them again"
        )
    return todo, done


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def take_lock(out: str) -> str:
    path = os.path.join(out, LOCK)
    try:
        pid = int(open(path).read().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        pid = None  # no lock, or its sweep is gone
    if pid is not None and pid != os.getpid():
        raise SweepError(f"another sweep (pid {pid}) is running in {out}: wait for it or stop it first")
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    return path


def execute(
    spec: SweepSpec,
    todo: list,
    out: str,
    configs: str,
    parallel: int = 1,
    display=None,
    poll: float = 1.0,
    stall_after: float | None = STALL_MINUTES * 60,
) -> dict:
    """Run ``todo`` (from :func:`plan`) ``parallel`` at a time; return the gathered status. A run that writes nothing
    (:func:`~lightyear.experiments.runner.activity`) for ``stall_after`` seconds (None: no limit) is stopped with
    every process it started and recorded as failed, so one hung simulator costs one limit, not the sweep."""
    display = display or progress.PlainDisplay()
    names = [r.name for r in spec.runs]
    resources = runner.resources_file(configs)
    pending = list(todo)
    running: dict[str, tuple] = {}  # name -> (run, process, start time)
    t0 = time.monotonic()
    # counts kept as runs end, so the once-a-second display reads no status files
    tally = {"done": len(names) - len(todo), "failed": 0, "walls": run_status.known_walls(out, names)}
    retried: set[str] = set()  # runs started again after FLARE's start race (once each)
    files_of: dict[str, dict] = {}
    seen: dict[str, tuple] = {}  # name -> (what the run had written, when that last changed)
    stalled: dict[str, str] = {}  # name -> why it was stopped
    # SIGINT too: a sweep started in a script's background inherits SIGINT ignored, and `kill -INT` must still work
    old = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        while pending or running:
            while pending and len(running) < parallel:
                run, files = pending.pop(0)
                files_of[run.name] = files
                folder = runner.run_dir(out, run.name)
                runner.prepare(folder, files, resources)
                proc = runner.start(run, folder)
                running[run.name] = (run, proc, time.monotonic())
                run_status.write_run_status(
                    folder, run.name, run_status.RUNNING, pid=proc.pid, started=run_status.now()
                )
                run_status.write_sweep_status(out, names)
                display.event(f"started  {run.name} ({run.sites} sites, {run.rounds} rounds)")
            time.sleep(poll)
            for name, (run, proc, started) in list(running.items()):
                if proc.poll() is None:
                    if (why := run_outcome.stall_reason(out, name, seen, stall_after)) is None:
                        continue
                    runner.stop(proc)
                    stalled[name] = why
                del running[name]
                seen.pop(name, None)
                wall = time.monotonic() - started
                if name in stalled:
                    run_outcome.record_stall(out, run, stalled.pop(name), wall, display)
                    tally["failed"] += 1
                elif name not in retried and run_outcome.start_again(out, run, display):
                    retried.add(name)
                    pending.insert(0, (run, files_of[name]))
                    continue
                elif run_outcome.finish(out, run, proc, wall, display):
                    tally["done"] += 1
                    tally["walls"].append(wall)
                else:
                    tally["failed"] += 1
                run_status.write_sweep_status(out, names)
            display.update(_state(out, len(names), pending, running, parallel, t0, tally))
    except BaseException:  # Ctrl-C, a signal, or any failure: the runs this sweep started stop with it
        run_outcome.stop_all(out, names, running)
        display.close()
        raise
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    display.close()
    return run_status.write_sweep_status(out, names)


def _state(out, total, pending, running, parallel, t0, tally) -> progress.SweepState:
    now = time.monotonic()
    live = [
        progress.Running(n, progress.rounds_done(runner.run_dir(out, n), r.rounds), r.rounds, now - s)
        for n, (r, _, s) in running.items()
    ]
    eta = progress.estimate_left(tally["walls"], len(pending), live, parallel)
    return progress.SweepState(total, tally["done"], tally["failed"], now - t0, eta, live)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Run a sweep of LIGHTYEAR toolkit jobs with the FLARE simulator (resumable)."
    )
    p.add_argument(
        "spec",
        help="the sweep description (.yaml or .json), "
        "or the name of one shipped in app_configs/sweeps/ (e.g. digits_dynamic)",
    )
    p.add_argument("--out", required=True, help="the sweep folder (runs go to OUT/runs/<run>/)")
    p.add_argument(
        "--parallel",
        type=int,
        default=1,
        metavar="N",
        help="simulator runs at a time (default 1; FLARE's simulators can cross-wire their site workers "
        "when several run on one machine: see docs/jobs-and-settings.md)",
    )
    p.add_argument(
        "--stall-timeout",
        type=float,
        default=STALL_MINUTES,
        metavar="MIN",
        help=f"stop a run that writes nothing to its log or progress for MIN minutes and record it as failed "
        f"(default {STALL_MINUTES:g}; 0: never)",
    )
    p.add_argument("--dry-run", action="store_true", help="list the runs and which are done; run nothing")
    p.add_argument(
        "--slurm",
        action="store_true",
        help="write OUT/sweep.sbatch, a job array with one task a run, instead of running",
    )
    p.add_argument("--gres", help="with --slurm: the --gres of every task, e.g. gpu:1 (or give it to sbatch)")
    p.add_argument("--time", default="08:00:00", help="with --slurm: each task's time limit (default 08:00:00)")
    p.add_argument(
        "--configs", help="a folder of method and dataset configurations (default: the package's app_configs)"
    )
    p.add_argument("--plain", action="store_true", help="plain progress lines even when rich is installed")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a spec.json, sweep.json or sweep.sbatch in --out that no sweep wrote",
    )
    p.add_argument("--task", type=int, help=argparse.SUPPRESS)  # one run by index: what each SLURM array task does
    return p


def spec_path(spec: str, configs: str) -> str:
    """``spec`` itself when it is a file, else the sweep of that name shipped in ``configs/sweeps/``."""
    if os.path.exists(spec) or os.sep in spec or spec.endswith((".yaml", ".yml", ".json")):
        return spec
    folder = os.path.join(configs, "sweeps")
    shipped = os.path.join(folder, f"{spec}.yaml")
    if os.path.isfile(shipped):
        return shipped
    names = sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".yaml")) if os.path.isdir(folder) else []
    raise SweepError(
        f"no sweep description {spec!r}: give a .yaml or .json file, "
        f"or the name of a shipped sweep ({', '.join(names) or 'none'})"
    )


def check_out(out: str) -> None:
    """Refuse an ``--out`` that is a file before anything is generated."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise SweepError(f"--out {out} is a file: give the sweep folder (it is created if missing)")


def written_by_sweep(out: str, name: str) -> bool:
    """Whether ``out/name`` (spec.json, sweep.json, sweep.sbatch) is a file an earlier sweep wrote there."""
    if name in (SPEC_COPY, PLAN):  # written together: both are the sweep's when sweep.json is
        try:
            with open(os.path.join(out, PLAN), encoding="utf-8") as f:
                plan = json.load(f)
        except (OSError, ValueError):
            return False
        return isinstance(plan, dict) and {"runs", "configs"} <= set(plan)
    try:
        with open(os.path.join(out, name), encoding="utf-8", errors="replace") as f:
            return "-m lightyear.experiments.sweep " in f.read()
    except OSError:
        return False


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_own_files(out: str, names: list[str], force: bool, spec: str) -> None:
    """Refuse to replace a file of ``names`` in ``out`` that no sweep wrote, unless ``force``."""
    foreign = [n for n in names if os.path.lexists(os.path.join(out, n)) and not written_by_sweep(out, n)]
    foreign = [n for n in foreign if not _same(os.path.join(out, n), spec)]
    if foreign and not force:
        raise SweepError(
            f"--out {out} holds {', '.join(foreign)}, which no sweep wrote: choose another --out, "
            "or add --force to replace it"
        )


@command(PROG)
def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.parallel < 1:
        parser().error("--parallel must be at least 1")
    if not math.isfinite(args.stall_timeout) or args.stall_timeout < 0:
        parser().error(f"--stall-timeout must be a number of minutes >= 0 (0: never), got {args.stall_timeout:g}")
    out = os.path.abspath(folder_name(args.out))
    check_out(out)
    configs = config_folders.checked_configs(args.configs)
    path = spec_path(args.spec, configs)
    raw = read_spec(path)
    spec = expand(raw, configs, os.path.splitext(os.path.basename(path))[0])
    if args.task is not None:
        if not 0 <= args.task < len(spec.runs):
            raise SweepError(f"--task {args.task} is outside 0..{len(spec.runs) - 1}")
        spec.runs = [spec.runs[args.task]]
    todo, done = plan(spec, configs, out)
    if args.dry_run:
        for run in spec.runs:
            print(f"{'done' if run.name in done else 'todo'}  {run.name}")
        print(f"{len(spec.runs)} runs: {len(done)} done, {len(todo)} to run; nothing was written")
        return 0
    own = [SPEC_COPY, PLAN] if args.task is None else []
    check_own_files(out, own + ([slurm.SCRIPT] if args.slurm else []), args.force, path)
    script = None
    if args.slurm:  # checked before anything is written
        sites = max(r.sites for r in spec.runs)
        parallel = None if args.parallel == 1 else args.parallel
        script = slurm.script_text(spec.name, len(spec.runs), out, configs, sites, args.time, args.gres, parallel)
    output_folder(out)
    if args.task is None:
        if not _same(os.path.join(out, SPEC_COPY), path):  # the spec read is that very file: it stays as it is
            copy = json.dumps({**raw, "name": spec.name}, indent=1).encode()
            atomic_write(os.path.join(out, SPEC_COPY), lambda f: f.write(copy))
        plan_text = json.dumps({**spec.as_dict(), "configs": configs}, indent=1).encode()
        atomic_write(os.path.join(out, PLAN), lambda f: f.write(plan_text))
    if script is not None:
        path = slurm.write_script(script, out)
        print(
            f"wrote {path}: {len(spec.runs)} array tasks, one run each "
            f"({len(done)} already done are skipped by their task)"
        )
        print(
            f"submit with:  sbatch {path}"
            + ("" if args.gres else f"\n  or, a GPU per task:  sbatch --gres=gpu:1 {path}")
        )
        print(f"then:         lightyear-report {out}")
        return 0
    display = progress.PlainDisplay() if args.task is not None else progress.make_display(args.plain)
    display.event(f"sweep {spec.name}: {len(spec.runs)} runs, {len(done)} already done, {len(todo)} to run -> {out}")
    lock = None
    try:
        lock = take_lock(out) if args.task is None else None
        stall_after = args.stall_timeout * 60 if args.stall_timeout > 0 else None
        status = execute(spec, todo, out, configs, args.parallel, display, stall_after=stall_after)
    except KeyboardInterrupt:
        print("interrupted: the running simulator was stopped; run the same command again to continue", file=sys.stderr)
        return 130
    finally:
        if lock and os.path.exists(lock):
            os.remove(lock)
    mine = [status["runs"][r.name] for r in spec.runs]
    bad = [r["run"] for r in mine if r["status"] != run_status.FINISHED]
    print(
        f"sweep {spec.name}: {len(mine) - len(bad)}/{len(mine)} runs finished"
        + (f"; failed: {', '.join(bad)} (see {run_status.SWEEP_STATUS})" if bad else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

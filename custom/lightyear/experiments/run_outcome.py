"""How a sweep's run ended: finished, failed, met FLARE's start race (started again once), or stalled; each function
writes the run's ``status.json`` (:mod:`lightyear.experiments.run_status`) and tells the sweep's display.
"""

from __future__ import annotations

import os
import time

from lightyear.experiments import progress, run_status, runner


def stall_reason(out: str, name: str, seen: dict, stall_after: float | None) -> str | None:
    """Why the live run ``name`` is to be stopped: it wrote nothing for ``stall_after`` s; else None."""
    now, written = time.monotonic(), runner.activity(runner.run_dir(out, name))
    if name not in seen or seen[name][0] != written:
        seen[name] = (written, now)
        return None
    if stall_after is None or now - seen[name][1] < stall_after:
        return None
    return (
        f"stalled: wrote nothing for {progress.clock(now - seen[name][1])} (--stall-timeout), "
        f"stopped after round {progress.rounds_done(runner.run_dir(out, name))}"
    )


def record_stall(out: str, run, why: str, wall: float, display) -> None:
    folder = runner.run_dir(out, run.name)
    reason = f"{why}; last output: {runner.failure_reason(folder, None, lines=1)}"[:600]
    run_status.write_run_status(
        folder, run.name, run_status.FAILED, reason=reason, wall_s=round(wall, 1), ended=run_status.now()
    )
    log = os.path.join(folder, "log.txt")
    display.event(f"FAILED   {run.name} after {progress.clock(wall)}: {reason} (log: {log})")


def start_again(out: str, run, display) -> bool:
    """Whether the run failed only by FLARE's start race; then its attempt is set aside, to start again afresh."""
    folder = runner.run_dir(out, run.name)
    if runner.is_finished(folder):
        return False
    why = runner.start_race(folder)
    if why is None:
        return False
    aside = runner.set_aside(folder)
    display.event(
        f"RESTART  {run.name}: {why}: FLARE's start race, not the job; starting it again once in a fresh "
        f"workspace (the failed attempt: {aside})"
    )
    return True


def finish(out: str, run, proc, wall: float, display) -> bool:
    folder = runner.run_dir(out, run.name)
    fields = {"wall_s": round(wall, 1), "ended": run_status.now()}
    if runner.is_finished(folder):
        dropped = runner.unfinished_sites(folder)
        if dropped:
            fields["not_finished_sites"] = dropped
        run_status.write_run_status(folder, run.name, run_status.FINISHED, **fields)
        display.event(
            f"finished {run.name} in {progress.clock(wall)}"
            + (f" ({', '.join(dropped)} did not finish)" if dropped else "")
        )
        return True
    reason = runner.failure_reason(folder, proc.returncode)
    run_status.write_run_status(folder, run.name, run_status.FAILED, reason=reason, **fields)
    display.event(
        f"FAILED   {run.name} after {progress.clock(wall)}: {reason} (log: {os.path.join(folder, 'log.txt')})"
    )
    return False


def stop_all(out: str, names: list[str], running: dict) -> None:
    """Stop every run still going, then record them as interrupted as far as the disk (maybe full) lets it."""
    for _run, proc, _started in running.values():
        try:
            runner.stop(proc)
        except Exception:  # noqa: BLE001 - the next run must still be stopped
            pass
    try:
        for name, (_run, _proc, started) in running.items():
            folder = runner.run_dir(out, name)
            wall = round(time.monotonic() - started, 1)
            run_status.write_run_status(folder, name, run_status.INTERRUPTED, wall_s=wall, ended=run_status.now())
        run_status.write_sweep_status(out, names)
    except OSError:
        pass  # the runs are stopped; their status says "running" with a pid that is gone

"""lightyear-sweep runs: failures, skipping finished runs, FLARE's start race, Ctrl-C, parallel runs,
attack sweeps, progress and failure reasons; one real resumed sweep (extended tier).

Most tests run the stand-in for ``nvflare simulator`` of :mod:`sweep_fakes`, which behaves by the
job's seed.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from lightyear.experiments import progress, report, run_outcome, runner, sweep
from lightyear.experiments.results import load_sweep
from lightyear.experiments.selection import counts, run_selection

from sweep_fakes import CONFIGS, env, statuses, write_spec


def test_failed_run_is_recorded_and_the_sweep_goes_on_then_resumes(tmp_path, fake, capsys):
    out = tmp_path / "out"
    spec = write_spec(tmp_path, [0, 1, 3, 4])
    assert sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--plain"]) == 1
    assert statuses(out) == {
        "fedavg_digits_clean_s0": "finished",
        "fedavg_digits_clean_s1": "failed",
        "fedavg_digits_clean_s3": "finished",
        "fedavg_digits_clean_s4": "failed",
    }
    failed = json.loads((out / "runs" / "fedavg_digits_clean_s1" / "status.json").read_text())
    assert failed["reason"] == "2026-01-01 - ERROR - site-2 failed: CUDA out of memory"
    assert failed["wall_s"] >= 0
    dropped = json.loads((out / "runs" / "fedavg_digits_clean_s4" / "status.json").read_text())
    assert dropped["reason"] == "2026-01-01 - ERROR - the peer-to-peer run failed: site-1: ValueError: no data"
    log = (out / "runs" / "fedavg_digits_clean_s0" / "log.txt").read_text()
    assert "fake simulator fedavg_digits_clean_s0 sites 2" in log
    assert "fake simulator" not in capsys.readouterr().out  # FLARE's output goes to the log only
    first = os.path.getmtime(out / "runs" / "fedavg_digits_clean_s0" / "log.txt")
    assert sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--plain"]) == 1
    printed = capsys.readouterr().out
    assert "4 runs, 2 already done, 2 to run" in printed and "FAILED   fedavg_digits_clean_s1" in printed
    assert os.path.getmtime(out / "runs" / "fedavg_digits_clean_s0" / "log.txt") == first
    assert sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--dry-run"]) == 0
    assert "todo  fedavg_digits_clean_s1" in capsys.readouterr().out


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_ctrl_c_stops_the_simulator_and_every_worker_it_started(tmp_path, fake, inherited):
    """Also when the sweep inherits SIGINT ignored, as a background job of a script does."""
    out = tmp_path / "out"
    spec = write_spec(tmp_path, [0, 2])
    disposition = signal.SIG_IGN if inherited == "ignored" else signal.SIG_DFL
    proc = subprocess.Popen(
        [sys.executable, "-m", "lightyear.experiments.sweep", spec, "--out", str(out), "--configs", CONFIGS],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, disposition),
    )
    pids_file = out / "runs" / "fedavg_digits_clean_s2" / "ws" / "pids"
    deadline = time.monotonic() + 60
    while not pids_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    while len(pids_file.read_text().split()) < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
    pids = [int(p) for p in pids_file.read_text().split()]
    proc.send_signal(signal.SIGINT)
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, text
    assert "run the same command again to continue" in text
    time.sleep(0.5)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert statuses(out) == {"fedavg_digits_clean_s0": "finished", "fedavg_digits_clean_s2": "interrupted"}


def test_a_run_in_which_a_site_never_started_is_started_again_once(tmp_path, fake, capsys):
    out = tmp_path / "out"
    assert sweep.main([write_spec(tmp_path, [5, 6, 1]), "--out", str(out), "--configs", CONFIGS, "--plain"]) == 1
    assert statuses(out) == {
        "fedavg_digits_clean_s5": "finished",
        "fedavg_digits_clean_s6": "failed",
        "fedavg_digits_clean_s1": "failed",
    }
    printed = capsys.readouterr().out
    restart = (
        "RESTART  fedavg_digits_clean_s5: site-2 never started (FLARE: 'Subprocess died for client ... before send'): "
        "FLARE's start race, not the job; starting it again once in a fresh workspace"
    )
    assert restart in printed and printed.count("RESTART") == 2  # s5 and s6 once each; s1 failed for another reason
    for run, attempts in (
        ("fedavg_digits_clean_s5", "2"),
        ("fedavg_digits_clean_s6", "2"),
        ("fedavg_digits_clean_s1", None),
    ):
        folder = out / "runs" / run
        assert ((folder / "attempts").read_text() if attempts else None) == attempts
        assert (folder / "ws.failed-start").is_dir() == bool(attempts) and (
            folder / "log.failed-start.txt"
        ).exists() == bool(attempts)
        assert not (folder / "ws.failed-start-2").exists()


def test_finished_runs_with_other_settings_are_not_mixed_in(tmp_path, fake, capsys):
    out = tmp_path / "out"
    assert sweep.main([write_spec(tmp_path, [0]), "--out", str(out), "--configs", CONFIGS, "--plain"]) == 0
    changed = write_spec(tmp_path, [0], set={"sites": ["site-1", "site-2"], "rounds": 3})
    assert sweep.main([changed, "--out", str(out), "--configs", CONFIGS]) == 2
    assert "used other settings than the spec now gives (fedavg_digits_clean_s0)" in capsys.readouterr().err


def test_failure_reason_skips_noise_and_falls_back_to_the_last_line(tmp_path):
    (tmp_path / "log.txt").write_text(
        "start\nx - ERROR - received unknown aux message topic lightyear.ping\nlast words\n"
    )
    assert runner.failure_reason(str(tmp_path), 0) == "last words"
    assert runner.failure_reason(str(tmp_path), 1) == "exit code 1: last words"


def test_a_dry_run_over_a_damaged_summary_lists_the_run_to_do(tmp_path, fake, capsys):
    out = tmp_path / "out"
    spec = write_spec(tmp_path, [0])
    summary = out / "runs" / "fedavg_digits_clean_s0" / "ws" / "server" / "simulate_job" / "summary.csv"
    summary.parent.mkdir(parents=True)
    summary.write_bytes(b"site,status\n\xff\x00\n")
    assert sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--dry-run"]) == 0
    assert "todo  fedavg_digits_clean_s0" in capsys.readouterr().out


def test_progress_reads_rounds_and_estimates_time_left(tmp_path):
    run = tmp_path / "ws" / "server" / "simulate_job"
    run.mkdir(parents=True)
    (run / "progress.jsonl").write_text('{"round": 0}\n{"round": 2}\n{"round": 1}\n{"rou')
    assert progress.rounds_done(str(tmp_path)) == 3
    assert progress.rounds_done(str(tmp_path), rounds=2) == 2  # a star run's final evaluation is no round 3/2
    live = [progress.Running("a", 3, 12, 30.0)]
    assert progress.estimate_left([100.0, 60.0], pending=2, running=live, parallel=1) == 2 * 80 + 50
    assert progress.estimate_left([], pending=1, running=live, parallel=1) == 120 + 90
    assert progress.estimate_left([], pending=1, running=[], parallel=1) is None
    line = progress.status_line(progress.SweepState(5, 2, 1, 65, 3700, live))
    assert line == "2/5 done | 1 running | 1 failed | elapsed 1:05 | left ~1:01:40 | a round 3/12"


def processes_mentioning(text):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def test_parallel_runs(tmp_path, fake, capsys):
    out = tmp_path / "out"
    assert (
        sweep.main([write_spec(tmp_path, [0, 3, 5]), "--out", str(out), "--configs", CONFIGS, "--parallel", "2"]) == 0
    )
    assert set(statuses(out).values()) == {"finished"}
    assert "3/3 runs finished" in capsys.readouterr().out


@pytest.mark.extended
@pytest.mark.simulator
def test_real_sweep_killed_and_resumed_and_faulty_peer_never_selected(tmp_path):
    """Two real runs (3 digits sites, 2 rounds); the sweep is killed during the second and resumed."""
    out = tmp_path / "out"
    spec = tmp_path / "real.json"
    spec.write_text(
        json.dumps(
            {
                "datasets": ["digits"],
                "methods": ["fedavg", "lightyear"],
                "malfunctions": ["sfa"],
                "faulty": [1],
                "seeds": [0],
                "set": {
                    "sites": ["site-1", "site-2", "site-3"],
                    "rounds": 2,
                    "train_args": {"local_epochs": 8, "batch_size": 16, "lr": 0.002},
                },
            }
        )
    )
    cmd = [sys.executable, "-m", "lightyear.experiments.sweep", str(spec), "--out", str(out), "--configs", CONFIGS]
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    second = out / "runs" / "lightyear_digits_sfa1_s0"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if (second / "status.json").exists() and (second / "log.txt").stat().st_size > 0:
            break
        time.sleep(0.5)
    pid = json.loads((second / "status.json").read_text())["pid"]
    proc.send_signal(signal.SIGTERM)
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, text
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    assert processes_mentioning(str(second)) == []  # no site process outlived the simulator
    assert statuses(out) == {"fedavg_digits_sfa1_s0": "finished", "lightyear_digits_sfa1_s0": "interrupted"}
    first_log = os.path.getmtime(out / "runs" / "fedavg_digits_sfa1_s0" / "log.txt")

    resumed = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "2 runs, 1 already done, 1 to run" in resumed.stdout
    assert os.path.getmtime(out / "runs" / "fedavg_digits_sfa1_s0" / "log.txt") == first_log
    assert statuses(out) == {"fedavg_digits_sfa1_s0": "finished", "lightyear_digits_sfa1_s0": "finished"}

    runs = {r.name: r for r in load_sweep(str(out))}
    assert run_selection(runs["fedavg_digits_sfa1_s0"]) is None
    sel = run_selection(runs["lightyear_digits_sfa1_s0"])
    assert sel.faulty == ["site-3"] and sel.rounds == [0, 1]
    for site in ("site-1", "site-2"):
        assert sel.selected[site]["site-3"] == [0.0, 0.0]  # scored every round, never selected
    assert counts(sel)[:2] == (0, 4)
    written = report.report(str(out), log=lambda *_: None)
    assert (
        os.path.join(str(out), "report", "selection", "lightyear_digits_sfa1_s0_selection.png") in written["selection"]
    )
    table = (out / "report" / "tables" / "digits_sfa_acc.md").read_text().splitlines()
    assert [line.split(" | ")[0] for line in table[-2:]] == ["| fedavg", "| lightyear"]


def test_an_attack_sweep_runs_attack_jobs(tmp_path, fake, capsys):
    out = tmp_path / "out"
    path = write_spec(
        tmp_path,
        [0],
        methods=["fedavg"],
        faulty=None,
        attacks=["mr"],
        attackers=[0, 1],
        set={"sites": ["site-1", "site-2"], "rounds": 2, "attack_scale": 5},
    )
    assert sweep.main([path, "--out", str(out), "--configs", CONFIGS, "--plain"]) == 0
    assert statuses(out) == {"fedavg_digits_clean_s0": "finished", "fedavg_digits_mr1_s0": "finished"}
    job = out / "runs" / "fedavg_digits_mr1_s0" / "job"
    info = json.loads((job / "meta.json").read_text())["lightyear"]
    assert (info["attack"], info["faulty_sites"], info["attack_params"]) == ("mr", ["site-2"], {"scale": 5})
    server = json.loads((job / "app" / "config" / "config_fed_server.json").read_text())
    assert [c["args"]["attackers"] for c in server["components"] if c["id"] == "adversary"] == [["site-2"]]
    assert json.loads((out / "sweep.json").read_text())["attacks"] == ["mr"]


def test_an_attackers_row_never_makes_a_run_finished(tmp_path):
    folder = tmp_path / "run"
    (folder / "job").mkdir(parents=True)
    (folder / "job" / "meta.json").write_text(json.dumps({"lightyear": {"faulty_sites": ["site-2"], "attack": "sf"}}))
    summary = folder / "ws" / "server" / "simulate_job"
    summary.mkdir(parents=True)
    # the attacker trained honestly and says malfunction none; the only benign site dropped
    (summary / "summary.csv").write_text(
        "site,malfunction,status,acc\nsite-1,none,dropped,nan\nsite-2,none,finished,0.9\n"
    )
    assert not runner.is_finished(str(folder))
    (summary / "summary.csv").write_text(
        "site,malfunction,status,acc\nsite-1,none,finished,0.5\nsite-2,none,finished,0.9\n"
    )
    assert runner.is_finished(str(folder))


def test_a_run_that_writes_nothing_is_stopped_and_the_sweep_goes_on(tmp_path, fake, capsys):
    """Seed 2 hangs with a child and a site worker of its own session; the limit stops all three."""
    out = tmp_path / "out"
    spec = write_spec(tmp_path, [2, 0])
    argv = [spec, "--out", str(out), "--configs", CONFIGS, "--plain", "--stall-timeout", "0.05"]
    assert sweep.main(argv) == 1
    assert statuses(out) == {"fedavg_digits_clean_s2": "failed", "fedavg_digits_clean_s0": "finished"}
    status = json.loads((out / "runs" / "fedavg_digits_clean_s2" / "status.json").read_text())
    assert status["reason"].startswith("stalled: wrote nothing for 0:0"), status["reason"]
    assert "(--stall-timeout), stopped after round 0; last output: fake simulator" in status["reason"]
    assert status["wall_s"] < 60
    for pid in (out / "runs" / "fedavg_digits_clean_s2" / "ws" / "pids").read_text().split():
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)
    assert "FAILED   fedavg_digits_clean_s2" in capsys.readouterr().out


def test_a_run_is_stalled_only_while_it_writes_nothing(tmp_path):
    folder = tmp_path / "runs" / "r"
    folder.mkdir(parents=True)
    (folder / "log.txt").write_text("start\n")
    seen = {}
    assert run_outcome.stall_reason(str(tmp_path), "r", seen, 0.0) is None  # first look: nothing to compare
    with open(folder / "log.txt", "a") as f:
        f.write("round 1\n")
    assert run_outcome.stall_reason(str(tmp_path), "r", seen, 0.0) is None  # it wrote: not stalled
    assert run_outcome.stall_reason(str(tmp_path), "r", seen, None) is None  # no limit
    assert run_outcome.stall_reason(str(tmp_path), "r", seen, 3600.0) is None  # not for long enough
    assert run_outcome.stall_reason(str(tmp_path), "r", seen, 0.0).startswith("stalled: wrote nothing for")


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_a_stall_timeout_that_is_no_number_of_minutes_is_refused(tmp_path, capsys, value):
    argv = [write_spec(tmp_path, [0]), "--out", str(tmp_path / "o"), "--stall-timeout", value]
    with pytest.raises(SystemExit) as exit_:
        sweep.main(argv)
    assert exit_.value.code == 2
    assert "--stall-timeout must be a number of minutes >= 0 (0: never)" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_run_folder_holding_another_s_files_stops_the_sweep_before_any_run_starts(tmp_path, fake, capsys):
    out = tmp_path / "out"
    mine = out / "runs" / "fedavg_digits_clean_s3" / "job" / "notes.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("my notes")
    assert sweep.main([write_spec(tmp_path, [0, 3]), "--out", str(out), "--configs", CONFIGS, "--plain"]) == 2
    err = capsys.readouterr().err
    assert "run fedavg_digits_clean_s3" in err and "did not write (notes.txt)" in err
    assert not (out / "runs" / "fedavg_digits_clean_s0").exists() and mine.read_text() == "my notes"


def test_a_sweep_that_fails_stops_the_runs_it_started(tmp_path, fake, monkeypatch):
    # seed 2 hangs; when seed 0 ends, recording it fails: the hanging run must not outlive the sweep
    out = tmp_path / "out"

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(run_outcome, "finish", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        sweep.main([write_spec(tmp_path, [2, 0]), "--out", str(out), "--configs", CONFIGS, "--parallel", "2"])
    pids = [int(p) for p in (out / "runs" / "fedavg_digits_clean_s2" / "ws" / "pids").read_text().split()]
    time.sleep(0.5)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert statuses(out)["fedavg_digits_clean_s2"] == "interrupted"


def test_a_status_that_cannot_be_written_keeps_no_run_going(tmp_path, fake, monkeypatch):
    # the failure being handled may be a full disk: writing the statuses fails too, every run still stops
    out = tmp_path / "out"

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    write = sweep.run_status.write_run_status

    def write_until_interrupted(folder, name, status, **fields):
        if status == sweep.run_status.INTERRUPTED:
            raise OSError(28, "No space left on device")
        return write(folder, name, status, **fields)

    monkeypatch.setattr(run_outcome, "finish", broken)
    monkeypatch.setattr(sweep.run_status, "write_run_status", write_until_interrupted)
    with pytest.raises(OSError):
        spec = write_spec(tmp_path, [2, 0], methods=["fedavg", "fedprox"])  # seed 2 hangs, seed 0 ends
        sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--parallel", "3"])
    pids = []
    for method in ("fedavg", "fedprox"):
        pids += [int(p) for p in (out / "runs" / f"{method}_digits_clean_s2" / "ws" / "pids").read_text().split()]
    time.sleep(0.5)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)

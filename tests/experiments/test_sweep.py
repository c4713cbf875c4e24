"""lightyear-sweep: runs, failures, skipping finished runs, Ctrl-C, SLURM scripts; one real resumed sweep.

Most tests use a stand-in for ``nvflare simulator`` ($LIGHTYEAR_NVFLARE) that behaves by the
job's seed: seed 1 fails the way FLARE does (ERROR lines, exit 0, no summary), seed 4 writes a
summary in which every site dropped, seeds 5 and 6 meet FLARE's start race (a worker dies at
start) the first time and every time, seed 2 hangs with a
child process and a site worker in a session of its own, as FLARE starts them (to check that
Ctrl-C ends both), any other seed writes a summary after two progress records.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from lightyear.experiments import progress, report, runner, sweep
from lightyear.experiments.results import load_sweep
from lightyear.experiments.selection import counts, run_selection

from repo import ROOT

CONFIGS = os.path.join(ROOT, "app_configs")
CUSTOM = os.path.join(ROOT, "custom")

FAKE = r"""
import json, os, subprocess, sys, time
job, ws = sys.argv[2], sys.argv[sys.argv.index("-w") + 1]
meta = json.load(open(os.path.join(job, "meta.json")))
seed = meta["lightyear"]["seed"]
print("fake simulator", meta["name"], "sites", sys.argv[sys.argv.index("-t") + 1], flush=True)
run = os.path.join(ws, "server", "simulate_job")
os.makedirs(run, exist_ok=True)
if seed == 1:
    print("2026-01-01 - ERROR - received unknown aux message topic lightyear.ping")
    print("2026-01-01 - ERROR - site-2 failed: CUDA out of memory")
    sys.exit(0)
if seed == 4:  # peer-to-peer runs whose sites all dropped still write a summary
    print("2026-01-01 - ERROR - the peer-to-peer run failed: site-1: ValueError: no data")
    with open(os.path.join(run, "summary.csv"), "w") as f:
        f.write("site,malfunction,status,acc\nsite-1,none,dropped,nan\nmean_benign,n=0,,nan\nstd_benign,n=0,,nan\n")
    sys.exit(0)
if seed in (5, 6):  # FLARE's start race: a worker died at start (seed 5: the first time only)
    count = os.path.join(os.path.dirname(ws), "attempts")
    attempt = int(open(count).read()) + 1 if os.path.exists(count) else 1
    open(count, "w").write(str(attempt))
    if attempt == 1 or seed == 6:
        print("2026-01-01 - SimulatorRunner - ERROR - Subprocess died for client site-2 before send, exit code: 1")
        sys.exit(0)
if seed == 2:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    open(os.path.join(ws, "pids"), "w").write(f"{os.getpid()} {child.pid} {worker.pid}")
    time.sleep(600)
for rnd in range(2):
    with open(os.path.join(run, "progress.jsonl"), "a") as f:
        f.write(json.dumps({"round": rnd, "site": "site-1"}) + "\n")
    time.sleep(0.1)
with open(os.path.join(run, "summary.csv"), "w") as f:
    f.write("site,malfunction,status,acc\nsite-1,none,finished,0.5\nmean_benign,n=1,,0.5\nstd_benign,n=1,,0.0\n")
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    path = tmp_path / "fake_nvflare"
    path.write_text(f"#!{sys.executable}\n{FAKE}")
    path.chmod(0o755)
    monkeypatch.setenv("LIGHTYEAR_NVFLARE", str(path))
    return path


def write_spec(tmp_path, seeds, name="s.json", **extra):
    spec = {
        "datasets": ["digits"],
        "methods": ["fedavg"],
        "faulty": [0],
        "seeds": seeds,
        "set": {"sites": ["site-1", "site-2"], "rounds": 2},
        **extra,
    }
    path = tmp_path / name
    path.write_text(json.dumps(spec))
    return str(path)


def statuses(out):
    return {n: r["status"] for n, r in json.loads((out / "sweep_status.json").read_text())["runs"].items()}


def env():
    return {**os.environ, "PYTHONPATH": CUSTOM + os.pathsep + os.environ.get("PYTHONPATH", "")}


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


def test_bad_spec_stops_before_anything_is_written(tmp_path, capsys):
    path = write_spec(tmp_path, [0], methods=["nope"])
    assert sweep.main([path, "--out", str(tmp_path / "out"), "--configs", CONFIGS]) == 2
    assert "unknown methods nope" in capsys.readouterr().err and not (tmp_path / "out").exists()
    path = write_spec(tmp_path, [0], set={"tau": 3})
    assert sweep.main([path, "--out", str(tmp_path / "out"), "--configs", CONFIGS]) == 2
    assert "run fedavg_digits_clean_s0: " in capsys.readouterr().err


def test_slurm_script_runs_one_task_per_run(tmp_path, fake, capsys):
    out = tmp_path / "out"
    spec = write_spec(tmp_path, [0, 3])
    assert (
        sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--slurm", "--gres", "gpu:1", "--time", "01:00:00"])
        == 0
    )
    text = (out / "sweep.sbatch").read_text()
    assert text.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --array=0-1", "#SBATCH --gres=gpu:1", "#SBATCH --time=01:00:00", "#SBATCH --cpus-per-task=2"):
        assert line in text
    assert (
        f"-m lightyear.experiments.sweep {out / 'spec.json'} --out {out} --configs {CONFIGS} "
        '--task "$SLURM_ARRAY_TASK_ID"' in text
    )
    assert "sbatch " + str(out / "sweep.sbatch") in capsys.readouterr().out
    assert not (out / "runs").exists()
    no_gres = sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--slurm"])
    assert no_gres == 0 and "sbatch --gres=gpu:1" in (out / "sweep.sbatch").read_text()
    # what array task 1 runs
    assert sweep.main([str(out / "spec.json"), "--out", str(out), "--configs", CONFIGS, "--task", "1"]) == 0
    assert statuses(out) == {"fedavg_digits_clean_s3": "finished"}
    assert sweep.main([str(out / "spec.json"), "--out", str(out), "--configs", CONFIGS, "--task", "2"]) == 2


def test_failure_reason_skips_noise_and_falls_back_to_the_last_line(tmp_path):
    (tmp_path / "log.txt").write_text(
        "start\nx - ERROR - received unknown aux message topic lightyear.ping\nlast words\n"
    )
    assert runner.failure_reason(str(tmp_path), 0) == "last words"
    assert runner.failure_reason(str(tmp_path), 1) == "exit code 1: last words"


def test_slurm_never_replaces_a_spec_or_script_no_sweep_wrote(tmp_path, fake, capsys):
    out = tmp_path / "out"
    out.mkdir()
    spec = write_spec(tmp_path, [0])
    for name in ("spec.json", "sweep.sbatch"):
        (out / name).write_text("mine\n")
        assert sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--slurm"]) == 2
        err = capsys.readouterr().err
        assert f"holds {name}, which no sweep wrote" in err and "--force" in err and err.count("\n") == 1
        assert (out / name).read_text() == "mine\n" and not (out / "sweep.json").exists()
        (out / name).unlink()
    assert sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--slurm"]) == 0
    assert sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--slurm"]) == 0  # its own files: replaced
    (out / "sweep.sbatch").write_text("mine\n")
    assert sweep.main([spec, "--out", str(out), "--configs", CONFIGS, "--slurm", "--force"]) == 0
    assert "lightyear.experiments.sweep" in (out / "sweep.sbatch").read_text()
    own = out / "spec.json"  # a spec read from the sweep folder itself stays as written
    own.write_text(json.dumps({"datasets": ["digits"], "methods": ["fedavg"], "faulty": [0], "seeds": [0]}))
    (out / "sweep.json").unlink()
    assert sweep.main([str(own), "--out", str(out), "--configs", CONFIGS, "--slurm"]) == 0
    assert "name" not in json.loads(own.read_text())


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


def refused(capsys, argv, message):
    """lightyear-sweep ARGV ends in one line naming the problem, exit status 2."""
    assert sweep.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and err.startswith("lightyear-sweep: error: "), err


def test_a_binary_or_unreadable_spec_is_named(tmp_path, capsys):
    (tmp_path / "spec.yaml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    refused(capsys, [str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "o")], "spec.yaml is not a UTF-8 text file")
    (tmp_path / "spec.yaml").write_text("datasets: [digits\nmethods: all\n")
    refused(capsys, [str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "o")], "is not valid YAML")
    (tmp_path / "spec.yaml").write_text("datasets: [[digits]]\nmethods: all\nfaulty: [0]\n")
    refused(capsys, [str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "o")], "'datasets' must list plain values")
    (tmp_path / "spec.yaml").write_text("")  # an empty file: YAML reads it as nothing at all
    refused(
        capsys,
        [str(tmp_path / "spec.yaml"), "--out", str(tmp_path / "o")],
        "spec.yaml must hold a mapping with the keys name, datasets",
    )
    assert not (tmp_path / "o").exists()


def test_an_out_that_cannot_be_a_folder_is_refused_before_anything_is_written(tmp_path, capsys):
    spec = write_spec(tmp_path, [0])
    (tmp_path / "FILE").write_text("mine")
    for extra in ([], ["--slurm"]):
        refused(
            capsys,
            [spec, "--out", str(tmp_path / "FILE"), "--configs", CONFIGS, *extra],
            "is a file: give the sweep folder",
        )
    assert (tmp_path / "FILE").read_text() == "mine"
    refused(capsys, [spec, "--out", "/proc/x", "--configs", CONFIGS, "--slurm"], "--out /proc/x cannot be created")


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--gres", "gpu:1\n#SBATCH --wrap=evil", "is not a SLURM gres"),
        ("--gres", "gpu:1 --wrap=x", "is not a SLURM gres"),
        ("--time", "01:00:00\n#SBATCH --wrap=evil", "is not a SLURM time"),
    ],
)
def test_no_value_can_add_a_line_to_the_batch_script(tmp_path, capsys, option, value, message):
    spec = write_spec(tmp_path, [0])
    refused(capsys, [spec, "--out", str(tmp_path / "o"), "--configs", CONFIGS, "--slurm", option, value], message)
    assert not (tmp_path / "o").exists()
    refused(
        capsys,
        [spec, "--out", str(tmp_path / "o\n#SBATCH --wrap=evil"), "--configs", CONFIGS, "--slurm"],
        "holds a line break",
    )
    assert (
        sweep.main(
            [spec, "--out", str(tmp_path / "o"), "--configs", CONFIGS, "--slurm", "--gres", "gpu:a100:2,mps:100"]
        )
        == 0
    )
    assert "#SBATCH --gres=gpu:a100:2,mps:100\n" in (tmp_path / "o" / "sweep.sbatch").read_text()


def test_the_sweep_uses_the_packages_configurations_anywhere(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write_spec(tmp_path, [0])
    assert sweep.main([spec, "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    assert "todo  fedavg_digits_clean_s0" in capsys.readouterr().out
    assert sweep.main(["digits_baselines", "--out", str(tmp_path / "o"), "--dry-run"]) == 0  # a shipped sweep, by name
    assert "nothing was written" in capsys.readouterr().out and not (tmp_path / "o").exists()
    refused(
        capsys,
        ["digits_nope", "--out", str(tmp_path / "o")],
        "no sweep description 'digits_nope': give a .yaml or .json file, or the name",
    )


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


def test_every_run_of_the_shipped_adaptive_sweep_generates(tmp_path, capsys):
    assert sweep.main(["digits_adaptive", "--out", str(tmp_path / "out"), "--configs", CONFIGS, "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert (
        "todo  krum_digits_adaptive5_full_s0" in text
        and "16 runs: 0 done, 16 to run" in text
        and "todo  fedcap_digits_adaptive3_full_s0" in text
    )

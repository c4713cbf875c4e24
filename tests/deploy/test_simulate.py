"""``lightyear-simulate``: its exit status says whether any site finished, a damaged job is named
before anything starts, and SIGTERM stops the simulator and every worker it started.

A stand-in for ``nvflare simulator`` behaves by ``$FAKE_MODE``: ``failed`` writes a summary in which
every site failed, ``finished`` one in which a site finished, ``none`` writes nothing, ``crash``
exits 1, and ``stuck`` starts a site worker in a session of its own (as FLARE does) and a worker
that its parent leaves orphaned, and, like FLARE, ends only on Ctrl-C, leaving both behind.
"""

import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

from lightyear.deploy import simulate
from lightyear.records import run_failure, write_site_status

from deploy_helpers import make_job

FAKE = r"""
import os, signal, subprocess, sys, time
ws = sys.argv[sys.argv.index("-w") + 1]
mode = os.environ["FAKE_MODE"]
run = os.path.join(ws, "server", "simulate_job")
os.makedirs(run, exist_ok=True)
row = "site,malfunction,status,acc,last_round,reason\n"
if mode == "failed":
    open(os.path.join(run, "summary.csv"), "w").write(row + "site-1,none,failed,nan,,ValueError: no data\n"
        "site-2,none,dropped,nan,,\nmean_benign,n=0,,nan,,\n")
elif mode == "finished":
    open(os.path.join(run, "summary.csv"), "w").write(row + "site-1,none,finished,0.9,2,\nsite-2,none,failed,nan,,x\n")
elif mode == "crash":
    sys.exit(1)
elif mode == "race":  # FLARE's start race the first time (a site never started), a finished run the next
    count = os.path.join(os.path.dirname(ws), "attempts")
    attempt = int(open(count).read()) + 1 if os.path.exists(count) else 1
    open(count, "w").write(str(attempt))
    if attempt == 1 or os.environ.get("FAKE_ALWAYS"):
        open(os.path.join(run, "summary.csv"), "w").write(row + "site-1,none,dropped,nan,,the run was stopped\n"
            "site-2,none,dropped,nan,,did not start within start_timeout=300 s\n")
    else:
        open(os.path.join(run, "summary.csv"), "w").write(row + "site-1,none,finished,0.9,2,\n"
            "site-2,none,finished,0.8,2,\n")
elif mode == "stuck":
    sleep = [sys.executable, "-c", "import time; time.sleep(600)", "--simulator_root", ws]
    worker = subprocess.Popen(sleep, start_new_session=True)
    orphan = subprocess.run([sys.executable, "-c", f"import subprocess; print(subprocess.Popen({sleep!r}, "
                             "start_new_session=True, stdout=-3, stderr=-3).pid)"],
                            capture_output=True, text=True).stdout.strip()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # FLARE's simulator handles Ctrl-C only
    print("started", worker.pid, orphan, flush=True)
    try:
        time.sleep(600)
    except KeyboardInterrupt:
        sys.exit(1)  # leaves its worker behind
"""

WRAPPER = r"""
import sys
from lightyear.deploy import simulate
fake = sys.argv.pop(1)
simulate.nvflare_command = lambda: [sys.executable, fake]
sys.exit(simulate.main(sys.argv[1:]))
"""


@pytest.fixture
def job(tmp_path):
    return make_job(tmp_path / "jobs", "fedavg")


def run_simulate(tmp_path, job, mode, env=None, **popen):
    (tmp_path / "fake.py").write_text(FAKE)
    (tmp_path / "wrapper.py").write_text(WRAPPER)
    argv = [
        sys.executable,
        str(tmp_path / "wrapper.py"),
        str(tmp_path / "fake.py"),
        job,
        "-w",
        str(tmp_path / "ws"),
        "-t",
        "3",
    ]
    env = dict(os.environ, FAKE_MODE=mode, **(env or {}))
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


@pytest.mark.parametrize(
    "mode, status, message",
    [
        ("failed", 1, "the run failed: no site finished (site-1 failed (ValueError: no data), site-2 dropped;"),
        ("none", 1, "no site finished and no summary.csv was written"),
        ("crash", 1, ""),
        ("finished", 0, ""),
    ],
)
def test_the_exit_status_says_whether_any_site_finished(tmp_path, job, mode, status, message):
    proc = run_simulate(tmp_path, job, mode)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status, out + err
    assert message in err and "Traceback" not in err


def test_the_simulator_starts_without_waiting_for_pytorch_to_import(tmp_path, job):
    """Before it hands over, lightyear-simulate only writes an allow list: importing PyTorch or FLARE's
    recipes there cost 2-3 s of CPU before every run."""
    code = (
        "import sys\n"
        "from lightyear.deploy.simulate import simulator_command\n"
        f"simulator_command([{str(job)!r}, '-w', {str(tmp_path / 'ws')!r}])\n"
        "print([m for m in ('torch', 'nvflare.recipe') if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "[]"
    assert (tmp_path / "ws" / "local" / "resources.json").is_file()


def test_a_run_in_which_a_site_never_started_starts_again_once_in_a_fresh_workspace(tmp_path, job):
    proc = run_simulate(tmp_path, job, "race")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert (
        "site-2 never started (did not start within start_timeout): FLARE's start race, not the job; "
        "the failed attempt "
        f"is kept in {tmp_path / 'ws.failed-start'}, and the run starts again once in a fresh workspace"
    ) in err
    assert (tmp_path / "attempts").read_text() == "2"
    assert "did not start" in (tmp_path / "ws.failed-start" / "server" / "simulate_job" / "summary.csv").read_text()
    assert "finished" in (tmp_path / "ws" / "server" / "simulate_job" / "summary.csv").read_text()
    assert sorted(os.listdir(tmp_path / "ws")) == ["local", "server"]


def test_a_site_that_never_starts_twice_fails_the_run_and_other_failures_are_not_started_again(tmp_path, job):
    proc = run_simulate(tmp_path, job, "race", env={"FAKE_ALWAYS": "1"})
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and (tmp_path / "attempts").read_text() == "2", out + err
    assert "the run failed: no site finished" in err and not (tmp_path / "ws.failed-start-2").exists()
    other = tmp_path / "other"
    other.mkdir()
    proc = run_simulate(other, job, "failed")
    assert proc.wait(timeout=120) == 1 and "start race" not in proc.stderr.read()
    assert not (other / "ws.failed-start").exists()


def test_a_workspace_that_held_other_files_is_not_made_fresh(tmp_path, job):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("mine")
    proc = run_simulate(tmp_path, job, "race")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and (tmp_path / "attempts").read_text() == "1", out + err
    assert "-w held other files before the run, so it is not started again here" in err
    assert (tmp_path / "ws" / "notes.txt").read_text() == "mine" and not (tmp_path / "ws.failed-start").exists()


def test_site_statuses_decide_when_there_is_no_summary(tmp_path):
    for site, status in (("site-1", "failed"), ("site-2", "aborted")):
        write_site_status(str(tmp_path / site / "simulate_job"), site, status, "peer gone", 1, "")
    assert "site-1 failed (peer gone), site-2 aborted" in run_failure(str(tmp_path))
    write_site_status(str(tmp_path / "site-3" / "simulate_job"), "site-3", "finished", "", 2, "")
    assert run_failure(str(tmp_path)) is None


def test_when_every_site_fails_each_reason_keeps_its_cause_and_alike_sites_are_named_together(tmp_path):
    reason = "RuntimeError: site-x could not load /data/" + "very/" * 40 + "deep/folder: cause: the disk is full"
    for i in range(1, 9):
        write_site_status(str(tmp_path / f"site-{i}" / "simulate_job"), f"site-{i}", "failed", reason, 0, "")
    failure = run_failure(str(tmp_path))
    assert f"site-1, site-2, site-3, site-4, site-5, site-6, site-7, site-8 failed ({reason})" in failure
    assert failure.count("cause: the disk is full") == 1


def test_a_damaged_meta_json_is_refused_before_the_workspace_is_touched(tmp_path, job, capsys):
    with open(os.path.join(job, "meta.json"), "w") as f:
        f.write('{"name": "x", "deploy_map": ')
    assert simulate.main([job, "-w", str(tmp_path / "ws")]) == 2
    err = capsys.readouterr().err
    assert "meta.json is not valid JSON" in err and err.count("\n") == 1 and not (tmp_path / "ws").exists()
    with open(os.path.join(job, "meta.json"), "wb") as f:
        f.write(b"\x00\x01\xff")
    assert simulate.main([job, "-w", str(tmp_path / "ws")]) == 2
    assert "is not a UTF-8 text file" in capsys.readouterr().err
    json.dump(["a list"], open(os.path.join(job, "meta.json"), "w"))
    assert simulate.main([job, "-w", str(tmp_path / "ws")]) == 2
    assert "has no deploy_map" in capsys.readouterr().err


def marked(marker):
    return [p.pid for p in psutil.process_iter(["cmdline"]) if any(marker in part for part in p.info["cmdline"] or [])]


def decoys(workspace):
    """Processes this user runs beside the command, not started by it: one whose argument holds the
    workspace as a substring (``<ws>_victim``), one that names the very workspace."""
    sleep = [sys.executable, "-c", "import time; time.sleep(600)", "--simulator_root"]
    return [subprocess.Popen(sleep + [arg], start_new_session=True) for arg in (workspace + "_victim", workspace)]


def alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_sigterm_stops_the_simulator_and_the_workers_it_leaves_and_nothing_else(tmp_path, job):
    marker = str(tmp_path / "ws")
    others = decoys(marker)
    proc = run_simulate(tmp_path, job, "stuck")
    try:
        assert proc.stdout.readline().endswith("this toolkit's components are allowed in this workspace\n")
        started, *workers = proc.stdout.readline().split()
        assert started == "started" and all(alive(int(w)) for w in workers)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 130
        assert "stopping the simulator (stopped by signal SIGTERM)" in proc.stderr.read()
        assert [w for w in workers if alive(int(w))] == []
        assert [d.poll() for d in others] == [None, None]  # another process naming the workspace is not this command's
    finally:
        proc.kill()
        for pid in set(marked(marker)) - {d.pid for d in others}:
            os.kill(pid, signal.SIGKILL)
        for d in others:
            d.kill()
            d.wait()

"""``lightyear-poc``: a real FLARE POC on loopback runs a peer-to-peer and a star job and brings back
the summary and every site's rounds.csv; nothing it started outlives it, also when it is stopped
by a signal; bad arguments are refused before anything starts."""

import os
import signal
import subprocess
import sys
import time

import pytest

from lightyear.deploy import flare_cli, poc

from deploy_helpers import SITES, assert_finished, kill_marked, make_job, processes_with, round_rows


def end(proc, marker):
    """After a test, whatever happened: let lightyear-poc clean up (SIGTERM), then end what is left."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
    kill_marked(marker)


def run_poc(tmp_path, *args, **popen):
    """``python -m lightyear.deploy.poc ARGS`` with its temporary folders under ``tmp_path/tmp``."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(tmp))
    argv = [sys.executable, "-m", "lightyear.deploy.poc", *map(str, args)]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen), str(
        tmp
    )


@pytest.mark.extended
@pytest.mark.deployment
def test_poc_runs_a_p2p_and_a_star_job_and_leaves_no_process(tmp_path):
    jobs = [make_job(tmp_path / "jobs", "lightyear"), make_job(tmp_path / "jobs", "fedavg")]
    out = tmp_path / "out"
    proc, marker = run_poc(tmp_path, *jobs, "--out", out, "--timeout", 600, "--start-timeout", 400)
    try:
        log, _ = proc.communicate(timeout=900)
        left = processes_with(marker)  # before the safety net below ends anything
    finally:
        end(proc, marker)
    assert proc.returncode == 0, log[-4000:]
    assert "127.0.0.1:" in log  # the server listened on loopback
    assert_finished(out / "lightyear_digits")
    assert_finished(out / "fedavg_digits", rows_per_site=3)
    assert "global_model.npz" in os.listdir(out / "fedavg_digits" / "server" / "simulate_job")
    assert "every POC process stopped" in log
    assert left == []
    assert not [
        n for n in os.listdir(marker) if n.startswith("lightyear-poc-")
    ]  # the POC folder is gone (no --keep-workspace)


@pytest.mark.extended
@pytest.mark.deployment
def test_in_a_real_deployment_each_model_goes_up_once_sealed_and_the_server_hands_it_on(tmp_path):
    """POC runs in FLARE's secure mode with provisioned certificates, so ``secure_messages`` is on and
    each model travels through the server sealed end to end (lightyear.p2p.wire.sealing): one upload
    a round per site, and every site still finishes with its peers' models taken."""
    job = make_job(tmp_path / "jobs", "lightyear")
    out = tmp_path / "out"
    proc, marker = run_poc(tmp_path, job, "--out", out, "--timeout", 600, "--start-timeout", 400)
    try:
        log, _ = proc.communicate(timeout=900)
    finally:
        end(proc, marker)
    assert proc.returncode == 0, log[-4000:]
    assert_finished(out)  # one job: its records are right in --out
    model_bytes = _one_model_bytes(job)
    for site in SITES:  # two receivers each, one upload a round, and no model refused
        rows = round_rows(out, site)
        assert {int(r["sent_bytes"]) for r in rows} == {model_bytes}
        assert all(r["rejected"] in ("", "[]") and r["late"] in ("", "[]") for r in rows), rows
    server_log = (out / "server" / "simulate_job" / "log.txt").read_text()
    assert "secure peer messages on, models routed server" in server_log
    assert "models handed on by the server: {'uploads': 6, 'forwarded': 12," in server_log


def _one_model_bytes(job) -> int:
    """The bytes of the job's model, as a site's exchange counts them."""
    import json

    from lightyear.training.site_runtime import SiteRuntime
    from lightyear.training.weights import num_bytes

    with open(os.path.join(job, "app", "config", "config_fed_client.json")) as f:
        args = json.load(f)["executors"][0]["executor"]["args"]
    keys = ("dataset", "model", "dataset_args", "model_args", "train_args", "data_root")
    runtime = SiteRuntime(SITES[0], seed=0, **{k: args[k] for k in keys if k in args})
    return num_bytes(runtime.get_weights())


@pytest.mark.extended
@pytest.mark.deployment
def test_ctrl_c_stops_every_poc_process(tmp_path):
    """Also when lightyear-poc inherits SIGINT ignored, as a background job of a script does."""
    job = make_job(tmp_path / "jobs", "lightyear", rounds=50)
    proc, marker = run_poc(
        tmp_path,
        job,
        "--out",
        tmp_path / "out",
        "--start-timeout",
        400,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        # wait until the sites' job processes (FLARE starts them in sessions of their own) run
        deadline = time.monotonic() + 600  # the POC may take up to --start-timeout 400 s on a loaded machine
        while not any("worker_process" in line for line in processes_with(marker)):
            assert proc.poll() is None and time.monotonic() < deadline, (
                proc.stdout.read()[-4000:] if proc.poll() is not None else "no job process"
            )
            time.sleep(1)
        proc.send_signal(signal.SIGINT)
        log, _ = proc.communicate(timeout=120)
        left = processes_with(marker)  # before the safety net below ends anything
    finally:
        end(proc, marker)
    assert proc.returncode == 1, log[-4000:]
    assert "interrupted" in log and "every POC process stopped" in log
    assert left == []


def test_sigterm_is_handled_like_ctrl_c():
    from lightyear.deploy.processes import terminate_as_interrupt

    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        with terminate_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_bad_arguments_are_refused_before_anything_starts(tmp_path, capsys, monkeypatch):
    assert poc.main([str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lightyear-poc: error: ") and "is not a FLARE job folder: it has no meta.json" in err
    job = make_job(tmp_path / "jobs", "lightyear")
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert poc.main([job, "--out", str(blocker / "out")]) == 2
    assert "is not a writable folder" in capsys.readouterr().err
    assert poc.main([job, job, "--out", str(tmp_path / "o")]) == 2
    assert "job names must differ" in capsys.readouterr().err
    monkeypatch.setattr(flare_cli.importlib.util, "find_spec", lambda name: None)
    assert poc.main([job, "--out", str(tmp_path / "o")]) == 2
    assert "nvflare is not installed" in capsys.readouterr().err


def test_job_folder_sites_come_from_the_deploy_map(tmp_path):
    from lightyear.deploy.job_folder import JobFolderError, read_job

    job = read_job(make_job(tmp_path, "lightyear", sites=[f"site-{i}" for i in (1, 2, 10)]))
    assert job.sites == ("site-1", "site-2", "site-10") and job.min_clients == 3
    meta = os.path.join(job.path, "meta.json")
    with open(meta, "w") as f:
        f.write('{"name": "x", "deploy_map": {"app": ["@ALL"]}}')
    with pytest.raises(JobFolderError, match="deploys to @ALL"):
        read_job(job.path)


def test_job_id_and_status_are_read_from_nvflares_json_envelope():
    from lightyear.deploy.flare_cli import _find

    failed = (
        '{"status": "error", "error_code": "JOB_FAILED", '
        '"data": {"job_id": "0ff8", "status": "FINISHED:FAILED_TO_RUN"}}'
    )
    assert (
        _find("Connecting to FLARE ...\n" + failed, "status") == "FINISHED:FAILED_TO_RUN"
    )  # not the envelope's "error"
    assert _find('{"status": "error", "error_code": "TIMEOUT"}', "status") is None
    assert _find("job_id: 1a2b-3c\n", "job_id") == "1a2b-3c"


@pytest.mark.parametrize("option", ["--start-timeout", "--timeout"])
@pytest.mark.parametrize("value", ["inf", "nan", "-5", "0"])
def test_a_timeout_no_timer_can_keep_is_refused_before_anything_starts(tmp_path, capsys, monkeypatch, option, value):
    monkeypatch.setattr(poc, "Poc", lambda *a, **k: pytest.fail("a POC was prepared"))
    job = make_job(tmp_path / "jobs", "fedavg")
    with pytest.raises(SystemExit) as exit_:
        poc.main([job, "--out", str(tmp_path / "o"), option, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and "give a finite number of seconds > 0" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()

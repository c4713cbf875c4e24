"""FLARE's Job API runs and exports exactly the generator's job folders, in any workspace."""

import json
import os
import signal
import subprocess
import sys

import pytest

from lightyear.jobs import folders, generate, job_api
from lightyear.jobs.flare_job import GeneratedRecipe

from repo import ROOT

CONFIGS = os.path.join(ROOT, "app_configs")


def folder(root):
    """{relative path: JSON object} of every file under ``root``."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f)) as fh:
                out[os.path.relpath(os.path.join(d, f), root)] = json.load(fh)
    return out


@pytest.mark.parametrize(
    "method, malfunction, faulty",
    [
        ("lightyear", "none", 0),
        ("fedavg", "none", 0),
        ("lightyear", "sfa", 2),
        ("krum", "ana", 1),
        ("defta", "dynamic", 3),
    ],
)
def test_the_exported_folder_is_the_generators_file_for_file(tmp_path, method, malfunction, faulty):
    name, files = generate.build_job(CONFIGS, method, "digits", malfunction, faulty)
    generate.write_job(files, str(tmp_path / "generated" / name))
    GeneratedRecipe.build(CONFIGS, method, "digits", malfunction=malfunction, faulty=faulty).export(
        str(tmp_path / "exported")
    )
    exported, generated = folder(tmp_path / "exported" / name), folder(tmp_path / "generated" / name)
    assert sorted(exported) == sorted(generated)
    assert exported == generated
    if faulty:
        assert "app_faulty/config/config_fed_client.json" in exported


def test_the_command_line_exports_with_flares_export_flags(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lightyear.jobs.job_api",
            "--method",
            "krum",
            "--dataset",
            "camelyon17",
            "--set",
            "rounds=3",
            "--export",
            "--export-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "UserWarning" not in proc.stderr
    _, files = generate.build_job(CONFIGS, "krum", "camelyon17", overrides={"rounds": 3})
    exported = folder(tmp_path / "krum_camelyon17")
    assert exported.pop(folders.MARK)["sha256"].keys() == files.keys() and exported == files


def test_an_export_never_replaces_a_folder_of_another_job(tmp_path):
    (tmp_path / "fedavg_digits").mkdir()
    (tmp_path / "fedavg_digits" / "notes.txt").write_text("mine")
    with pytest.raises(folders.JobFolderExists, match="not the folder of job fedavg_digits"):
        GeneratedRecipe.build(CONFIGS, "fedavg", "digits").export(str(tmp_path))
    assert (tmp_path / "fedavg_digits" / "notes.txt").read_text() == "mine"


def test_prod_needs_the_admin_startup_kit(capsys):
    assert job_api.main(["--method", "fedavg", "--dataset", "digits", "--env", "prod"]) == 2
    assert "--env prod needs --startup-kit" in capsys.readouterr().err


def status_of(argv):
    try:
        return job_api.main(argv)
    except SystemExit as exc:
        return exc.code


@pytest.mark.parametrize(
    "setting, message",
    [
        ("train_args={bad json", "train_args is not valid JSON"),
        ("train_args=[1,2]", "train_args must be a JSON object"),
        ("sites=5", "sites must be a JSON list"),
        ('sites=["a",null]', "sites must be a JSON list"),
        ("tua=0.9", "did you mean 'tau'"),
    ],
)
def test_the_job_api_refuses_bad_settings_in_one_line(capsys, setting, message):
    assert status_of(["--method", "lightyear", "--dataset", "digits", "--set", setting]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_job_api_drops_a_dict_settings_key_with_unset(capsys, monkeypatch):
    built = []
    monkeypatch.setattr(job_api, "make_env", lambda args, recipe: built.append(recipe))
    monkeypatch.setattr(job_api, "run_simulator", lambda recipe, env: 0)
    argv = ["--method", "lightyear", "--dataset", "digits32", "--set", "topology=full"]
    assert status_of([*argv, "--unset", "topology_args.k"]) == 2
    assert "this job's topology_args has no key 'k' (it has degree)" in capsys.readouterr().err
    assert status_of([*argv, "--unset", "topology_args.degree"]) == 0
    args = built[0].files["app/config/config_fed_server.json"]["workflows"][0]["args"]
    assert (args["topology"], args["topology_args"]) == ("full", {})


@pytest.mark.parametrize("wait", ["-5", "inf", "nan"])
def test_a_wait_no_timer_can_keep_is_refused_before_a_poc_starts(capsys, wait, monkeypatch):
    monkeypatch.setattr(job_api, "make_env", lambda *a: pytest.fail("an environment was made"))
    assert status_of(["--method", "fedavg", "--dataset", "digits", "--env", "poc", "--wait", wait]) == 2
    assert "--wait" in capsys.readouterr().err


def test_export_dir_without_export_is_refused_instead_of_running_the_job(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lightyear.jobs.job_api",
            "--method",
            "lightyear",
            "--dataset",
            "digits",
            "--export-dir",
            str(tmp_path / "x"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(tmp_path),
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        "--export-dir only says where --export writes the job: add --export" in proc.stderr
        and "Traceback" not in proc.stderr
    )
    assert not (tmp_path / "x").exists() and not os.path.exists(
        os.path.join("/tmp/nvflare/simulation", "lightyear_digits", "startup")
    )


STUCK_SIMULATOR = r"""
import os, subprocess, sys, time
from lightyear.jobs import job_api

class Env:
    workspace_root = sys.argv[1]

class Recipe:
    name = "job"

    def execute(self, env):
        marker = os.path.join(env.workspace_root, "job")
        sleep = [sys.executable, "-c", "import time; time.sleep(600)", "-o", marker]
        subprocess.Popen(sleep, start_new_session=True)  # a site worker, in a session of its own as FLARE starts them
        # a worker whose parent is gone: still a descendant of this command (it adopts orphans)
        starts = f"import subprocess; subprocess.Popen({sleep!r}, start_new_session=True)"
        subprocess.run([sys.executable, "-c", starts])
        print("started", flush=True)
        time.sleep(600)

sys.exit(job_api.run_simulator(Recipe(), Env()))
"""


def marked(marker):
    import psutil

    return [p.pid for p in psutil.process_iter(["cmdline"]) if any(marker in part for part in p.info["cmdline"] or [])]


def test_sigterm_stops_the_simulator_and_every_worker_it_started_and_nothing_else(tmp_path):
    script = tmp_path / "stuck.py"
    script.write_text(STUCK_SIMULATOR)
    marker = str(tmp_path / "ws" / "job")
    sleep = [sys.executable, "-c", "import time; time.sleep(600)", "-o"]
    # this user's processes beside the run, not started by it: one naming <workspace>_victim, one the workspace itself
    decoys = [subprocess.Popen(sleep + [arg], start_new_session=True) for arg in (marker + "_victim", marker)]
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "ws")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "started"
        workers = set(marked(marker)) - {d.pid for d in decoys}
        assert len(workers) == 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130
        assert "interrupted (SIGTERM): the simulator and its sites were stopped" in proc.stderr.read()
        assert set(marked(marker)) == {d.pid for d in decoys}
        assert [d.poll() for d in decoys] == [None, None]
    finally:
        proc.kill()
        for pid in set(marked(marker)) - {d.pid for d in decoys}:
            os.kill(pid, signal.SIGKILL)
        for d in decoys:
            d.kill()
            d.wait()


def test_flares_own_refusals_of_an_environment_argument_are_one_line(capsys, tmp_path):
    assert status_of(["--method", "fedavg", "--dataset", "digits", "--gpus", "abc"]) == 2
    assert "--gpus takes comma-separated GPU ids such as 0,1, got 'abc'" in capsys.readouterr().err
    for kit in (str(tmp_path / "none"), str(tmp_path)):
        assert status_of(["--method", "fedavg", "--dataset", "digits", "--env", "prod", "--startup-kit", kit]) == 2
        assert "is not an admin startup kit (no startup/ folder in it)" in capsys.readouterr().err


class FinishedRun:
    def get_job_id(self):
        return "sim-1"


class SummaryRecipe:
    """A recipe whose simulator run writes ``rows`` as the server's summary.csv (FLARE's SimEnv returns either way)."""

    name = "job"

    def __init__(self, rows):
        self.rows = rows

    def execute(self, env):
        run = os.path.join(env.workspace_root, self.name, "server", "simulate_job")
        os.makedirs(run)
        with open(os.path.join(run, "summary.csv"), "w") as f:
            f.write("site,malfunction,status,acc,last_round,reason\n" + self.rows)
        return FinishedRun()


class ResultEnv:
    def __init__(self, root):
        self.workspace_root = root

    def get_job_result(self, job_id):
        return os.path.join(self.workspace_root, "job")


@pytest.mark.parametrize(
    "rows, status",
    [
        ("site-1,none,failed,nan,,CheckpointError: damaged\nsite-2,none,dropped,nan,,\n", 1),
        ("site-1,none,finished,0.9,2,\nsite-2,none,failed,nan,,x\n", 0),
    ],
    ids=["every-site-failed", "a-site-finished"],
)
def test_a_simulator_run_in_which_no_site_finished_exits_1(tmp_path, capsys, rows, status):
    assert job_api.run_simulator(SummaryRecipe(rows), ResultEnv(str(tmp_path))) == status
    err = capsys.readouterr().err
    assert ("the run failed: no site finished (site-1 failed (CheckpointError: damaged), site-2 dropped" in err) == (
        status == 1
    ), err

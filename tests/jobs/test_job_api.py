"""FLARE's Job API runs and exports exactly the generator's job folders, in any workspace."""

import json
import os
import signal
import subprocess
import sys

import pytest
from nvflare.recipe.sim_env import SimEnv

from lightyear.flare.component_policy import REFUSAL_FIX
from lightyear.jobs import folders, generate, job_api
from lightyear.jobs.environments import LightyearPocEnv, allow_in_poc, prepare_simulator_workspace
from lightyear.jobs.flare_job import GeneratedRecipe

from repo import ROOT

CONFIGS = os.path.join(ROOT, "app_configs")
NVFLARE = os.path.join(os.path.dirname(sys.executable), "nvflare")
TINY = {"sites": ["site-1", "site-2", "site-3"], "rounds": 2}


def folder(root):
    """{relative path: JSON object} of every file under ``root``."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f)) as fh:
                out[os.path.relpath(os.path.join(d, f), root)] = json.load(fh)
    return out


def allows_package(resources_file):
    with open(resources_file) as f:
        return "lightyear." in json.load(f)["class_allow_list"]


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
    assert folder(tmp_path / "krum_camelyon17") == files


def test_an_export_never_replaces_a_folder_of_another_job(tmp_path):
    (tmp_path / "fedavg_digits").mkdir()
    (tmp_path / "fedavg_digits" / "notes.txt").write_text("mine")
    with pytest.raises(folders.JobFolderExists, match="not the folder of job fedavg_digits"):
        GeneratedRecipe.build(CONFIGS, "fedavg", "digits").export(str(tmp_path))
    assert (tmp_path / "fedavg_digits" / "notes.txt").read_text() == "mine"


def test_a_sim_env_naming_other_sites_is_refused_with_the_fix():
    recipe = GeneratedRecipe.build(CONFIGS, "lightyear", "digits", overrides=TINY)
    with pytest.raises(ValueError, match=r"SimEnv\(clients=\['site-1', 'site-2', 'site-3'\]\)"):
        recipe.process_env(SimEnv(num_clients=3))


def test_sim_gives_every_site_its_own_worker_and_gpu_group(tmp_path):
    args = job_api.build_parser().parse_args(
        ["--method", "lightyear", "--dataset", "camelyon17", "--gpus", "0,1", "--workspace", str(tmp_path)]
    )
    recipe = GeneratedRecipe.build(CONFIGS, "lightyear", "camelyon17")
    env = job_api.make_env(args, recipe)
    assert env.clients == ["site-1", "site-2", "site-3", "site-4", "site-5"]
    assert env.num_threads == 5
    assert env.gpu_config == "0,1,0,1,0"
    assert env.workspace_root == str(tmp_path)


def test_a_gpu_job_in_a_cpu_poc_is_refused_naming_both_fixes():
    args = job_api.build_parser().parse_args(["--method", "fedavg", "--dataset", "isic19", "--env", "poc"])
    with pytest.raises(ValueError, match="site_resource_spec=null.*--gpus"):
        job_api.make_env(args, GeneratedRecipe.build(CONFIGS, "fedavg", "isic19"))
    cpu = GeneratedRecipe.build(CONFIGS, "fedavg", "isic19", overrides={"site_resource_spec": None})
    assert isinstance(job_api.make_env(args, cpu), LightyearPocEnv)


def test_a_simulator_workspace_is_prepared_from_nothing_and_flare_keeps_it(tmp_path):
    ws = tmp_path / "fresh" / "fedavg_digits"
    path = prepare_simulator_workspace(str(ws))
    assert path == str(ws / "local" / "resources.json") and allows_package(path)
    SimEnv._ensure_default_component_policy(str(ws))  # what SimEnv.deploy does next
    assert allows_package(path)


def test_the_poc_env_allows_the_package_in_server_and_sites_before_starting(tmp_path, monkeypatch):
    from nvflare.recipe import poc_env as flare_poc

    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # FLARE's POC tools keep settings in ~/.nvflare
    seen = {}

    def start(poc_workspace, gpu_ids, excluded, services_list):
        from lightyear.jobs.environments import poc_participant_dirs

        seen["allowed"] = {
            os.path.basename(d): allows_package(os.path.join(d, "local", "resources.json"))
            for d in poc_participant_dirs(poc_workspace)
        }

    class Sessions:
        def submit_job(self, job):
            seen["job"] = job.name
            return "job-id"

    monkeypatch.setattr(flare_poc, "_start_poc", start)
    monkeypatch.setattr(flare_poc, "SERVICE_START_TIMEOUT", 0)
    env = LightyearPocEnv(clients=["site-1", "site-2"], num_clients=2, workspace=str(tmp_path / "poc"))
    monkeypatch.setattr(env, "_get_session_manager", lambda: Sessions())
    recipe = GeneratedRecipe.build(CONFIGS, "fedavg", "digits", overrides={"sites": ["site-1", "site-2"], "rounds": 1})
    assert env.deploy(recipe._job) == "job-id"
    assert seen == {"allowed": {"server": True, "site-1": True, "site-2": True}, "job": "fedavg_digits"}
    assert len(allow_in_poc(str(tmp_path / "poc"))) == 3  # idempotent


@pytest.mark.extended
@pytest.mark.simulator
def test_sim_env_runs_a_tiny_peer_to_peer_job_in_a_fresh_workspace(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lightyear.jobs.job_api",
            "--method",
            "lightyear",
            "--dataset",
            "digits",
            "--set",
            json.dumps(TINY["sites"]).join(["sites=", ""]),
            "--set",
            "rounds=2",
            "--set",
            "start_timeout=240",
            "--set",
            "ready_timeout=240",
            "--env",
            "sim",
            "--workspace",
            str(tmp_path / "ws"),
        ],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
    )
    run = tmp_path / "ws" / "lightyear_digits"
    summary = run / "server" / "simulate_job" / "summary.json"
    assert proc.returncode == 0 and summary.exists(), (proc.stdout + proc.stderr)[-3000:]
    assert {row["site"] for row in json.loads(summary.read_text())} >= set(TINY["sites"])
    assert allows_package(run / "local" / "resources.json")


@pytest.mark.extended
@pytest.mark.simulator
def test_plain_simulator_in_a_fresh_workspace_names_the_fix_and_lightyear_simulate_runs_it(tmp_path):
    name, files = generate.build_job(CONFIGS, "fedavg", "digits", overrides=TINY)
    job = tmp_path / "jobs" / name
    generate.write_job(files, str(job))
    ws = tmp_path / "ws"
    refused = subprocess.run(
        [NVFLARE, "simulator", str(job), "-w", str(ws), "-t", "3"],
        capture_output=True,
        text=True,
        timeout=200,
        cwd=str(tmp_path),
    )
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert "not in allow_list" in out and "Component 'lightyear." in out  # one of the toolkit's components is refused
    # FLARE's refusal quotes the component's configuration, which names the fix
    assert REFUSAL_FIX.format(package="lightyear") in out and "lightyear-allow WS/local" in out
    ran = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "lightyear-simulate"), str(job), "-w", str(ws), "-t", "3"],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=str(tmp_path),
    )
    assert ran.returncode == 0 and (ws / "server" / "simulate_job" / "summary.json").exists(), (
        ran.stdout + ran.stderr
    )[-3000:]
    assert allows_package(ws / "local" / "resources.json")


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

"""The environments a generated job runs in through FLARE's Job API: a simulator (SimEnv, its sites
and workspace, and ``nvflare simulator``/``lightyear-simulate``) and a POC, each allowing the
package's components before anything starts."""

import json
import os
import subprocess
import sys

import pytest
from nvflare.recipe.sim_env import SimEnv

from lightyear.flare.component_policy import REFUSAL_FIX
from lightyear.jobs import generate, job_api
from lightyear.jobs.environments import LightyearPocEnv, allow_in_poc
from lightyear.jobs.flare_job import GeneratedRecipe
from lightyear.jobs.simulator_workspace import prepare_simulator_workspace

from repo import ROOT

CONFIGS = os.path.join(ROOT, "app_configs")
NVFLARE = os.path.join(os.path.dirname(sys.executable), "nvflare")
TINY = {"sites": ["site-1", "site-2", "site-3"], "rounds": 2}


def allows_package(resources_file):
    with open(resources_file) as f:
        return "lightyear." in json.load(f)["class_allow_list"]


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

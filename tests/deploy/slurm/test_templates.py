"""lightyear-slurm: the batch scripts it writes (parameters, GPU pinning, CPU mode), its checks of
bad input, submission through sbatch, and the committed templates in slurm/ being current."""

import os
import subprocess
import sys

import pytest

from lightyear.deploy.slurm import cli as slurm_cli
from lightyear.deploy.slurm import templates as slurm_templates
from lightyear.deploy.slurm.params import SlurmInputError, for_job, load_description
from lightyear.jobs import generate

from repo import ROOT

DESCRIPTION = os.path.join(ROOT, "app_configs", "slurm", "templates.yaml")
SITES = ["site-1", "site-2", "site-3"]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("jobs")
    name, files = generate.build_job(
        os.path.join(ROOT, "app_configs"),
        "lightyear",
        "digits",
        "none",
        0,
        seed=0,
        overrides={"sites": SITES, "rounds": 2},
    )
    generate.write_job(files, str(tmp_path / name))
    return str(tmp_path / name)


def dry_run(capsys, *args):
    assert slurm_cli.main([*args, "--description", DESCRIPTION, "--dry-run"]) == 0
    return capsys.readouterr().out


def fake_python(tmp_path):
    """A python3 that records nvflare's arguments instead of running FLARE, and runs the rest."""
    path = tmp_path / "bin" / "python3"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"""#!/bin/bash
if [ "$1 $2" = "-m nvflare.cli" ]; then shift 2; echo "NVFLARE $*"; exit 0; fi
if [ "$1 $2" = "-m lightyear.deploy.slurm.results" ]; then exit 0; fi
exec {sys.executable} "$@"
""")
    path.chmod(0o755)
    return str(path)


def run_script(tmp_path, text, *args, **env):
    script = tmp_path / "job.sbatch"
    script.write_text(text)
    full = dict(
        os.environ,
        LIGHTYEAR_PYTHON=fake_python(tmp_path),
        LIGHTYEAR_RESULTS=str(tmp_path / "results"),
        PYTHONPATH=os.path.join(ROOT, "custom"),
        SLURM_JOB_ID="77",
    )
    full.update(env)
    if "CUDA_VISIBLE_DEVICES" not in env:
        full.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.run(
        ["bash", str(script), *args], capture_output=True, text=True, env=full, cwd=str(tmp_path), timeout=120
    )


def test_the_committed_templates_are_current():
    assert slurm_templates.differences(DESCRIPTION, os.path.join(ROOT, "slurm")) == []


def test_parameters_appear_as_sbatch_directives(job, capsys):
    text = dry_run(
        capsys,
        "simulator",
        job,
        "--partition",
        "gpu-a",
        "--account",
        "proj1",
        "--time",
        "1-02:00:00",
        "--gpu-type",
        "h100",
        "--cpus",
        "2",
        "--mem-per-cpu",
        "4G",
    )
    for line in (
        "#SBATCH --partition=gpu-a",
        "#SBATCH --account=proj1",
        "#SBATCH --time=1-02:00:00",
        "#SBATCH --gres=gpu:h100:3",
        "#SBATCH --cpus-per-task=6",
        "#SBATCH --mem-per-cpu=4G",
        "#SBATCH --nodes=1",
    ):
        assert line in text.splitlines()
    assert f"JOB=${{1:-{job}}}" in text


def test_each_simulated_site_gets_its_own_gpu_of_the_allocation(job, capsys, tmp_path):
    text = dry_run(capsys, "simulator", job)
    assert "#SBATCH --gres=gpu:a100:3" in text.splitlines()  # one GPU a site by default
    out = run_script(tmp_path, text, CUDA_VISIBLE_DEVICES="2,5,7")
    assert out.returncode == 0, out.stderr
    assert f"NVFLARE simulator {job} -w {tmp_path}/results/lightyear_digits-77/workspace -gpu 2,5,7" in out.stdout
    assert (tmp_path / "results" / "lightyear_digits-77" / "workspace" / "local" / "resources.json").is_file()
    shared = run_script(tmp_path, text, CUDA_VISIBLE_DEVICES="0,1")  # fewer GPUs than sites: shared round-robin
    assert "-gpu 0,1,0" in shared.stdout
    none = run_script(tmp_path, text)
    assert none.returncode == 2 and "no GPU in this allocation" in none.stderr


def test_cpu_mode_asks_no_gpu_and_runs_one_thread_a_site(job, capsys, tmp_path):
    text = dry_run(capsys, "cpu", job, "--cpus", "1")
    assert "--gres" not in text and "#SBATCH --cpus-per-task=3" in text.splitlines()
    out = run_script(tmp_path, text)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("NVFLARE simulator") == 1 and "-t 3" in out.stdout and "-gpu" not in out.stdout
    assert "--gres" not in dry_run(capsys, "deploy_cpu", job)


def test_a_gpu_deployment_gives_each_site_step_one_gpu_and_the_server_none(job, capsys):
    text = dry_run(capsys, "deploy", job, "--gpus", "2")
    lines = text.splitlines()
    assert {
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=3",
        "#SBATCH --gres=gpu:a100:2",
        "#SBATCH --signal=B:TERM@120",
    } <= set(lines)
    assert 'SITE_GRES="--gres=gpu:1"' in lines and 'SERVER_GRES="--gres=none"' in lines
    assert "trap stop_all EXIT" in lines


def test_a_deployment_refuses_an_allocation_too_small_for_the_job(job, tmp_path):
    text = slurm_templates.render(load_description(DESCRIPTION)["deploy_cpu"], slurm_templates.Target())
    out = run_script(tmp_path, text, job, SLURM_NTASKS="3")
    assert out.returncode == 2 and "it needs 4 tasks" in out.stderr


def test_dry_run_prints_the_script_without_calling_sbatch(job, capsys, monkeypatch):
    def no_sbatch(*a, **k):
        raise AssertionError("sbatch called on --dry-run")

    monkeypatch.setattr(subprocess, "Popen", no_sbatch)
    assert dry_run(capsys, "deploy_cpu", job).startswith("#!/bin/bash\n#SBATCH --job-name=ly-lightyear_digits")


@pytest.mark.parametrize(
    "args, message",
    [
        (["simulator", "no/such/job"], "is not a folder: give a job folder"),
        (["simulator", "JOB", "--gpus", "4"], "4 GPUs for 3 sites"),
        (["deploy", "JOB", "--gpus", "1", "--nodes", "2"], "3 sites need 3 GPUs"),
        (["cluster", "JOB"], "unknown mode 'cluster'"),
        (["cpu", "JOB", "--time", "2h"], "not a SLURM time"),
        (["simulator", "JOB", "--nodes", "2"], "one node"),
    ],
)
def test_bad_input_is_refused_with_the_fix(job, capsys, args, message):
    args = [job if a == "JOB" else a for a in args]
    assert slurm_cli.main([*args, "--description", DESCRIPTION, "--dry-run"]) == 2
    assert message in capsys.readouterr().err


def test_without_sbatch_submission_says_so_before_writing_anything(job, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    mine = tmp_path / "out" / "lightyear_digits-cpu.sbatch"
    mine.parent.mkdir()
    mine.write_text("my own script")
    assert slurm_cli.main(["cpu", job, "--description", DESCRIPTION, "--out", str(tmp_path / "out")]) == 2
    assert "sbatch not found" in capsys.readouterr().err
    assert mine.read_text() == "my own script"


def fake_sbatch(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/bash\necho 4242\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def test_a_script_of_the_users_is_never_replaced_but_one_lightyear_slurm_wrote_is(job, capsys, monkeypatch, tmp_path):
    fake_sbatch(tmp_path, monkeypatch)
    out = tmp_path / "out"
    args = ["cpu", job, "--description", DESCRIPTION, "--out", str(out)]
    assert slurm_cli.main(args) == 0 and slurm_cli.main(args) == 0  # its own script, written again
    script = out / "lightyear_digits-cpu.sbatch"
    script.write_text("#!/bin/bash\n# my own script\n")
    capsys.readouterr()
    assert slurm_cli.main(args) == 2
    assert "lightyear-slurm did not write it" in capsys.readouterr().err and "my own" in script.read_text()


def test_a_results_folder_with_a_space_is_refused_with_the_fix(job, capsys, tmp_path):
    # sbatch ends an #SBATCH value at white space: --output would name another folder
    status = slurm_cli.main(
        ["cpu", job, "--description", DESCRIPTION, "--out", str(tmp_path / "my results"), "--dry-run"]
    )
    assert status == 2 and "holds a space" in capsys.readouterr().err


def test_writing_the_templates_keeps_a_script_of_the_users_in_the_folder(tmp_path):
    folder = tmp_path / "slurm"
    paths = slurm_templates.write(DESCRIPTION, str(folder))
    stale = folder / "renamed.sbatch"  # a committed template no longer in the description: removed
    stale.write_text(open(paths[0]).read())
    mine = folder / "my_cluster.sbatch"
    mine.write_text("#!/bin/bash\n#SBATCH --partition=mine\n")
    assert slurm_templates.differences(DESCRIPTION, str(folder)) == ["renamed.sbatch"]
    slurm_templates.write(DESCRIPTION, str(folder))
    assert not stale.exists() and mine.exists()
    assert slurm_templates.differences(DESCRIPTION, str(folder)) == []


def test_submission_prints_the_job_id_and_where_results_land(job, capsys, monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(f'#!/bin/bash\necho "$@" > {tmp_path}/args\necho 4242\n')
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    out = tmp_path / "out"
    assert slurm_cli.main(["cpu", job, "--description", DESCRIPTION, "--out", str(out), "--wait"]) == 0
    printed = capsys.readouterr().out
    assert "submitted SLURM job 4242" in printed and f"results: {out}/lightyear_digits-4242" in printed
    args = (tmp_path / "args").read_text().split()
    assert args[:2] == ["--parsable", "--wait"] and args[2] == str(out / "lightyear_digits-cpu.sbatch")


def test_one_gpu_a_site_unless_given_and_deploy_nodes_follow_the_gpus():
    templates = load_description(DESCRIPTION)
    assert for_job(templates["simulator"], 5, {}).gpus == 5
    assert for_job(templates["deploy"], 6, {"gpus": 4}).nodes == 2
    with pytest.raises(SlurmInputError, match="leave a node without a site"):
        for_job(templates["deploy"], 2, {"gpus": 4, "nodes": 2})


def test_a_committed_script_stops_with_the_reason_when_python_or_the_job_is_missing(tmp_path):
    with open(os.path.join(ROOT, "slurm", "cpu.sbatch")) as f:
        text = f.read()
    no_python = run_script(tmp_path, text, "jobs/lightyear_digits", LIGHTYEAR_PYTHON="no-such-python")
    assert no_python.returncode == 2 and "no Python no-such-python" in no_python.stderr
    no_job = run_script(tmp_path, text, "jobs/missing", SLURM_SUBMIT_DIR=ROOT)
    assert no_job.returncode == 2 and f"{ROOT}/jobs/missing is not a folder: give a job folder" in no_job.stderr


@pytest.mark.parametrize(
    "content, message",
    [
        (b"templates: {cpu: {mode: simulator\n", "is not valid YAML"),
        (b"\x89PNG\r\n\x1a\n\x00", "is not a UTF-8 text file"),
        (b"templates: {cpu: [1, 2]}\n", "template 'cpu' must map parameters to values"),
        (b"templates: {cpu: {gpus: 0}}\n", "template 'cpu' needs a mode"),
        (b"defaults: 3\ntemplates: {cpu: {mode: simulator}}\n", "'defaults' must map parameters to values"),
        (b"templates: {cpu: {mode: simulator, gpus: 1, gpus: 2}}\n", "gives the key 'gpus' twice"),
    ],
)
def test_a_bad_description_is_named_in_one_line(job, capsys, tmp_path, content, message):
    (tmp_path / "d.yaml").write_bytes(content)
    assert slurm_cli.main(["cpu", job, "--description", str(tmp_path / "d.yaml"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("option", ["--partition", "--account", "--gpu-type", "--time", "--mem-per-cpu"])
def test_a_value_with_a_line_break_never_reaches_the_script(job, capsys, option):
    assert (
        slurm_cli.main(["cpu", job, option, "gpu\n#SBATCH --wrap=evil", "--description", DESCRIPTION, "--dry-run"]) == 2
    )
    assert capsys.readouterr().out == ""


def test_every_sbatch_directive_refuses_a_line_break():
    from lightyear.deploy.slurm.params import SlurmInputError
    from lightyear.deploy.slurm.script import sbatch_lines

    assert sbatch_lines({"time": "01:00:00", "gres": None}) == ["#SBATCH --time=01:00:00"]
    with pytest.raises(SlurmInputError, match="#SBATCH --job-name value"):
        sbatch_lines({"job-name": "ly-x\n#SBATCH --wrap=evil"})


def test_the_description_is_the_packages_and_the_templates_need_a_checkout(job, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert slurm_cli.main(["cpu", job, "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("#!/bin/bash\n")
    assert slurm_cli.main(["--check"]) == 2
    assert "lightyear-slurm --check needs a checkout of the repository" in capsys.readouterr().err
    monkeypatch.chdir(ROOT)
    assert slurm_cli.main(["--check"]) == 0

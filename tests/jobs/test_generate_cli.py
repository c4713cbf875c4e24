"""lightyear-jobs on the command line: every bad input is one line, exit status 2, nothing written;
an existing folder is replaced only when the generator wrote it; ``--check`` and the default
``--out`` inside and outside a checkout of the repository."""

import json
import os
import re
import shutil

import pytest

from lightyear.jobs import folders, generate

from repo import ROOT

CONFIGS = os.path.join(ROOT, "app_configs")


def run_cli(capsys, *args, out=None):
    """(exit status, stderr) of lightyear-jobs ARGS."""
    argv = [*args] + (["--out", str(out)] if out is not None else [])
    try:
        status = generate.main(argv)
    except SystemExit as exc:
        status = exc.code
    return status, capsys.readouterr().err


def one_line_refusal(capsys, out, *args):
    status, err = run_cli(capsys, "--method", "lightyear", "--dataset", "digits", *args, out=out)
    assert status == 2 and err.count("\n") == 1 and err.startswith("lightyear-jobs: error: "), err
    assert "Traceback" not in err
    assert not os.path.isdir(out) or not os.listdir(out)
    return err


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--set", "train_args={bad json"],
            "train_args is not valid JSON: Expecting property name enclosed in double quotes at column 2",
        ),
        (["--set", "train_args=[1,2]"], r"train_args must be a JSON object \(such as \{"),
        (["--set", "model_args=5"], "model_args must be a JSON object"),
        (["--set", 'sites=["site-1", '], "sites is not valid JSON"),
        (["--set", "sites=5"], "sites must be a JSON list of strings \\(site names"),
        (["--set", 'sites=["a",null]'], "sites must be a JSON list of strings \\(site names"),
        (["--set", "sites=[]"], "a job needs two sites"),
        (["--set", 'sites=["../evil","site-2"]'], "site name '../evil' is not allowed"),
        (["--set", 'sites=["site-1\\n","site-2"]'], "is not allowed"),
        (["--set", "records_file=../../x.csv"], "records_file must be a plain file name"),
        (["--set", "seed=5"], "the seed is set with --seed N"),
        (["--set", "round=3"], "has no setting 'round'; did you mean 'rounds'"),
        (["--set", "tua=0.9"], "did you mean 'tau'"),
        (["--set", "tau=2"], "tau must be a number in"),
        (["--set", "tau=NaN"], "tau must be a number in"),
        (["--set", "rounds=-1"], "rounds must be a positive integer"),
        (["--set", "rounds=1e9"], "rounds must be a positive integer"),
        (["--set", "tensorboard=flase"], "tensorboard must be true or false"),
        (
            ["--set", "task_check_period=1"],
            "has no setting 'task_check_period'",
        ),  # FLARE's Controller argument our controller does not pass on
        (["--set", "novalue"], "--set takes KEY=VALUE"),
        (["--unset", "tau"], "--unset tau: no layer of this job gives 'tau'"),
        (
            ["--unset", "rounds.x"],
            "only the dict settings .* have keys to drop; drop the whole setting with --unset rounds",
        ),
        (["--unset", "train_args.loss_args.gamma"], "--unset takes KEY or KEY.SUB"),
        (["--unset", "seed"], "the seed is set with --seed N"),
        (["--unset", "train_args.lr", "--unset", "train_args.lr"], "--unset train_args.lr is given twice"),
        (["--set", "train_args=null"], "would drop the dataset's train_args: to drop it, --unset train_args"),
        (["--malfunction", "sfa", "--faulty", "9"], "between 0 and 8"),
        (["--faulty", "2"], "--faulty needs --malfunction"),
        (["--configs", "/nonexistent"], "--configs /nonexistent is not a folder"),
    ],
)
def test_the_cli_refuses_a_bad_request_in_one_line_and_writes_nothing(tmp_path, capsys, args, message):
    err = one_line_refusal(capsys, tmp_path / "J", *args)
    assert re.search(message, err), err


@pytest.mark.parametrize(
    "method, setting, message",
    [
        ("balance", "balance_gamma=-3", "gamma must be a number > 0"),
        ("defta", "defta_sample_size=0", "sample_size must be an integer >= 1"),
        ("fedavg", "transfer_dtype=float16", "the fedavg job on digits has no setting 'transfer_dtype'"),
    ],
)
def test_a_method_setting_is_refused_with_the_components_message(tmp_path, capsys, method, setting, message):
    status, err = run_cli(capsys, "--method", method, "--dataset", "digits", "--set", setting, out=tmp_path)
    assert status == 2 and message in err and not os.listdir(tmp_path)


def test_settings_no_template_names_reach_the_job(tmp_path, capsys):
    args = [
        "--method",
        "lightyear",
        "--dataset",
        "digits",
        "--set",
        "max_abs_weight=1e3",
        "--set",
        "compute_slots=2",
        "--set",
        'train_args={"lr": 0.001}',
        "--set",
        "third_term=sharpness",
    ]
    assert run_cli(capsys, *args, out=tmp_path)[0] == 0
    client = json.load(open(tmp_path / "lightyear_digits" / "app" / "config" / "config_fed_client.json"))
    executor = client["executors"][0]["executor"]["args"]
    assert (executor["max_abs_weight"], executor["compute_slots"], executor["third_term"]) == (1000.0, 2, "sharpness")
    dataset = json.load(open(os.path.join(CONFIGS, "datasets", "digits.json")))["train_args"]
    assert executor["train_args"] == {**dataset, "lr": 0.001}


def test_out_must_be_a_folder_that_can_be_made(tmp_path, capsys):
    (tmp_path / "FILE").write_text("mine")
    err = one_line_refusal(capsys, tmp_path / "FILE")
    assert "--out" in err and "is a file" in err and (tmp_path / "FILE").read_text() == "mine"
    err = one_line_refusal(capsys, "/proc/x")
    assert "--out /proc/x cannot be created" in err


def test_a_folder_the_generator_did_not_write_is_never_replaced_without_force(tmp_path, capsys):
    mine = tmp_path / "lightyear_digits" / "notes.txt"
    mine.parent.mkdir()
    mine.write_text("my notes")
    status, err = run_cli(capsys, "--method", "lightyear", "--dataset", "digits", out=tmp_path)
    assert status == 2 and "holds files lightyear-jobs did not write (notes.txt)" in err and "--force" in err
    assert mine.read_text() == "my notes" and os.listdir(mine.parent) == ["notes.txt"]
    assert run_cli(capsys, "--method", "lightyear", "--dataset", "digits", "--force", out=tmp_path)[0] == 0
    assert not mine.exists() and (tmp_path / "lightyear_digits" / "meta.json").exists()
    # a job it wrote is replaced: the new settings, no stale file
    assert run_cli(capsys, "--method", "lightyear", "--dataset", "digits", "--set", "rounds=3", out=tmp_path)[0] == 0
    server = json.load(open(tmp_path / "lightyear_digits" / "app" / "config" / "config_fed_server.json"))
    assert server["workflows"][0]["args"]["rounds"] == 3
    assert sorted(os.listdir(tmp_path)) == ["lightyear_digits"]  # no staging folder left behind


def test_a_job_file_edited_by_hand_is_never_replaced_without_force(tmp_path, capsys):
    job = ("--method", "lightyear", "--dataset", "digits")
    assert run_cli(capsys, *job, out=tmp_path)[0] == 0
    client = tmp_path / "lightyear_digits" / "app" / "config" / "config_fed_client.json"
    config = json.loads(client.read_text())
    config["executors"][0]["executor"]["args"]["max_abs_weight"] = 7.0  # the user's own change
    client.write_text(json.dumps(config, indent=2) + "\n")
    edited = client.read_text()
    status, err = run_cli(capsys, *job, "--set", "rounds=3", out=tmp_path)
    assert status == 2 and err.count("\n") == 1, err
    assert "app/config/config_fed_client.json changed since lightyear-jobs wrote it" in err and "--force" in err, err
    assert client.read_text() == edited
    assert run_cli(capsys, *job, "--force", out=tmp_path)[0] == 0
    assert client.read_text() != edited
    # the folder it wrote, untouched since, is replaced without --force
    assert run_cli(capsys, *job, "--set", "rounds=3", out=tmp_path)[0] == 0


def test_rewriting_every_committed_job_keeps_an_edited_one_unless_forced(tmp_path):
    names = generate.write_committed(CONFIGS, str(tmp_path))
    server = tmp_path / names[0] / "app" / "config" / "config_fed_server.json"
    server.write_text(server.read_text() + " ")  # an edit, or a job written before the toolkit changed
    with pytest.raises(folders.JobFolderExists, match="changed since lightyear-jobs wrote it"):
        generate.write_committed(CONFIGS, str(tmp_path))
    assert server.read_text().endswith(" ")
    generate.write_committed(CONFIGS, str(tmp_path), force=True)
    assert not server.read_text().endswith(" ")


def test_a_job_file_the_generator_did_not_list_or_a_damaged_list_is_refused(tmp_path):
    name, files = generate.build_job(CONFIGS, "fedavg", "digits")
    job = tmp_path / name
    generate.write_job(files, str(job))
    folders.check_replaceable(str(job))  # as written: replaceable
    added = job / "app_faulty" / "config" / "config_fed_client.json"  # a job file's name, made by hand
    added.parent.mkdir(parents=True)
    added.write_text("{}")
    with pytest.raises(folders.JobFolderExists, match=r"did not write \(app_faulty/config/config_fed_client\.json\)"):
        folders.check_replaceable(str(job))
    shutil.rmtree(job / "app_faulty")
    (job / folders.MARK).write_text('{"sha256": ')
    with pytest.raises(folders.JobFolderExists, match=r"\.lightyear-jobs\.json is not valid JSON.*pass --force"):
        folders.check_replaceable(str(job))


def test_a_file_where_the_job_folder_goes_is_refused_even_with_force(tmp_path, capsys):
    (tmp_path / "lightyear_digits").write_text("mine")
    status, err = run_cli(capsys, "--method", "lightyear", "--dataset", "digits", "--force", out=tmp_path)
    assert (
        status == 2 and "is a file, not a job folder" in err and (tmp_path / "lightyear_digits").read_text() == "mine"
    )


def test_a_damaged_configuration_is_named(tmp_path, capsys):
    configs = tmp_path / "configs"
    shutil.copytree(CONFIGS, configs)
    (configs / "datasets" / "digits.json").write_bytes(b"\xff\xfe{")
    status, err = run_cli(
        capsys, "--configs", str(configs), "--method", "fedavg", "--dataset", "digits", out=tmp_path / "J"
    )
    assert status == 2 and "the dataset file" in err and "is not a UTF-8 text file" in err
    (configs / "datasets" / "digits.json").write_text('{"sites": [}')
    status, err = run_cli(
        capsys, "--configs", str(configs), "--method", "fedavg", "--dataset", "digits", out=tmp_path / "J"
    )
    assert status == 2 and "is not valid JSON: Expecting value at line 1 column 12" in err
    status, err = run_cli(
        capsys, "--configs", str(tmp_path), "--method", "fedavg", "--dataset", "digits", out=tmp_path / "J"
    )
    assert status == 2 and "is not an app_configs folder" in err


def test_check_works_in_the_repository_and_outside_asks_for_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(os.path.join(ROOT, "docs"))
    assert generate.main(["--check"]) == 0
    monkeypatch.chdir(tmp_path)
    status, err = run_cli(capsys, "--check")
    assert status == 2 and "needs a checkout of the repository" in err
    status, err = run_cli(capsys)
    assert status == 2 and "lightyear-jobs without --method needs a checkout" in err and not os.listdir(tmp_path)


def test_outside_the_repository_a_job_goes_to_jobs_here(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert generate.main(["--method", "fedavg", "--dataset", "digits"]) == 0
    assert (tmp_path / "jobs" / "fedavg_digits" / "meta.json").exists()


def test_writing_every_committed_job_checks_every_folder_before_writing_any(tmp_path, capsys):
    mine = tmp_path / "lightyear_digits" / "notes.txt"  # a folder far down the list holds the user's file
    mine.parent.mkdir()
    mine.write_text("my notes")
    status, err = run_cli(capsys, out=tmp_path)
    assert status == 2 and "holds files lightyear-jobs did not write (notes.txt)" in err
    assert os.listdir(tmp_path) == ["lightyear_digits"] and mine.read_text() == "my notes"  # nothing else written


def server_and_executor(out, name):
    server = json.load(open(out / name / "app" / "config" / "config_fed_server.json"))
    client = json.load(open(out / name / "app" / "config" / "config_fed_client.json"))
    return server["workflows"][0]["args"], client["executors"][0]["executor"]["args"]


def test_unset_drops_one_key_of_a_dict_setting_so_the_default_applies(tmp_path, capsys):
    args = ["--method", "lightyear", "--dataset", "digits", "--unset", "train_args.weight_decay"]
    assert run_cli(capsys, *args, out=tmp_path)[0] == 0
    dataset = json.load(open(os.path.join(CONFIGS, "datasets", "digits.json")))["train_args"]
    _, executor = server_and_executor(tmp_path, "lightyear_digits")
    assert "weight_decay" in dataset and executor["train_args"] == {
        k: v for k, v in dataset.items() if k != "weight_decay"
    }


def test_unset_then_set_replaces_a_whole_dict_setting(tmp_path, capsys):
    args = ["--method", "lightyear", "--dataset", "digits32", "--set", "topology=k_regular"]
    # merged with digits32's {"degree": 3}, k_regular's k would come with a degree it does not take
    status, err = run_cli(capsys, *args, "--set", 'topology_args={"k": 4}', out=tmp_path)
    assert status == 2 and "--unset topology_args.degree" in err
    replace = ["--unset", "topology_args", "--set", 'topology_args={"k": 4}', "--unset", "train_args"]
    assert run_cli(capsys, *args, *replace, "--set", 'train_args={"lr": 0.01}', out=tmp_path)[0] == 0
    server, executor = server_and_executor(tmp_path, "lightyear_digits32")
    assert (server["topology"], server["topology_args"]) == ("k_regular", {"k": 4})
    assert executor["train_args"] == {"lr": 0.01}


def test_the_digits32_full_mesh_names_its_fix_and_generates_with_it(tmp_path, capsys):
    args = ["--method", "lightyear", "--dataset", "digits32", "--set", "topology=full"]
    status, err = run_cli(capsys, *args, out=tmp_path)
    assert status == 2 and err.count("\n") == 1 and not os.listdir(tmp_path)
    assert "topology 'full' takes no arguments" in err and "remove it: --unset topology_args.degree" in err
    assert run_cli(capsys, *args, "--unset", "topology_args.degree", out=tmp_path)[0] == 0
    server, _ = server_and_executor(tmp_path, "lightyear_digits32")
    assert (server["topology"], server["topology_args"]) == ("full", {})
    assert len(json.load(open(tmp_path / "lightyear_digits32" / "meta.json"))["deploy_map"]["app"]) == 33


def test_unset_of_a_key_the_dict_does_not_have_is_refused_naming_the_keys_it_has(tmp_path, capsys):
    args = ["--method", "lightyear", "--dataset", "digits32", "--set", "topology=full", "--unset", "topology_args.k"]
    status, err = run_cli(capsys, *args, out=tmp_path)
    assert status == 2 and err.count("\n") == 1 and not os.listdir(tmp_path)
    assert "--unset topology_args.k: this job's topology_args has no key 'k' (it has degree)" in err

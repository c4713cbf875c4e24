"""The committed job folders are exactly what the generator writes from app_configs/."""

import json
import os
import re
import shutil

import pytest

from lightyear.jobs import generate, registry

from repo import ROOT

CONFIGS = os.path.join(ROOT, "app_configs")


def test_committed_jobs_match_generator():
    problems = generate.diff_committed(CONFIGS, os.path.join(ROOT, "jobs"))
    assert problems == [], "run `lightyear-jobs` to regenerate jobs/: " + ", ".join(problems)


def test_main_jobs_are_committed():
    for name in ("lightyear_digits", "fedavg_digits"):
        meta = json.load(open(os.path.join(ROOT, "jobs", name, "meta.json")))
        assert meta["deploy_map"]["app"] == ["server"] + [f"site-{k}" for k in range(1, 9)]


def test_faulty_sites_get_the_malfunction_p2p(tmp_path):
    name, files = generate.build_job(CONFIGS, "lightyear", "digits", "dynamic", 3)
    assert name == "lightyear_digits_dynamic3"
    meta = files["meta.json"]
    assert meta["deploy_map"]["app_faulty"] == ["site-6", "site-7", "site-8"]
    assert "site-6" not in meta["deploy_map"]["app"]
    faulty = files["app_faulty/config/config_fed_client.json"]
    assert faulty["executors"][0]["executor"]["args"]["malfunction_id"] == "malfunction"
    comp = [c for c in faulty["components"] if c["id"] == "malfunction"][0]
    assert comp["args"]["kind"] == "dynamic" and comp["args"]["num_classes"] == 10
    benign = files["app/config/config_fed_client.json"]
    assert "malfunction_id" not in benign["executors"][0]["executor"]["args"]


def test_faulty_sites_get_a_result_filter_star():
    _, files = generate.build_job(CONFIGS, "fedavg", "digits", "sfa", 2)
    faulty = files["app_faulty/config/config_fed_client.json"]
    filters = faulty["task_result_filters"]
    assert filters[0]["tasks"] == ["train"]
    assert filters[0]["filters"][0]["path"].endswith("MalfunctionFilter")


def test_placeholders_are_typed():
    _, files = generate.build_job(CONFIGS, "lightyear", "digits", overrides={"rounds": 3, "tau": 0.5})
    args = files["app/config/config_fed_client.json"]["executors"][0]["executor"]["args"]
    assert args["tau"] == 0.5 and isinstance(args["train_args"], dict)
    assert files["app/config/config_fed_server.json"]["workflows"][0]["args"]["rounds"] == 3


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"method": "nope", "dataset": "digits"}, "unknown method 'nope'"),
        ({"method": "lightyear", "dataset": "nope"}, "unknown dataset 'nope'"),
        ({"method": "lightyear", "dataset": "digits", "malfunction": "bad", "faulty": 1}, "unknown malfunction"),
        ({"method": "lightyear", "dataset": "digits", "malfunction": "sfa", "faulty": 9}, "between 0 and 8"),
        ({"method": "lightyear", "dataset": "digits", "overrides": {"tau": 2}}, r"tau must be a number in \[0, 1\]"),
        ({"method": "lightyear", "dataset": "digits", "overrides": {"rounds": 0}}, "rounds must be a positive integer"),
        (
            {"method": "fedavg", "dataset": "digits", "overrides": {"train_args": {"optimizer": "lbfgs"}}},
            "optimizer must be one of",
        ),
    ],
)
def test_bad_requests_name_the_problem(kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate.build_job(CONFIGS, **kwargs)


def test_cli_writes_a_job(tmp_path, capsys):
    rc = generate.main(
        [
            "--configs",
            CONFIGS,
            "--out",
            str(tmp_path),
            "--method",
            "fedavg",
            "--dataset",
            "digits",
            "--malfunction",
            "ana",
            "--faulty",
            "1",
            "--set",
            "rounds=2",
        ]
    )
    assert rc == 0
    server = json.load(open(tmp_path / "fedavg_digits_ana1" / "app" / "config" / "config_fed_server.json"))
    assert server["workflows"][0]["args"]["rounds"] == 2


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"model_args": {"widht": 3}}, "model_args"),
        ({"dataset_args": {"shift": 1}}, "dataset_args"),
        ({"model": "resnet50"}, "unknown model"),
        ({"train_args": {"momentum": 1.5}}, "momentum"),
        ({"train_args": {"loss_args": {"gama": 2.0}}}, "loss_args"),
        ({"train_args": {"device": "gpu0"}}, "device"),
        ({"peer_deadline": 0.1}, "peer_deadline"),
        ({"peer_deadline": 1800.0, "progress_timeout": 900.0}, "progress_timeout"),
        ({"topology": "ring", "topology_args": {"k": 3}}, "takes no arguments"),
        ({"topology": "k_regular", "topology_args": {"k": 9}}, "k"),
        ({"skill_floor": 1.2}, "skill_floor"),
        ({"transfer_dtype": "delta"}, "transfer_dtype must be one of"),
        ({"max_isolated_rounds": 0}, "max_isolated_rounds"),
        ({"resume_from": "/ckpt/{job_id}"}, "resume_from"),
        ({"resume_from": "{site:>200000000}"}, "resume_from may hold only the placeholder"),
    ],
)
def test_bad_settings_are_refused_when_the_job_is_generated(overrides, message):
    with pytest.raises(ValueError, match=message):
        generate.build_job(CONFIGS, "lightyear", "digits", overrides=overrides)


def test_a_sparse_random_topology_is_a_job_setting():
    _, files = generate.build_job(
        CONFIGS, "lightyear", "digits", overrides={"topology": "random", "topology_args": {"degree": 3}}
    )
    args = files["app/config/config_fed_server.json"]["workflows"][0]["args"]
    assert args["topology"] == "random" and args["topology_args"] == {"degree": 3}


STAR_METHODS = ["fedavg", "fedprox", "ditto", "krum", "afa", "asmr", "cfl", "fedcap"]


def test_every_star_method_has_a_committed_job_for_every_dataset():
    for method in STAR_METHODS:
        for dataset in generate.datasets(CONFIGS):
            meta = json.load(open(os.path.join(ROOT, "jobs", f"{method}_{dataset}", "meta.json")))
            assert meta["lightyear"]["topology"] == "star"


def test_method_defaults_reach_the_components_and_can_be_overridden():
    from lightyear.jobs.settings import component_class

    _, files = generate.build_job(CONFIGS, "fedcap", "shapes")
    server = files["app/config/config_fed_server.json"]["components"][0]
    assert server["args"] == {}  # no layer sets them: the constructor's defaults are the only ones
    built = component_class(server["path"])(**server["args"])
    assert (built.alpha, built.phi, built.t_norm) == (10.0, 0.1, 10.0)
    assert "lam" not in files["app/config/config_fed_client.json"]["executors"][0]["executor"]["args"]
    _, files = generate.build_job(CONFIGS, "fedcap", "digits")  # the method's value for one dataset
    assert files["app/config/config_fed_server.json"]["components"][0]["args"]["t_norm"] == 20.0
    _, files = generate.build_job(CONFIGS, "fedprox", "digits", overrides={"mu": 0.1})
    assert files["app/config/config_fed_client.json"]["executors"][0]["executor"]["args"]["mu"] == 0.1
    _, files = generate.build_job(CONFIGS, "krum", "digits", overrides={"f": 2, "m": 3})
    assert files["app/config/config_fed_server.json"]["components"][0]["args"] == {"f": 2, "m": 3}


@pytest.mark.parametrize(
    "method, overrides, message",
    [
        ("fedprox", {"mu": -0.1}, "mu"),
        ("ditto", {"lam": "big"}, "lam"),
        ("krum", {"f": 3}, r"n > 2f \+ 2"),  # 8 sites: f <= 2
        ("krum", {"m": 0}, "m "),
        ("afa", {"xi0": 0}, "xi0"),
        ("afa", {"block_threshold": 0.3}, "block_threshold"),
        ("asmr", {"min_gap": -1}, "min_gap"),
        ("fedcap", {"t_norm": 0}, "t_norm"),
        ("fedcap", {"phi": 2}, "phi"),
        ("fedavg", {"min_clients": 0}, "min_clients"),
    ],
)
def test_bad_method_settings_are_refused_when_the_job_is_generated(method, overrides, message):
    with pytest.raises(ValueError, match=message):
        generate.build_job(CONFIGS, method, "digits", overrides=overrides)


P2P_METHODS = ["lightyear", "p2p_fedavg", "balance", "scclip", "defta"]


def build_component(spec):
    import importlib

    module, _, name = spec["path"].rpartition(".")
    return getattr(importlib.import_module(module), name)(**spec.get("args", {}))


@pytest.mark.parametrize("method", P2P_METHODS)
def test_every_p2p_method_takes_a_topology_and_neighbour_sampling(method):
    overrides = {"topology": "random", "topology_args": {"degree": 3}, "sample_neighbours": 2}
    overrides.update({"transfer_dtype": "float16_delta", "max_isolated_rounds": 5, "resume_from": "/ckpt/{site}"})
    _, files = generate.build_job(CONFIGS, method, "digits", "sfa", 1, overrides=overrides)
    server = files["app/config/config_fed_server.json"]["workflows"][0]
    assert server["args"]["topology"] == "random" and server["args"]["topology_args"] == {"degree": 3}
    controller = build_component(server)
    assert controller.topology == "random"
    for app in ("app", "app_faulty"):
        executor = files[f"{app}/config/config_fed_client.json"]["executors"][0]["executor"]
        assert executor["args"]["sample_neighbours"] == 2
        site = build_component(executor)  # the configuration's arguments are the constructor's
        assert site.sample_neighbours == 2
        assert (site.transfer_dtype, site.max_isolated_rounds, site.resume_from) == ("float16_delta", 5, "/ckpt/{site}")


@pytest.mark.parametrize("method", ["balance", "scclip", "defta"])
def test_method_defaults_reach_the_executor(method):
    _, files = generate.build_job(CONFIGS, method, "digits")
    from lightyear.jobs.settings import placeholders

    _, template = generate.method_templates(registry.method(method))
    assert {
        p for p in placeholders(template) if p.startswith(method + "_")
    }  # every method here has settings of its own
    args = files["app/config/config_fed_client.json"]["executors"][0]["executor"]["args"]
    site = build_component(files["app/config/config_fed_client.json"]["executors"][0]["executor"])
    for key, value in args.items():
        if key in ("dataset", "dataset_args", "data_root", "model", "model_args", "train_args"):
            continue
        assert getattr(site, key) == value, key


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"topology": "k_regular", "topology_args": {"k": 1}}, "never connected"),
        (
            {
                "topology": "k_regular",
                "topology_args": {"k": 3},
                "sites": ["site-1", "site-2", "site-3", "site-4", "site-5"],
            },
            "n \\* k must be even",
        ),
        ({"topology": "random", "topology_args": {"degree": 0.5}}, "1 <= degree"),
        ({"topology": "ring", "topology_args": {"k": 2}}, "takes no arguments"),
        ({"topology": "star"}, "topology must be one of full, ring"),
        ({"topology": "random", "topology_args": [3]}, "topology_args must be a JSON object"),
    ],
)
@pytest.mark.parametrize("method", P2P_METHODS)
def test_a_topology_that_cannot_connect_the_sites_is_refused(method, overrides, message):
    with pytest.raises(ValueError, match=message):
        generate.build_job(CONFIGS, method, "digits", overrides=overrides)


GPU_DATASETS = {"camelyon17": 2, "isic19": 4, "ultrasound": 1, "xray": 1}


@pytest.mark.parametrize("dataset", sorted(generate.datasets(CONFIGS)))
def test_gpu_datasets_ask_one_gpu_per_site_and_none_for_the_server(dataset):
    from nvflare.private.fed.server.job_meta_validator import JobMetaValidator
    from nvflare.utils.job_launcher_utils import get_resource_manager_spec

    _, files = generate.build_job(CONFIGS, "fedavg", dataset)
    meta = files["meta.json"]
    JobMetaValidator._validate_resource(meta["name"], meta)  # FLARE accepts the spec
    sites = [s for s in meta["deploy_map"]["app"] if s != "server"]
    if dataset in GPU_DATASETS:
        for site in sites:  # what FLARE's scheduler asks each site's resource manager
            assert get_resource_manager_spec(meta, site) == {
                "num_of_gpus": 1,
                "mem_per_gpu_in_GiB": GPU_DATASETS[dataset],
            }
        assert get_resource_manager_spec(meta, "server") == {}
    else:
        assert meta["resource_spec"] == {}


def test_a_gpu_job_can_be_generated_for_cpu_and_a_bad_spec_is_refused():
    _, files = generate.build_job(CONFIGS, "lightyear", "isic19", overrides={"site_resource_spec": None})
    assert files["meta.json"]["resource_spec"] == {}
    with pytest.raises(ValueError, match="num_of_gpus must be an integer"):
        generate.build_job(CONFIGS, "lightyear", "isic19", overrides={"site_resource_spec": {"num_of_gpus": "1"}})
    with pytest.raises(ValueError, match="mem_per_gpu_in_GiB must be a number"):
        generate.build_job(
            CONFIGS,
            "lightyear",
            "isic19",
            overrides={"site_resource_spec": {"num_of_gpus": 1, "mem_per_gpu_in_GiB": -2}},
        )


# lightyear-jobs on the command line: every bad input is one line, exit status 2, nothing written


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


SETTING_VALUES = ([1], "x", {"a": 1}, None, True, -1, 1e308, float("nan"), 2**70)


@pytest.mark.parametrize("method", ["lightyear", "fedavg", "defta", "fedcap"])
def test_a_setting_of_any_json_type_is_taken_or_refused_never_a_crash(method):
    from lightyear.jobs.settings import known_settings

    templates = list(generate.method_templates(registry.method(method)))
    nested = [{"train_args": {"lr": v}} for v in SETTING_VALUES] + [
        {"topology_args": {"degree": v}, "topology": "random"} for v in SETTING_VALUES
    ]
    cases = [{key: value} for key in sorted(known_settings(templates, True)) for value in SETTING_VALUES] + nested
    for overrides in cases:
        try:
            generate.build_job(CONFIGS, method, "digits", "ana", 1, overrides=overrides)
        except generate.SettingError:
            pass

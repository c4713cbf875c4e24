"""The committed job folders are exactly what the generator writes from app_configs/."""

import json
import os

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
    from lightyear.jobs.settings import known_settings

    templates = list(generate.method_templates(registry.method(method)))
    assert {
        s for s in known_settings(templates, False) if s.startswith(method + "_")
    }  # every method here has settings of its own, named by its class's SETTING_NAMES
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

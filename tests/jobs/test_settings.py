"""One settings path: a job is checked by building its components as FLARE will, every default lives
in its constructor, and a ``--set`` key the job does not use is refused."""

import json
import os

import pytest

from lightyear.jobs import generate
from lightyear.jobs.settings import component_class, fill, layered_settings, toolkit_components

from repo import ROOT

CONFIGS = os.path.join(ROOT, "app_configs")

# one bad setting of every method, and the component argument it reaches
BAD_SETTING = {
    "fedavg": ("min_clients", 0, "min_clients"),
    "fedprox": ("mu", -1, "mu"),
    "ditto": ("lam", -1, "lam"),
    "krum": ("m", 0, "m"),
    "afa": ("xi0", -1, "xi0"),
    "asmr": ("min_gap", -1, "min_gap"),
    "cfl": ("min_clients", 0, "min_clients"),
    "fedcap": ("phi", -1, "phi"),
    "local": ("max_abs_weight", -1, "max_abs_weight"),
    "lightyear": ("gamma", 0, "gamma"),
    "lightyear_paper": ("max_peer_share", 0, "max_peer_share"),
    "p2p_fedavg": ("sample_neighbours", 0, "sample_neighbours"),
    "balance": ("balance_kappa", -1, "kappa"),
    "scclip": ("scclip_remove", 1.5, "remove"),
    "defta": ("defta_positive_slope", 2, "positive_slope"),
}


def test_every_method_has_a_bad_setting_case():
    assert set(BAD_SETTING) == set(generate.methods())


@pytest.mark.parametrize("method", sorted(BAD_SETTING))
def test_a_bad_setting_is_refused_when_generated_with_the_components_message(method):
    setting, value, argument = BAD_SETTING[method]
    with pytest.raises(ValueError) as generated:
        generate.build_job(CONFIGS, method, "digits", overrides={setting: value})
    _, files = generate.build_job(CONFIGS, method, "digits")
    owners = [c for f in files.values() for c in toolkit_components(f) if argument in _arguments(c["path"])]
    assert owners, f"no component of {method} takes {argument}"
    with pytest.raises(ValueError) as on_site:
        component_class(owners[0]["path"])(**{**owners[0].get("args", {}), argument: value})
    assert str(generated.value) == str(on_site.value)


def _arguments(path):
    from lightyear.jobs.settings import constructor_arguments

    return constructor_arguments(component_class(path))


def test_a_misspelt_setting_is_refused_naming_the_nearest():
    with pytest.raises(ValueError, match="no setting 'tua'; did you mean 'tau'"):
        generate.build_job(CONFIGS, "lightyear", "digits", overrides={"tua": 0.9})
    with pytest.raises(ValueError, match="no setting 'transfer_dtype'"):  # a star job sends no peer payloads
        generate.build_job(CONFIGS, "fedavg", "digits", overrides={"transfer_dtype": "float16"})
    with pytest.raises(ValueError, match="--seed N"):
        generate.build_job(CONFIGS, "lightyear", "digits", overrides={"seed": 5})


def test_main_refuses_an_unknown_key_with_exit_status_2(tmp_path, capsys):
    assert (
        generate.main(["--method", "lightyear", "--dataset", "digits", "--set", "tua=0.9", "--out", str(tmp_path)]) == 2
    )
    err = capsys.readouterr().err
    assert "did you mean 'tau'" in err and err.count("\n") == 1
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--set", "tau=0.5", "--set", "tau=0.9"], "--set tau is given twice: give each setting once"),
        (["--set", "train_args=null"], "train_args=null would drop the dataset's train_args"),
        (["--set", "rounds=" + "9" * 5000], "--set rounds: a number of 5000 characters is out of range"),
        (
            ["--attack", "mr", "--attackers", "0", "--set", "attack_scale=3"],
            "--set attack_scale does nothing in a job with --attackers 0",
        ),
        (
            ["--attack", "mr", "--attackers", "2", "--set", "attack_scale=" + "9" * 30],
            "attack_scale: the whole number 1e+30 is out of range",
        ),
    ],
)
def test_a_setting_that_would_be_dropped_or_overflow_is_refused(argv, message, tmp_path, capsys):
    assert generate.main(["--method", "lightyear", "--dataset", "digits", "--out", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lightyear-jobs: error: ") and message in err and err.count("\n") == 1, err
    assert not os.listdir(tmp_path)


def test_train_args_given_change_only_their_keys():
    _, files = generate.build_job(CONFIGS, "lightyear", "digits", overrides={"train_args": {"lr": 0.001}})
    train = files["app/config/config_fed_client.json"]["executors"][0]["executor"]["args"]["train_args"]
    dataset = json.load(open(os.path.join(CONFIGS, "datasets", "digits.json")))["train_args"]
    assert train == {**dataset, "lr": 0.001}


def test_a_constructor_argument_no_template_names_reaches_its_component():
    _, files = generate.build_job(
        CONFIGS, "lightyear", "digits", overrides={"max_abs_weight": 1000.0, "compute_slots": 2}
    )
    args = files["app/config/config_fed_client.json"]["executors"][0]["executor"]["args"]
    assert (args["max_abs_weight"], args["compute_slots"]) == (1000.0, 2)
    with pytest.raises(ValueError, match="records_file"):
        generate.build_job(CONFIGS, "lightyear", "digits", overrides={"records_file": "../../x.csv"})


@pytest.mark.parametrize(
    "sites, message",
    [
        ([], "needs two sites"),
        (["site-1"], "needs two sites"),
        (["../evil", "site-2"], "not allowed"),
        (["a", None], "sites must be a JSON list of strings"),
        (5, "sites must be a JSON list of strings"),
        (["server", "site-2"], "not 'server'"),
        (["site-1", "site-1"], "more than once"),
    ],
)
def test_bad_site_lists_are_refused(sites, message):
    with pytest.raises(ValueError, match=message):
        generate.build_job(CONFIGS, "lightyear", "digits", overrides={"sites": sites})


def test_a_star_job_may_have_one_site():
    _, files = generate.build_job(CONFIGS, "fedavg", "digits", overrides={"sites": ["site-1"]})
    assert files["meta.json"]["min_clients"] == 1


def test_method_values_for_a_task_and_a_dataset_come_from_the_methods_declaration():
    from lightyear.jobs import registry

    lightyear = registry.method("lightyear").layers
    shapes = json.load(open(os.path.join(CONFIGS, "datasets", "shapes.json")))
    settings = layered_settings(lightyear, "shapes", shapes, {})
    assert (settings["tau"], settings["skill_floor"]) == (0.6, 0.0)  # segmentation, the paper's tau
    assert layered_settings(lightyear, "shapes", shapes, {"tau": 0.7})["tau"] == 0.7  # --set wins
    for name in generate.datasets(CONFIGS):  # no dataset carries a method's settings
        dataset = json.load(open(os.path.join(CONFIGS, "datasets", f"{name}.json")))
        assert not {"tau", "gamma", "third_term", "skill_floor", "t_norm", "mu", "lam"} & set(dataset), name


def test_an_argument_no_layer_sets_is_left_to_the_constructor():
    template = {"args": {"tau": "${tau}", "rounds": "${rounds}"}, "list": ["${rounds}"]}
    assert fill(template, {"rounds": 3}) == {"args": {"rounds": 3}, "list": [3]}
    with pytest.raises(KeyError, match="rounds"):
        fill(template, {})

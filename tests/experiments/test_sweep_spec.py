"""Sweep descriptions expand into the expected, stably named runs; bad ones are refused with a fix."""

import json
import os

import pytest

from lightyear.experiments.sweep_spec import SpecError, expand, read_spec, run_name
from lightyear.jobs import generate

from repo import ROOT

CONFIGS = os.path.join(ROOT, "app_configs")


def spec(**raw):
    base = {
        "datasets": ["digits"],
        "methods": ["lightyear", "fedavg"],
        "malfunctions": ["sfa", "dynamic"],
        "faulty": [0, 1, 3],
        "seeds": [0, 1],
    }
    base.update(raw)
    return expand({k: v for k, v in base.items() if v is not None}, CONFIGS, "test")


def test_counts_and_names():
    s = spec()
    # per method and seed: one clean run + 2 kinds x 2 counts
    assert len(s.runs) == 2 * 2 * (1 + 2 * 2)
    names = [r.name for r in s.runs]
    assert len(set(names)) == len(names)
    assert names[:6] == [
        "lightyear_digits_clean_s0",
        "lightyear_digits_clean_s1",
        "lightyear_digits_sfa1_s0",
        "lightyear_digits_sfa1_s1",
        "lightyear_digits_sfa3_s0",
        "lightyear_digits_sfa3_s1",
    ]
    assert "fedavg_digits_dynamic3_s1" in names
    clean = [r for r in s.runs if r.faulty == 0]
    assert {r.malfunction for r in clean} == {"none"} and len(clean) == 4
    run = next(r for r in s.runs if r.name == "fedavg_digits_dynamic3_s1")
    assert (run.method, run.dataset, run.malfunction, run.faulty, run.seed, run.sites, run.rounds) == (
        "fedavg",
        "digits",
        "dynamic",
        3,
        1,
        8,
        12,
    )


def test_names_are_stable():
    assert run_name("p2p_fedavg", "femnist", "ana", 7, 3) == "p2p_fedavg_femnist_ana7_s3"
    assert run_name("lightyear", "digits", "none", 0, 0) == "lightyear_digits_clean_s0"
    assert [r.name for r in spec().runs] == [r.name for r in spec().runs]


def test_overrides_reach_every_run_and_the_site_count():
    s = spec(set={"sites": ["site-1", "site-2", "site-3"], "rounds": 2}, faulty=[1, 2])
    assert {r.sites for r in s.runs} == {3} and {r.rounds for r in s.runs} == {2}
    assert all(r.overrides == {"sites": ["site-1", "site-2", "site-3"], "rounds": 2} for r in s.runs)


def test_unset_drops_a_dict_settings_key_in_every_run_as_lightyear_jobs_does():
    from lightyear.experiments.runner import job_files

    s = spec(
        datasets=["digits32"],
        methods=["lightyear"],
        faulty=[0],
        seeds=[0],
        malfunctions=None,
        set={"topology": "full"},
        unset=["topology_args.degree"],
    )
    assert [r.unset for r in s.runs] == [["topology_args.degree"]] and s.as_dict()["unset"] == ["topology_args.degree"]
    args = job_files(s.runs[0], CONFIGS)["app/config/config_fed_server.json"]["workflows"][0]["args"]
    assert (args["topology"], args["topology_args"]) == ("full", {})
    with pytest.raises(SpecError, match="'unset': --unset takes KEY or KEY.SUB"):
        spec(unset=["topology_args.degree.x"])
    with pytest.raises(SpecError, match="'unset' must be a list"):
        spec(unset="topology_args.degree")


def test_all_means_every_folder_of_app_configs():
    s = spec(methods="all", datasets="all", faulty=[0], malfunctions=None)
    assert s.methods == generate.methods() and s.datasets == generate.datasets(CONFIGS)
    assert len(s.runs) == len(s.methods) * len(s.datasets) * 2


def test_clean_only_needs_no_malfunctions():
    s = spec(faulty=[0], malfunctions=None, seeds=[5])
    assert [r.name for r in s.runs] == ["lightyear_digits_clean_s5", "fedavg_digits_clean_s5"]


def test_repeats_are_dropped():
    s = spec(methods=["lightyear", "lightyear"], faulty=[1, 1], malfunctions=["sfa"], seeds=[0])
    assert [r.name for r in s.runs] == ["lightyear_digits_sfa1_s0"]


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"methods": ["lightyaer"]}, "unknown methods lightyaer: app_configs has"),
        ({"datasets": ["mnist"]}, "unknown datasets mnist: app_configs/datasets has"),
        ({"malfunctions": ["flip"]}, "unknown malfunctions flip; choose from ana, ana_relative, sfa, random, dynamic"),
        ({"malfunctions": ["none"]}, "put 0 in 'faulty' for clean runs"),
        ({"faulty": [8]}, "use at most 7"),
        (
            {"faulty": [3], "set": {"sites": ["site-1", "site-2", "site-3"]}},
            "leaves no benign site among the 3 sites of digits: use at most 2",
        ),
        ({"faulty": [-1]}, "'faulty' must be whole numbers >= 0"),
        ({"faulty": None}, "needs 'faulty'"),
        ({"malfunctions": None}, "needs 'malfunctions'"),
        ({"seeds": ["a"]}, "'seeds' must be whole numbers"),
        ({"seeds": [4294967296]}, "'seeds' must be whole numbers in 0..4294967295; got 4294967296"),
        ({"seeds": [10**23]}, "'seeds' must be whole numbers in 0..4294967295"),
        ({"set": {"seed": 3}}, "seeds: [...]"),
        ({"set": [1]}, "'set' must be a mapping"),
        ({"rounds": 2}, "unknown key(s) rounds in the sweep description; allowed:"),
        ({"name": "a b"}, "sweep name 'a b'"),
        ({"methods": []}, "'methods' is empty"),
    ],
)
def test_validation_names_the_fix(raw, message):
    with pytest.raises(SpecError) as err:
        spec(**raw)
    assert message in str(err.value)


def test_load_yaml_and_json(tmp_path):
    (tmp_path / "s.yaml").write_text(
        "datasets: [digits]\nmethods: [lightyear]\nmalfunctions: [ana]\nfaulty: [2]\nseeds: [4]\nset: {rounds: 3}\n"
    )
    s = expand(read_spec(str(tmp_path / "s.yaml")), CONFIGS, "s")
    assert s.name == "s" and [r.name for r in s.runs] == ["lightyear_digits_ana2_s4"] and s.runs[0].rounds == 3
    (tmp_path / "t.json").write_text(
        json.dumps({"name": "mine", "datasets": "digits", "methods": "fedavg", "faulty": 0})
    )
    s = expand(read_spec(str(tmp_path / "t.json")), CONFIGS, "t")
    assert s.name == "mine" and [r.name for r in s.runs] == ["fedavg_digits_clean_s0"]
    (tmp_path / "bad.yaml").write_text("datasets: [digits\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        expand(read_spec(str(tmp_path / "bad.yaml")), CONFIGS, "bad")
    with pytest.raises(SpecError, match="no sweep description"):
        read_spec(str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("dup.yaml", "datasets: [digits]\nseeds: [0, 1, 2]\nseeds: [0]\n", "gives the key 'seeds' twice"),
        ("dup.json", '{"datasets": "digits", "seeds": [0, 1], "seeds": [0]}', "gives the key 'seeds' twice"),
        ("on.yaml", "on: 3\ndatasets: [digits]\n", "the key True in the top level is not a string"),
        ("key.yaml", "datasets: [digits]\nset: {2: 3}\n", "the key 2 in 'set' is not a string"),
        (
            "date.yaml",
            "datasets: [digits]\nset: {data_root: 2020-01-01}\n",
            "'set.data_root' holds '2020-01-01', a date",
        ),
        ("set.yaml", "datasets: !!set {digits}\n", "'datasets' holds \"{'digits'}\", set"),
        ("self.yaml", "datasets: &a [*a]\n", "holds itself"),
        ("nan.yaml", "datasets: [digits]\nseeds: [.nan]\n", "'seeds[0]' is nan"),
        ("big.json", '{"seeds": [' + "9" * 5001 + "]}", "holds a value that cannot be read (Exceeds the limit"),
    ],
)
def test_a_description_json_cannot_hold_is_refused_with_its_place(tmp_path, name, text, message):
    # PyYAML keeps the last of two equal keys and builds dates, sets and non-string keys; json.loads keeps
    # the last key too: each would reach the sweep as something the description did not say (or a traceback)
    (tmp_path / name).write_text(text)
    with pytest.raises(SpecError) as info:
        read_spec(str(tmp_path / name))
    assert message in str(info.value)


def test_shipped_sweeps_expand_and_do_not_confuse_the_generator():
    folder = os.path.join(CONFIGS, "sweeps")
    for name in os.listdir(folder):
        s = expand(read_spec(os.path.join(folder, name)), CONFIGS, name)
        assert s.runs
    assert "sweeps" not in generate.methods() and "sweeps" not in generate.datasets(CONFIGS)
    s = expand(read_spec(os.path.join(folder, "digits_dynamic.yaml")), CONFIGS, "digits_dynamic")
    assert s.methods == generate.methods() and s.faulty == [0, 1, 3, 5, 7]
    assert len(s.runs) == len(s.methods) * 5


def attack_spec(**raw):
    base = {
        "datasets": ["digits"],
        "methods": ["lightyear", "fedavg"],
        "attacks": ["sf", "lie"],
        "attackers": [0, 3],
        "seeds": [0],
    }
    base.update(raw)
    return expand({k: v for k, v in base.items() if v is not None}, CONFIGS, "test")


def test_the_attack_axis_names_runs_by_attack_and_needs_no_faulty():
    s = attack_spec(knowledge=["partial", "full"], set={"rounds": 2, "attack_z": 1.0})
    # per method: clean, sf3 (partial only: sf uses the attacker's own update), lie3, lie3_full
    assert [r.name for r in s.runs] == [
        "lightyear_digits_clean_s0",
        "lightyear_digits_sf3_s0",
        "lightyear_digits_lie3_s0",
        "lightyear_digits_lie3_full_s0",
        "fedavg_digits_clean_s0",
        "fedavg_digits_sf3_s0",
        "fedavg_digits_lie3_s0",
        "fedavg_digits_lie3_full_s0",
    ]
    run = next(r for r in s.runs if r.name == "fedavg_digits_lie3_full_s0")
    assert (run.malfunction, run.faulty, run.attack, run.attackers, run.knowledge) == ("none", 0, "lie", 3, "full")
    # an attack's setting reaches only the runs whose attack takes it
    assert run.overrides == {"rounds": 2, "attack_z": 1.0}
    assert next(r for r in s.runs if r.name == "fedavg_digits_sf3_s0").overrides == {"rounds": 2}
    assert next(r for r in s.runs if r.name == "fedavg_digits_clean_s0").overrides == {"rounds": 2}
    assert s.as_dict()["attacks"] == ["sf", "lie"] and s.as_dict()["knowledge"] == ["partial", "full"]
    assert run_name("krum", "digits", "none", 0, 1, "ipm", 2, "full") == "krum_digits_ipm2_full_s1"


def test_malfunctions_and_attacks_in_one_sweep_share_the_clean_run():
    s = attack_spec(methods=["krum"], malfunctions=["sfa"], faulty=[0, 1], attacks=["mr"], attackers=[0, 2])
    assert [r.name for r in s.runs] == ["krum_digits_clean_s0", "krum_digits_sfa1_s0", "krum_digits_mr2_s0"]


def test_adaptive_runs_only_where_the_generator_takes_them():
    s = attack_spec(
        methods=["lightyear", "fedavg", "krum", "fedcap"],
        attacks="all",
        attackers=[1, 3],
        knowledge=["partial", "full"],
        set={"attack_margin": 0.05, "attack_tol": 0.1, "attack_max_evaluations": 8},
    )
    adaptive = [r.name for r in s.runs if r.attack == "adaptive"]
    assert adaptive == [
        "lightyear_digits_adaptive1_s0",
        "lightyear_digits_adaptive1_full_s0",
        "lightyear_digits_adaptive3_s0",
        "lightyear_digits_adaptive3_full_s0",
        # Krum under partial knowledge needs 2 attackers; FedCAP's attack needs full knowledge
        "krum_digits_adaptive1_full_s0",
        "krum_digits_adaptive3_s0",
        "krum_digits_adaptive3_full_s0",
        "fedcap_digits_adaptive1_full_s0",
        "fedcap_digits_adaptive3_full_s0",
    ]
    assert not [r for r in s.runs if r.method == "fedavg" and r.attack == "adaptive"]
    # each run gets the adaptive settings its method's attack takes: margin for FedCAP, tol for Krum, the
    # search's budget for LIGHTYEAR and Krum
    settings = {r.method: {k for k in r.overrides if k.startswith("attack_")} for r in s.runs if r.attack == "adaptive"}
    assert settings == {
        "lightyear": {"attack_max_evaluations"},
        "krum": {"attack_tol", "attack_max_evaluations"},
        "fedcap": {"attack_margin"},
    }


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"attacks": ["poison"]}, "unknown attacks poison; choose from lf, sf, mr, lie, minmax, minsum, ipm, adaptive"),
        ({"knowledge": ["some"]}, "unknown knowledge some; choose from partial, full"),
        ({"attackers": [8]}, "attackers count 8 leaves no benign site among the 8 sites of digits: use at most 7"),
        ({"attackers": None}, "'attacks' and 'knowledge' need 'attackers'"),
        ({"attacks": None}, "needs 'attacks'"),
        (
            {"methods": ["fedavg", "scclip"], "attacks": ["adaptive"]},
            "attack adaptive has no run: the adaptive attack adapts only to lightyear, lightyear_paper, balance, krum, "
            "fedcap, not fedavg; ",
        ),
        ({"methods": ["fedcap"], "attacks": ["adaptive"]}, "partial knowledge does not hold; use --knowledge full"),
        ({"methods": ["krum"], "attacks": ["adaptive"], "attackers": [1]}, "needs at least 2 attackers"),
        ({"attacks": ["bogus"], "attackers": [0]}, "unknown attacks bogus"),
        ({"malfunctions": ["bogus"]}, "unknown malfunctions bogus"),
        ({"set": {"attack_scale": 2}}, "'set: attack_scale' is a setting of no attack of the sweep (sf, lie)"),
    ],
)
def test_attack_axis_validation_names_the_fix(raw, message):
    with pytest.raises(SpecError) as err:
        attack_spec(**raw)
    assert message in str(err.value)


def test_the_shipped_attack_sweeps():
    folder = os.path.join(CONFIGS, "sweeps")
    s = expand(read_spec(os.path.join(folder, "digits_attacks.yaml")), CONFIGS, "digits_attacks")
    assert len(s.methods) == 13 and s.attacks == ["lf", "sf", "mr", "lie", "minmax", "minsum", "ipm"]
    assert (
        len(s.runs) == 13 * 8
        and {r.attackers for r in s.runs} == {0, 3}
        and {r.knowledge for r in s.runs} == {None, "partial"}
    )
    s = expand(read_spec(os.path.join(folder, "digits_adaptive.yaml")), CONFIGS, "digits_adaptive")
    assert [r.name for r in s.runs if r.method == "krum"] == [
        "krum_digits_clean_s0",
        "krum_digits_adaptive1_full_s0",
        "krum_digits_adaptive3_full_s0",
        "krum_digits_adaptive5_full_s0",
    ]
    assert [r.name for r in s.runs if r.method == "fedcap"] == [
        "fedcap_digits_clean_s0",
        "fedcap_digits_adaptive1_full_s0",
        "fedcap_digits_adaptive3_full_s0",
        "fedcap_digits_adaptive5_full_s0",
    ]
    assert len(s.runs) == 16


def test_a_merge_key_brings_in_values_the_mapping_may_override(tmp_path):
    (tmp_path / "m.yaml").write_text(
        "base: &base {rounds: 3, sites: [site-1, site-2]}\ndatasets: [digits]\nmethods: [fedavg]\n"
        "set:\n  <<: *base\n  rounds: 5\n"
    )
    raw = read_spec(str(tmp_path / "m.yaml"))
    assert raw["set"] == {"rounds": 5, "sites": ["site-1", "site-2"]}

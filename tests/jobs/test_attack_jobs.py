"""Attack jobs (``--attack KIND --attackers K --knowledge LEVEL``): the configurations the attack
components read, meta.json, and every refusal before anything is written."""

import json
import os

import pytest

from lightyear.jobs import attacks, folders, generate, job_api
from lightyear.jobs.flare_job import GeneratedRecipe

from repo import ROOT

CONFIGS = os.path.join(ROOT, "app_configs")
CLIENT, FAULTY, SERVER = (
    "app/config/config_fed_client.json",
    "app_faulty/config/config_fed_client.json",
    "app/config/config_fed_server.json",
)
ATTACKERS = ["site-6", "site-7", "site-8"]


def components(config, cid):
    return [c for c in config.get("components", []) if c["id"] == cid]


def test_a_peer_to_peer_attack_adds_the_attacker_to_the_attackers_app_only():
    name, files = generate.build_job(
        CONFIGS,
        "lightyear",
        "digits",
        attack="minmax",
        attackers=3,
        seed=5,
        overrides={"attack_perturbation": "sign", "rounds": 3},
    )
    _, clean = generate.build_job(CONFIGS, "lightyear", "digits", seed=5, overrides={"rounds": 3})
    assert name == "lightyear_digits_minmax3"
    meta = files["meta.json"]
    assert meta["deploy_map"] == {"app": ["server"] + [f"site-{k}" for k in range(1, 6)], "app_faulty": ATTACKERS}
    assert meta["lightyear"] == {
        "method": "lightyear",
        "dataset": "digits",
        "topology": "p2p",
        "malfunction": "none",
        "faulty_sites": ATTACKERS,
        "seed": 5,
        "attack": "minmax",
        "knowledge": "partial",
        "attack_params": {"perturbation": "sign"},
    }
    faulty = files[FAULTY]
    [attacker] = components(faulty, "attack")
    assert attacker["path"] == "lightyear.p2p.attack.attacker.PeerAttacker"
    assert attacker["args"] == {
        "kind": "minmax",
        "knowledge": "partial",
        "attackers": ATTACKERS,
        "params": {"perturbation": "sign"},
        "seed": 5,
    }
    assert faulty["executors"][0]["executor"]["args"]["attack_id"] == "attack"
    assert "flip_labels" not in faulty["executors"][0]["executor"]["args"]
    # the benign sites' app and the server are those of the clean job
    assert files[CLIENT] == clean[CLIENT] and files[SERVER] == clean[SERVER]
    # the attacker's app is the benign one plus the attack
    faulty["components"].remove(attacker)
    del faulty["executors"][0]["executor"]["args"]["attack_id"]
    assert faulty == clean[CLIENT]


def test_a_star_attack_puts_the_adversary_on_the_server_and_the_attackers_run_the_benign_app():
    name, files = generate.build_job(
        CONFIGS, "krum", "digits", attack="lie", attackers=3, knowledge="full", overrides={"attack_z": 1.5}
    )
    _, clean = generate.build_job(CONFIGS, "krum", "digits")
    assert name == "krum_digits_lie3_full"
    assert FAULTY not in files
    assert files["meta.json"]["deploy_map"] == {"app": ["server"] + [f"site-{k}" for k in range(1, 9)]}
    info = files["meta.json"]["lightyear"]
    assert (info["faulty_sites"], info["malfunction"], info["attack"], info["knowledge"], info["attack_params"]) == (
        ATTACKERS,
        "none",
        "lie",
        "full",
        {"z": 1.5},
    )
    server = files[SERVER]
    [adversary] = components(server, "adversary")
    assert adversary["path"] == "lightyear.star.adversary.SimulatedAdversary"
    assert adversary["args"] == {
        "kind": "lie",
        "knowledge": "full",
        "attackers": ATTACKERS,
        "params": {"z": 1.5},
        "seed": 0,
    }
    assert server["workflows"][0]["path"] == "lightyear.star.controller.StarController"
    assert server["workflows"][0]["args"]["adversary_id"] == "adversary"
    assert files[CLIENT] == clean[CLIENT]


@pytest.mark.parametrize("method, dataset", [("balance", "digits"), ("fedprox", "digits"), ("lightyear", "shapes")])
def test_label_flipping_only_tells_the_attackers_executor_to_flip(method, dataset):
    name, files = generate.build_job(CONFIGS, method, dataset, attack="lf", attackers=2)
    _, clean = generate.build_job(CONFIGS, method, dataset)
    assert name == f"{method}_{dataset}_lf2"
    sites = files["meta.json"]["lightyear"]["faulty_sites"]
    assert files["meta.json"]["deploy_map"]["app_faulty"] == sites and len(sites) == 2
    faulty = files[FAULTY]
    assert [e["executor"]["args"]["flip_labels"] for e in faulty["executors"]] == [True]
    del faulty["executors"][0]["executor"]["args"]["flip_labels"]
    assert faulty == clean[CLIENT] and files[SERVER] == clean[SERVER]
    assert files["meta.json"]["lightyear"]["attack_params"] == {}


def test_no_attackers_is_the_clean_job():
    assert generate.build_job(CONFIGS, "krum", "digits", attack="adaptive", attackers=0) == generate.build_job(
        CONFIGS, "krum", "digits"
    )


def test_adaptive_against_the_methods_it_adapts_to():
    for method in ("lightyear", "lightyear_paper", "balance"):
        name, files = generate.build_job(
            CONFIGS, method, "digits", attack="adaptive", attackers=1, overrides={"attack_max_evaluations": 8}
        )
        assert name == f"{method}_digits_adaptive1"
        assert files["meta.json"]["lightyear"]["attack_params"] == {"max_evaluations": 8}
    with pytest.raises(
        generate.SettingError, match="the adaptive attack on lightyear takes no attack_margin; it takes attack_max_step"
    ):
        generate.build_job(
            CONFIGS, "lightyear", "digits", attack="adaptive", attackers=1, overrides={"attack_margin": 0.05}
        )
    name, files = generate.build_job(
        CONFIGS,
        "krum",
        "digits",
        attack="adaptive",
        attackers=1,
        knowledge="full",
        overrides={"attack_direction": "sign"},
    )
    assert name == "krum_digits_adaptive1_full"
    assert files["meta.json"]["lightyear"]["attack_params"] == {"direction": "sign"}
    name, files = generate.build_job(
        CONFIGS, "fedcap", "digits", attack="adaptive", attackers=3, knowledge="full", overrides={"attack_margin": 0.05}
    )
    assert name == "fedcap_digits_adaptive3_full"
    adversary = next(c for c in files["app/config/config_fed_server.json"]["components"] if c["id"] == "adversary")
    assert adversary["args"]["params"] == {"margin": 0.05} and adversary["args"]["attackers"] == [
        "site-6",
        "site-7",
        "site-8",
    ]


@pytest.mark.parametrize(
    "method, kwargs, message",
    [
        (
            "lightyear",
            {"attack": "poison", "attackers": 1},
            r"unknown attack 'poison'; choose one of lf, sf, mr, lie, minmax, minsum, ipm, adaptive",
        ),
        (
            "lightyear",
            {"attack": "sf", "attackers": 1, "malfunction": "sfa"},
            "--attack cannot go with --malfunction or --faulty",
        ),
        ("fedavg", {"attack": "sf", "attackers": 1, "faulty": 2}, "--attack cannot go with --malfunction or --faulty"),
        ("lightyear", {"attack": "sf", "attackers": 8}, r"--attackers must be between 0 and 7 .* got 8"),
        ("fedavg", {"attack": "sf", "attackers": -1}, r"--attackers must be between 0 and 7 .* got -1"),
        ("lightyear", {"attackers": 2}, r"--attackers needs --attack \(lf, sf,"),
        ("lightyear", {"knowledge": "full"}, "--knowledge needs --attack"),
        ("lightyear", {"overrides": {"attack_scale": 3}}, "--set attack_scale needs --attack"),
        (
            "lightyear",
            {"attack": "lie", "attackers": 1, "knowledge": "all"},
            "unknown knowledge 'all'; choose one of partial, full",
        ),
        (
            "lightyear",
            {"attack": "mr", "attackers": 1, "overrides": {"attack_scale": "big"}},
            "attack_scale must be a finite number > 0, got 'big'",
        ),
        (
            "krum",
            {"attack": "sf", "attackers": 1, "overrides": {"attack_z": 1.0}},
            "attack 'sf' takes no setting attack_z; it takes none",
        ),
        (
            "krum",
            {"attack": "minsum", "attackers": 1, "overrides": {"attack_perturbation": "gauss"}},
            "attack_perturbation must be one of std, unit, sign",
        ),
        (
            "fedavg",
            {"attack": "adaptive", "attackers": 1},
            "choose --method lightyear, lightyear_paper, balance, krum, fedcap",
        ),
        (
            "scclip",
            {"attack": "adaptive", "attackers": 1},
            "choose --method lightyear, lightyear_paper, balance, krum, fedcap",
        ),
        ("lightyear", {"attack": "sf", "attackers": 1, "knowledge": "full"}, "--knowledge full changes nothing for sf"),
        # what the server-side simulation cannot run is refused at generation, in the adversary's words
        (
            "krum",
            {"attack": "adaptive", "attackers": 1},
            "needs at least 2 attackers; use --knowledge full or more attackers",
        ),
        (
            "krum",
            {"attack": "adaptive", "attackers": 3, "overrides": {"attack_margin": 0.1}},
            "the adaptive attack on krum takes no attack_margin; it takes attack_direction",
        ),
        (
            "fedcap",
            {"attack": "adaptive", "attackers": 3},
            "on FedCAP needs its calibration reference .* use --knowledge full",
        ),
        (
            "fedcap",
            {"attack": "adaptive", "attackers": 3, "knowledge": "full", "overrides": {"attack_tol": 0.1}},
            "the adaptive attack on fedcap takes no attack_tol",
        ),
        ("fedavg", {"attack": "lf", "attackers": 1, "knowledge": "full"}, "--knowledge full changes nothing for lf"),
        # the reparametrisations
        (
            "lightyear",
            {"attack": "rescale", "attackers": 3, "overrides": {"attack_factor": 0}},
            "attack_factor must be a finite number > 0",
        ),
        (
            "lightyear",
            {"attack": "rescale_permute", "attackers": 3, "overrides": {"attack_factor": "big"}},
            "attack_factor must be a finite number > 0",
        ),
        (
            "lightyear",
            {"attack": "permute", "attackers": 3, "overrides": {"attack_factor": 2.0}},
            "attack 'permute' takes no setting attack_factor",
        ),
        (
            "fedavg",
            {"attack": "rescale", "attackers": 3, "overrides": {"attack_per_receiver": True}},
            "the star topology has one receiver, the server",
        ),
        (
            "lightyear",
            {"attack": "permute", "attackers": 3, "overrides": {"attack_per_receiver": "yes"}},
            "attack_per_receiver must be true",
        ),
        # on a ring site-7 hears from site-6 and site-8 only, both attackers
        (
            "lightyear",
            {"attack": "ipm", "attackers": 3, "knowledge": "full", "overrides": {"topology": "ring"}},
            r"attacker site-7 receives no benign site's model on the ring topology \(it hears from site-6, site-8\)",
        ),
    ],
)
def test_refusals_name_the_problem_and_the_allowed_values(method, kwargs, message):
    with pytest.raises(ValueError, match=message):
        generate.build_job(CONFIGS, method, "digits", **kwargs)


def test_full_knowledge_on_a_ring_with_a_benign_in_neighbour_for_every_attacker():
    name, _ = generate.build_job(
        CONFIGS, "lightyear", "digits", attack="ipm", attackers=2, knowledge="full", overrides={"topology": "ring"}
    )
    assert name == "lightyear_digits_ipm2_full"


def test_label_flipping_needs_two_classes():
    with pytest.raises(ValueError, match=r"num_classes must be an integer >= 2 \(label flipping trains on .*\), got 1"):
        generate.build_job(CONFIGS, "fedavg", "digits", attack="lf", attackers=1, overrides={"num_classes": 1})


def test_the_command_line_writes_an_attack_job(tmp_path, capsys):
    rc = generate.main(
        [
            "--configs",
            CONFIGS,
            "--out",
            str(tmp_path),
            "--method",
            "balance",
            "--dataset",
            "digits",
            "--attack",
            "adaptive",
            "--attackers",
            "3",
            "--set",
            "attack_max_step=2.5",
        ]
    )
    assert rc == 0
    meta = json.load(open(tmp_path / "balance_digits_adaptive3" / "meta.json"))
    assert meta["lightyear"]["attack_params"] == {"max_step": 2.5}
    faulty = json.load(open(tmp_path / "balance_digits_adaptive3" / "app_faulty" / "config" / "config_fed_client.json"))
    assert faulty["components"][-1]["args"]["kind"] == "adaptive"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--attack", "sf"], "--attack sf needs --attackers K"),
        (["--attackers", "2"], "--attackers needs --attack"),
        (["--attack", "sf", "--attackers", "2", "--malfunction", "ana"], "--attack cannot go with --malfunction"),
        (["--attack", "adaptive", "--attackers", "2"], "choose --method lightyear, lightyear_paper, balance, krum"),
    ],
)
def test_the_command_line_refuses_before_writing_anything(tmp_path, capsys, argv, message):
    out = tmp_path / "jobs"
    rc = generate.main(["--configs", CONFIGS, "--out", str(out), "--method", "fedavg", "--dataset", "digits", *argv])
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_attack_flags_need_a_method_and_a_dataset(capsys):
    with pytest.raises(SystemExit):
        generate.main(["--configs", CONFIGS, "--attack", "sf", "--attackers", "1"])
    assert "--attack, --attackers, --knowledge and --seed need --method and --dataset" in capsys.readouterr().err


def test_the_job_api_takes_the_attack_flags_and_exports_the_generators_job(tmp_path):
    args = job_api.build_parser().parse_args(
        [
            "--method",
            "fedavg",
            "--dataset",
            "digits",
            "--attack",
            "ipm",
            "--attackers",
            "2",
            "--knowledge",
            "full",
            "--set",
            "attack_epsilon=4",
        ]
    )
    kwargs = attacks.job_arguments(args)
    assert kwargs == {"attack": "ipm", "attackers": 2, "knowledge": "full"}
    name, files = generate.build_job(CONFIGS, "fedavg", "digits", overrides={"attack_epsilon": 4}, **kwargs)
    recipe = GeneratedRecipe.build(CONFIGS, "fedavg", "digits", overrides={"attack_epsilon": 4}, **kwargs)
    assert recipe.name == name == "fedavg_digits_ipm2_full" and recipe.sites == [f"site-{k}" for k in range(1, 9)]
    recipe.export(str(tmp_path))
    exported = {
        os.path.relpath(os.path.join(d, f), tmp_path / name): json.load(open(os.path.join(d, f)))
        for d, _, fs in os.walk(tmp_path / name)
        for f in fs
    }
    assert exported.pop(folders.MARK)["sha256"].keys() == files.keys() and exported == files


def test_the_wired_arguments_are_not_settings():
    with pytest.raises(ValueError, match="has no setting 'flip_labels'"):
        generate.build_job(CONFIGS, "lightyear", "digits", overrides={"flip_labels": True})
    with pytest.raises(ValueError, match="attack 'sf' takes no setting attack_id"):
        generate.build_job(CONFIGS, "lightyear", "digits", overrides={"attack_id": "x"}, attack="sf", attackers=1)


def test_rescaling_a_network_none_of_whose_units_admits_it_is_refused_and_permuting_it_is_not():
    with pytest.raises(
        generate.SettingError, match="no unit of efficientnet_b0 admits an exact rescaling .* use --attack permute"
    ):
        generate.build_job(CONFIGS, "fedavg", "isic19", attack="rescale", attackers=2)
    name, files = generate.build_job(CONFIGS, "fedavg", "isic19", attack="permute", attackers=2, knowledge="full")
    adversary = next(c for c in files["app/config/config_fed_server.json"]["components"] if c["id"] == "adversary")
    assert name == "fedavg_isic19_permute2_full" and adversary["args"]["model"] == "efficientnet_b0"


def test_a_peer_to_peer_reparametrisation_job_takes_full_knowledge():
    name, files = generate.build_job(
        CONFIGS,
        "lightyear",
        "digits",
        attack="rescale_permute",
        attackers=3,
        knowledge="full",
        overrides={"attack_factor": 10.0},
    )
    [attack] = components(files["app_faulty/config/config_fed_client.json"], "attack")
    assert name == "lightyear_digits_rescale_permute3_full" and attack["args"]["params"] == {"factor": 10.0}


@pytest.mark.parametrize("topology", ["p2p", "star"])
def test_a_method_declaring_an_adaptive_attack_by_a_name_other_than_oracle_is_refused(topology):
    from lightyear.flare.declarations import Method
    from lightyear.p2p.site.executor import P2PExecutor
    from lightyear.star.aggregator import StarAggregator

    site, rule = (P2PExecutor, None) if topology == "p2p" else (None, StarAggregator)
    adaptive = "orcale" if topology == "p2p" else "oracle"
    with pytest.raises(ValueError, match=r"declares adaptive='oracle'"):
        Method("mine", topology, "a plugin's method", site=site, rule=rule, adaptive=adaptive)
    if topology == "p2p":
        assert Method("mine", topology, "a plugin's method", site=site, adaptive="oracle").adaptive == "oracle"

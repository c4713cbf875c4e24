"""docs/extending.md is a working plugin: its code blocks are built into a package, installed beside
the toolkit (entry points only, nothing of the toolkit edited) and used by the toolkit's commands.

The plugin is installed with ``pip --prefix`` into a temporary folder, offline (``--no-index``) and
with its declared dependencies resolved against the environment, where the toolkit is installed:
a dependency that names anything but the toolkit's distribution fails the install. It is reached
through PYTHONPATH in subprocesses, so this test process's registries never see it.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "extending.md"
BLOCK = re.compile(r'```(\w+) title="([^"]+)"\n(.*?)```', re.S)
BIN = Path(sys.executable).parent


def guide_files() -> dict[str, str]:
    return {path: body for _, path, body in BLOCK.findall(GUIDE.read_text())}


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """PYTHONPATH-extended environment in which the guide's plugin is installed."""
    root = tmp_path_factory.mktemp("plugin")
    source, prefix = root / "lightyear-example", root / "prefix"
    for path, body in guide_files().items():
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(body)
    # --prefix (unlike --target) resolves the plugin's dependencies against what this environment has
    # installed; --no-index and --isolated (no pip configuration, no find-links) keep it offline
    installed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--isolated",
            "--no-build-isolation",
            "--no-index",
            "--prefix",
            str(prefix),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, (
        "the guide's plugin does not install beside the toolkit with its declared dependencies:\n"
        + installed.stdout
        + installed.stderr
    )
    site = Path(sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)}))
    assert (site / "lightyear_example").is_dir(), sorted(str(p) for p in prefix.rglob("*"))[:20]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    return {"env": env, "root": root}


def run(plugin, *args, check=True):
    done = subprocess.run(args, env=plugin["env"], cwd=plugin["root"], capture_output=True, text=True, timeout=300)
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def python(plugin, code: str):
    return run(plugin, sys.executable, "-c", textwrap.dedent(code)).stdout


def test_the_guide_holds_a_whole_plugin_and_counts_its_files():
    files = guide_files()
    assert set(files) == {
        "pyproject.toml",
        "lightyear_example/__init__.py",
        "lightyear_example/median.py",
        "lightyear_example/median_site.py",
        "lightyear_example/trimmed_mean.py",
        "lightyear_example/trimmed_mean_server.py",
        "lightyear_example/zero.py",
        "lightyear_example/blobs.py",
        "lightyear_example/mlp.py",
    }
    table = GUIDE.read_text()
    # the table's counts are the guide's own files: 2 per method, 1 per attack, dataset, network
    assert "| a peer-to-peer method | 2:" in table and "| a star method | 2:" in table
    for kind in ("an attack on updates", "a dataset", "a network"):
        assert f"| {kind} | 1:" in table


def test_the_plugins_rules_give_the_hand_worked_answers(plugin):
    out = python(
        plugin,
        """
        import numpy as np
        from lightyear_example.median import coordinate_median
        from lightyear_example.trimmed_mean import trimmed_mean
        from lightyear_example.zero import craft, craft_noise
        own = {"w": np.array([1.0, 5.0], np.float32)}
        print(coordinate_median(own, [{"w": np.array([2.0, 0.0], np.float32)},
                                      {"w": np.array([9.0, 3.0], np.float32)}])["w"].tolist())
        models = [{"w": np.array([v], np.float32)} for v in (1.0, 2.0, 3.0, 100.0, 4.0)]
        print(trimmed_mean(models, 0.2)["w"].tolist(), trimmed_mean(models, 0.0)["w"].tolist())
        print(craft(np.array([1.0, -2.0]), None, 4, 1)[0].tolist())
        noise, settings = craft_noise(np.zeros(3), None, 4, 1, rng=np.random.default_rng(0))
        drawn = np.random.default_rng(0).normal(0.0, 0.001, size=3)
        print(np.array_equal(noise, drawn), settings)
    """,
    ).split("\n")
    assert out[0] == "[2.0, 3.0]"  # medians of (1, 2, 9) and (5, 0, 3)
    assert out[1] == "[3.0] [22.0]"  # 1 and 100 dropped: mean(2, 3, 4); nothing dropped: 110 / 5
    assert out[2] == "[0.0, 0.0]"
    assert out[3] == "True {'sigma': 0.001}"  # the default sigma, drawn from the generator it is given


def test_the_toolkit_lists_the_plugin_beside_its_own(plugin):
    out = python(
        plugin,
        """
        import json
        from lightyear.algorithms.attacks import catalogue
        from lightyear.data import datasets
        from lightyear.jobs import registry
        from lightyear.models import models
        print(json.dumps([registry.method("median").topology, registry.method("trimmed_mean").topology,
                          {"zero", "noise"} <= set(catalogue.names()), "blobs" in datasets(), "mlp" in models(),
                          registry.plugin_packages(), "lightyear" in registry.names()]))
    """,
    )
    assert json.loads(out) == ["p2p", "star", True, True, True, ["lightyear_example."], True]


def test_the_plugins_random_attack_draws_from_the_jobs_seed_the_round_and_the_attacker(plugin):
    out = python(
        plugin,
        """
        import json
        import numpy as np
        from lightyear.algorithms.attacks.colluding import craft_round
        from lightyear.algorithms.attacks.declaration import attack_rng
        from lightyear.algorithms.attacks.settings import AttackSpec
        honest = {f"site-{i}": np.full(4, float(i)) for i in (1, 2, 3)}
        spec = AttackSpec("noise", "partial", ("site-2", "site-3"), {"sigma": 0.5})
        def sent(seed, round_num):
            return craft_round(spec, honest, seed=seed, round_num=round_num).updates["site-3"]
        print(json.dumps([
            np.array_equal(sent(7, 2), attack_rng(7, 2, 1).normal(0.0, 0.5, size=4)),  # site-3: attacker 1
            np.array_equal(sent(7, 2), sent(7, 2)),
            np.array_equal(sent(7, 2), sent(8, 2)) or np.array_equal(sent(7, 2), sent(7, 3)),
        ]))
    """,
    )
    assert json.loads(out) == [True, True, False]


def test_the_plugins_network_declares_symmetries_that_keep_its_outputs(plugin):
    out = python(
        plugin,
        """
        import numpy as np, torch
        from lightyear.algorithms.attacks.reparametrise import reparametrised
        from lightyear.models import build_model, model_symmetries
        net = build_model("mlp", 4, seed=0)
        weights = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
        moved, _ = reparametrised(weights, model_symmetries("mlp", weights), "rescale_permute", 100.0,
                                  np.random.default_rng(0))
        x = torch.randn(8, 16)
        before = net(x)
        net.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in moved.items()})
        print(float((net(x) - before).abs().max()), float(np.abs(moved["0.weight"] - weights["0.weight"]).max()))
    """,
    ).split()
    assert float(out[0]) < 1e-4 and float(out[1]) > 1.0  # same function, other parameters


def test_jobs_and_sweeps_use_the_plugin_and_refuse_its_bad_settings(plugin, tmp_path):
    jobs = tmp_path / "jobs"
    run(
        plugin,
        str(BIN / "lightyear-jobs"),
        "--method",
        "median",
        "--dataset",
        "blobs",
        "--attack",
        "zero",
        "--attackers",
        "1",
        "--out",
        str(jobs),
    )
    client = json.loads((jobs / "median_blobs_zero1" / "app" / "config" / "config_fed_client.json").read_text())
    assert client["executors"][0]["executor"]["path"] == "lightyear_example.median_site.MedianExecutor"
    assert "add lightyear_example. to class_allow_list" in client["executors"][0]["executor"]["if_not_in_allow_list"]
    star = ["--method", "trimmed_mean", "--dataset", "blobs", "--attack", "noise", "--attackers", "1"]
    run(plugin, str(BIN / "lightyear-jobs"), *star, "--set", "attack_sigma=0.01", "--seed", "5", "--out", str(jobs))
    server = json.loads((jobs / "trimmed_mean_blobs_noise1" / "app" / "config" / "config_fed_server.json").read_text())
    adversary = next(c for c in server["components"] if c["id"] == "adversary")["args"]
    assert (adversary["kind"], adversary["params"], adversary["seed"]) == ("noise", {"sigma": 0.01}, 5)
    for args, message in [
        (["--set", "attack_sigma=-1"], "attack 'noise' refuses its settings {'sigma': -1}: attack_sigma must be"),
        (["--set", "attack_scale=2"], "attack 'noise' takes no setting attack_scale; it takes attack_sigma"),
    ]:
        bad = run(plugin, str(BIN / "lightyear-jobs"), *star, *args, "--out", str(jobs / "bad"), check=False)
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr
    p2p = ["--method", "median", "--dataset", "blobs", "--attack", "noise", "--attackers", "1", "--out", str(jobs)]
    run(plugin, str(BIN / "lightyear-jobs"), *p2p, "--seed", "5")
    faulty = json.loads((jobs / "median_blobs_noise1" / "app_faulty" / "config" / "config_fed_client.json").read_text())
    attacker = next(c for c in faulty["components"] if c["id"] == "attack")["args"]
    assert (attacker["kind"], attacker["seed"]) == ("noise", 5)  # the attacker draws from the job's seed
    assert not (jobs / "bad").exists()
    bad = run(
        plugin,
        str(BIN / "lightyear-jobs"),
        "--method",
        "trimmed_mean",
        "--dataset",
        "blobs",
        "--set",
        "trim_share=0.7",
        "--out",
        str(jobs),
        check=False,
    )
    assert bad.returncode == 2 and "trim_share must be a number in [0, 0.5), got 0.7" in bad.stderr
    assert not (jobs / "trimmed_mean_blobs").exists()
    spec = tmp_path / "sweep.yaml"
    spec.write_text(
        "name: plugin\ndatasets: [blobs]\nmethods: [median, trimmed_mean]\nattacks: [zero, noise]\nattackers: [0, 1]\n"
    )
    listed = run(plugin, str(BIN / "lightyear-sweep"), str(spec), "--out", str(tmp_path / "sweep"), "--dry-run").stdout
    todo = set(re.findall(r"todo +(\S+)", listed))
    assert {"median_blobs_clean_s0", "median_blobs_zero1_s0", "trimmed_mean_blobs_zero1_s0"} <= todo
    assert {"trimmed_mean_blobs_noise1_s0", "median_blobs_noise1_s0"} <= todo
    local = tmp_path / "site-1" / "local"
    local.mkdir(parents=True)
    run(plugin, str(BIN / "lightyear-allow"), str(local))
    assert "lightyear_example." in json.loads((local / "resources.json").read_text())["class_allow_list"]


@pytest.mark.simulator
@pytest.mark.parametrize(
    "method, extra",
    [  # the peer-to-peer job with the plugin's attack runs in the fast tier
        ("median", ["--attack", "zero", "--attackers", "1"]),
        pytest.param("trimmed_mean", [], marks=pytest.mark.extended),
    ],
)
def test_the_plugins_jobs_run_in_the_simulator(plugin, tmp_path, method, extra):
    jobs = tmp_path / "jobs"
    run(
        plugin,
        str(BIN / "lightyear-jobs"),
        "--method",
        method,
        "--dataset",
        "blobs",
        "--set",
        "rounds=2",
        *extra,
        "--out",
        str(jobs),
    )
    job = next(jobs.iterdir())
    run(plugin, str(BIN / "lightyear-simulate"), str(job), "-w", str(tmp_path / "ws"), "-t", "3")
    with open(tmp_path / "ws" / "server" / "simulate_job" / "summary.csv") as f:
        rows = {row["site"]: row for row in csv.DictReader(f) if row["site"].startswith("site-")}
    benign = ["site-1", "site-2"] if extra else ["site-1", "site-2", "site-3"]
    assert all(float(rows[s]["acc"]) > 0.6 for s in benign), rows  # chance is 0.25

"""Detection on real simulator runs (extended tier): Krum with a sign-flipping site and with two
colluding LIE attackers, FedCAP against the adaptive attack, LIGHTYEAR against function-preserving
copies, FedAvg under the reparametrisation attack."""

import csv
import json
import math
import os
import shutil
import subprocess
import sys

import pytest

from lightyear.experiments import detection
from lightyear.experiments.detection import open_run, run_detection


def _simulate(tmp_path, name, files, n_sites):
    """Write the generated job and run it in FLARE's simulator: (workspace, finished process)."""
    from lightyear.jobs import generate

    from repo import ROOT

    job = tmp_path / "jobs" / name
    generate.write_job(files, str(job))
    ws = tmp_path / "ws"
    (ws / "local").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, "workspace", "local", "resources.json"), ws / "local")
    nvflare = os.path.join(os.path.dirname(sys.executable), "nvflare")
    cmd = [nvflare, "simulator", str(job), "-w", str(ws), "-t", str(n_sites)]
    return ws, subprocess.run(cmd, capture_output=True, text=True, timeout=400, cwd=str(tmp_path))


@pytest.mark.simulator
@pytest.mark.extended
def test_detection_of_a_real_krum_run_with_a_sign_flipping_site(tmp_path):
    from lightyear.jobs import generate

    from repo import ROOT

    sites = ["site-1", "site-2", "site-3", "site-4"]
    settings = {"sites": sites, "rounds": 2, "min_clients": 4, "train_args": {"local_epochs": 1, "batch_size": 64}}
    name, files = generate.build_job(
        os.path.join(ROOT, "app_configs"), "krum", "digits", "sfa", 1, seed=0, overrides=settings
    )
    ws, proc = _simulate(tmp_path, name, files, 4)
    state = ws / "server" / "simulate_job" / "aggregator_state.json"
    assert state.exists(), (proc.stdout + proc.stderr)[-3000:]
    assert all(
        h["rejected"] == [] for h in json.loads(state.read_text())["history"]
    )  # the controller's refusals are recorded
    found = run_detection(open_run(str(ws)))
    assert found.run.faulty_sites == ["site-4"]
    # Krum (m = 1) keeps one of the four results each round: every round 4 evaluated, 3 left out
    assert [(d.round, d.receiver, d.counts.evaluated) for d in found.decisions] == [(0, "server", 4), (1, "server", 4)]
    total = found.total
    assert total.tp + total.fn == 2 and total.fp + total.tn == 6 and total.tp + total.fp == 6
    assert not math.isnan(total.dacc) and detection.main([str(ws)]) == 0


@pytest.mark.simulator
@pytest.mark.extended
def test_detection_of_a_real_krum_run_with_two_colluding_lie_attackers(tmp_path):
    """The star topology's simulated adversary in a real run: the job names it, it crafts the
    attackers' results on the server, and the records give the detection metrics."""
    from lightyear.jobs import generate

    from repo import ROOT

    sites = ["site-1", "site-2", "site-3", "site-4", "site-5"]
    settings = {"sites": sites, "rounds": 2, "min_clients": 5, "train_args": {"local_epochs": 1, "batch_size": 64}}
    name, files = generate.build_job(
        os.path.join(ROOT, "app_configs"), "krum", "digits", attack="lie", attackers=2, seed=0, overrides=settings
    )
    assert name == "krum_digits_lie2"
    ws, proc = _simulate(tmp_path, name, files, 5)
    records = ws / "server" / "simulate_job" / "adversary.jsonl"
    assert records.exists(), (proc.stdout + proc.stderr)[-3000:]
    crafted = [json.loads(line) for line in records.read_text().splitlines()]
    assert [(r["round"], r["kind"], r["crafted"]) for r in crafted] == [
        (0, "lie", ["site-4", "site-5"]),
        (1, "lie", ["site-4", "site-5"]),
    ]
    found = run_detection(open_run(str(ws)))
    assert found.run.faulty_sites == ["site-4", "site-5"]
    assert [(d.round, d.receiver, d.counts.evaluated) for d in found.decisions] == [(0, "server", 5), (1, "server", 5)]
    total = found.total  # Krum keeps one of five results a round: 4 flagged a round
    assert total.tp + total.fn == 4 and total.fp + total.tn == 6 and total.tp + total.fp == 8
    assert detection.main([str(ws)]) == 0


@pytest.mark.simulator
@pytest.mark.extended
def test_a_real_fedcap_run_keeps_the_adaptive_attacker_at_the_edge_of_its_norm_ball(tmp_path):
    """The adaptive attack on FedCAP in a real run: the adversary reads FedCAP's T_norm and w^t
    from the job's rule, and the attacker's calibrated update lands at 0.98 T_norm, kept."""
    from lightyear.jobs import generate

    from repo import ROOT

    sites = ["site-1", "site-2", "site-3", "site-4"]
    settings = {"sites": sites, "rounds": 2, "min_clients": 4, "train_args": {"local_epochs": 1, "batch_size": 64}}
    name, files = generate.build_job(
        os.path.join(ROOT, "app_configs"),
        "fedcap",
        "digits",
        attack="adaptive",
        attackers=1,
        knowledge="full",
        seed=0,
        overrides=settings,
    )
    t_norm = next(c for c in files["app/config/config_fed_server.json"]["components"] if c["id"] == "aggregator")[
        "args"
    ]["t_norm"]
    ws, proc = _simulate(tmp_path, name, files, 4)
    run = ws / "server" / "simulate_job"
    assert (run / "adversary.jsonl").exists(), (proc.stdout + proc.stderr)[-3000:]
    crafted = [json.loads(line) for line in (run / "adversary.jsonl").read_text().splitlines()]
    assert [(r["round"], r["crafted"], r["known"]) for r in crafted] == [
        (0, ["site-4"], sites[:3]),
        (1, ["site-4"], sites[:3]),
    ]
    assert all(r["settings"]["radius"] == pytest.approx(0.98 * t_norm) for r in crafted)
    state = json.loads((run / "aggregator_state.json").read_text())
    assert (
        state["fedcap"]["norms"]["site-4"] == pytest.approx(0.98 * t_norm, rel=1e-4)
        and state["fedcap"]["removed"] == {}
    )
    found = run_detection(open_run(str(ws)))
    assert (found.total.tp, found.total.fn) == (0, 2)  # kept both rounds: the attack went undetected


@pytest.mark.simulator
@pytest.mark.extended
def test_a_real_lightyear_run_excludes_the_function_preserving_copies_of_each_receivers_own_model(tmp_path):
    """Peer-to-peer, full knowledge: two attackers send every benign receiver a rescaled and permuted
    copy of that receiver's own model of the round (per receiver). The run finishes, the attackers'
    records name the transform, and no benign site ever adopts a crafted copy: when its selection
    kept one, the validated aggregation left it out before averaging, as a copy of its own function."""
    from lightyear.jobs import generate

    from repo import ROOT

    sites = ["site-1", "site-2", "site-3", "site-4", "site-5"]
    settings = {"sites": sites, "rounds": 2, "train_args": {"local_epochs": 1, "batch_size": 64}, "skill_floor": 0.0}
    name, files = generate.build_job(
        os.path.join(ROOT, "app_configs"),
        "lightyear",
        "digits",
        attack="rescale_permute",
        attackers=2,
        knowledge="full",
        seed=0,
        overrides=settings,
    )
    ws, proc = _simulate(tmp_path, name, files, 5)
    rows = {
        s: list(csv.DictReader(open(ws / s / "simulate_job" / "rounds.csv")))
        for s in sites
        if (ws / s / "simulate_job" / "rounds.csv").exists()
    }
    assert sorted(rows) == sites and all(len(r) == 2 for r in rows.values()), (proc.stdout + proc.stderr)[-3000:]
    for attacker in ("site-4", "site-5"):
        assert {r["attack_transform"] for r in rows[attacker]} == {"rescale_permute"} and rows[attacker][0][
            "attack_knowledge"
        ] == "full"
    for site in ("site-1", "site-2", "site-3"):
        for row in rows[site]:
            adopted = set(filter(None, row["adopted"].split(";")))
            assert not adopted & {"site-4", "site-5"}, row
            for attacker in set(filter(None, row["selected"].split(";"))) & {"site-4", "site-5"}:
                assert "own model's function" in row[f"{attacker}_excluded"], row  # selected, left out, and why
    assert detection.main([str(ws)]) == 0


@pytest.mark.simulator
@pytest.mark.extended
def test_a_real_fedavg_run_under_the_reparametrisation_attack_finishes_and_records_it(tmp_path):
    """Star, partial knowledge: the server's adversary sends, for one attacker, a rescaled copy of its
    honest model (the job names the network); the run finishes and adversary.jsonl records the transform."""
    from lightyear.jobs import generate

    from repo import ROOT

    sites = ["site-1", "site-2", "site-3", "site-4"]
    settings = {"sites": sites, "rounds": 2, "min_clients": 4, "train_args": {"local_epochs": 1, "batch_size": 64}}
    name, files = generate.build_job(
        os.path.join(ROOT, "app_configs"), "fedavg", "digits", attack="rescale", attackers=1, seed=0, overrides=settings
    )
    ws, proc = _simulate(tmp_path, name, files, 4)
    records = ws / "server" / "simulate_job" / "adversary.jsonl"
    assert records.exists(), (proc.stdout + proc.stderr)[-3000:]
    crafted = [json.loads(line) for line in records.read_text().splitlines()]
    assert [(r["round"], r["crafted"], r["settings"]["attack_transform"]) for r in crafted] == [
        (0, ["site-4"], "rescale"),
        (1, ["site-4"], "rescale"),
    ]
    assert (ws / "server" / "simulate_job" / "summary.csv").exists()

"""Detection metrics (FedCAP's DAcc, FPR, FNR) from hand-made run records, counted by hand; the
report's detection tables; the error messages; one real simulator run (extended tier)."""

import csv
import json
import math
import os
import shutil
import subprocess
import sys

import pytest

from lightyear.algorithms.attacks.detection import Labelling
from lightyear.experiments import detection, detection_tables, report
from lightyear.experiments.detection import DetectionError, open_run, run_detection
from lightyear.experiments.results import load_sweep

from detection_runs import SITES4, counts, krum_run, lightyear_run, make_run, write_history, write_rounds


def test_lightyear_counts_per_receiver_and_round_and_pooled(tmp_path):
    found = run_detection(open_run(str(lightyear_run(tmp_path / "run"))))
    assert [(d.round, d.receiver) for d in found.decisions] == [
        (0, "site-1"),
        (0, "site-2"),
        (0, "site-3"),
        (1, "site-1"),
        (1, "site-2"),
        (1, "site-3"),
    ]
    assert found.by_receiver() == {
        "site-1": counts(2, 1, 3, 0),
        "site-2": counts(0, 1, 3, 1),
        "site-3": counts(1, 0, 0, 0),
    }
    assert found.by_round() == {0: counts(1, 1, 3, 1), 1: counts(2, 1, 3, 0)}
    total = found.total  # pooled: the ratios of the summed counts
    assert total == counts(3, 2, 6, 1)
    assert (total.dacc, total.fpr, total.fnr) == (9 / 12, 2 / 8, 1 / 4)
    # not the mean of the per-receiver ratios: FNR 0, 1 and 0 average to 1/3
    assert [c.fnr for c in found.by_receiver().values()] == [0.0, 1.0, 0.0] and total.fnr == 1 / 4


def test_krum_counts_the_servers_exclusions_and_refusals(tmp_path):
    found = run_detection(open_run(str(krum_run(tmp_path / "run"))))
    assert [(d.round, d.receiver, d.counts) for d in found.decisions] == [
        (0, "server", counts(1, 2, 1, 0)),
        (1, "server", counts(1, 1, 2, 0)),
        (2, "server", counts(0, 0, 3, 1)),
    ]
    total = found.total
    assert total == counts(2, 3, 6, 1) and (total.dacc, total.fpr, total.fnr) == (8 / 12, 3 / 9, 1 / 3)


def test_detection_csv_has_decisions_then_pools(tmp_path):
    found = run_detection(open_run(str(lightyear_run(tmp_path / "run"))))
    rows = list(csv.DictReader(open(detection.write_csv(found, str(tmp_path / "detection.csv")))))
    assert list(rows[0]) == list(detection.COLUMNS)
    keys = [(r["round"], r["receiver"]) for r in rows]
    assert keys[:6] == [
        ("0", "site-1"),
        ("0", "site-2"),
        ("0", "site-3"),
        ("1", "site-1"),
        ("1", "site-2"),
        ("1", "site-3"),
    ]
    assert keys[6:] == [
        ("all", "site-1"),
        ("all", "site-2"),
        ("all", "site-3"),
        ("0", "all"),
        ("1", "all"),
        ("all", "all"),
    ]
    assert rows[-1] == {
        "round": "all",
        "receiver": "all",
        "tp": "3",
        "fp": "2",
        "tn": "6",
        "fn": "1",
        "dacc": "0.75",
        "fpr": "0.25",
        "fnr": "0.25",
    }
    site3_r0 = rows[2]  # nothing evaluated: every ratio undefined, written empty
    assert (site3_r0["tp"], site3_r0["dacc"], site3_r0["fpr"], site3_r0["fnr"]) == ("0", "", "", "")
    star = run_detection(open_run(str(krum_run(tmp_path / "krum"))))
    assert [(r["round"], r["receiver"]) for r in star.rows()][-1] == ("all", "server")  # one receiver: no 'all' rows


def label(method, row, peers=()):
    """The labelling ``method`` declares, applied to one record."""
    return detection.rule_for(method).label(row, peers)


def test_the_other_rules_on_single_rows():
    peers = ["site-2", "site-3", "site-4"]
    balance = {
        "selected": "site-2",
        "rejected": "site-3",
        "site-2_distance": 1.0,
        "site-3_distance": "",
        "site-4_distance": 9.0,
    }
    assert label("balance", balance, peers) == Labelling(
        frozenset({"site-2", "site-3", "site-4"}), frozenset({"site-3", "site-4"})
    )
    scclip = {
        "selected": "site-2;site-3;site-4",
        "clipped": "site-4",
        "removed": "",
        "rejected": "",
        "site-2_distance": 1.0,
        "site-3_distance": 2.0,
        "site-4_distance": 9.0,
    }
    assert label("scclip", scclip, peers).flagged == {"site-4"}
    assert label("scclip", dict(scclip, clipped="", removed="site-4", selected="site-2;site-3"), peers).flagged == {
        "site-4"
    }
    defta = {"received": ["site-2", "site-3"], "selected": ["site-2"], "rejected": ["site-4"]}  # a live row: lists
    assert label("defta", defta, peers) == Labelling(frozenset(peers), frozenset({"site-3", "site-4"}))
    afa = {"round": 3, "kept": ["site-1"], "excluded": ["site-2", "site-3"], "rejected": []}  # site-3 blocked, ignored
    assert label("afa", afa).flagged == {"site-2", "site-3"}
    assert set(detection.no_detection()) == {"fedavg", "fedprox", "ditto", "p2p_fedavg", "local"}
    assert [m for m in ("fedcap", "krum", "lightyear") if detection.per_client(m)] == ["fedcap"]


def test_a_selected_peer_excluded_after_averaging_counts_as_flagged():
    peers = ["site-2", "site-3", "site-4"]
    row = {
        "selected": "site-2;site-3",
        "adopted": "site-2",
        "excluded": "site-3",
        "rejected": "",
        "site-2_score": 0.9,
        "site-3_score": 1.0,
        "site-4_score": 0.1,
    }
    assert label("lightyear", row, peers) == Labelling(frozenset(peers), frozenset({"site-3", "site-4"}))
    paper = {
        k: v for k, v in row.items() if k not in ("adopted", "excluded")
    }  # the paper's rule adopts what it selects
    assert label("lightyear_paper", paper, peers).flagged == {"site-4"}


def test_methods_without_detection_get_none_and_unknown_ones_an_error(tmp_path):
    run = make_run(tmp_path / "fedavg", "fedavg", ["site-4"], topology="star")
    assert run_detection(open_run(str(run))) is None
    odd = make_run(tmp_path / "odd", "median", ["site-4"], topology="star")
    with pytest.raises(DetectionError, match="no method 'median' is known .* install the plugin that declares it"):
        run_detection(open_run(str(odd)))


def test_errors_name_the_file_and_what_it_lacks(tmp_path):
    run = make_run(tmp_path / "ly", "lightyear", ["site-4"])
    with pytest.raises(DetectionError, match=r"no benign site .* wrote its records .*site-1/simulate_job/rounds\.csv"):
        run_detection(open_run(str(run)))
    write_rounds(run, "site-1", [{"round": 0, "selected": "site-2"}], ["round", "selected"])
    with pytest.raises(DetectionError, match=r"site-1/simulate_job/rounds\.csv has no column 'rejected'"):
        run_detection(open_run(str(run)))
    columns = ["round", "selected", "rejected", "senders", "site-2_score"]
    write_rounds(
        run, "site-1", [{"round": 0, "selected": "", "senders": "site-2;site-4", "site-2_score": 0.5}], columns
    )
    with pytest.raises(DetectionError, match=r"rounds\.csv has no column 'site-4_score' for the sender site-4"):
        run_detection(open_run(str(run)))
    defta = make_run(tmp_path / "defta", "defta", ["site-4"])
    write_rounds(defta, "site-1", [{"round": 0, "selected": "site-2"}], ["round", "selected", "rejected", "sampled"])
    with pytest.raises(DetectionError, match="has no column 'received', which the defta detection rule reads"):
        run_detection(open_run(str(defta)))
    star = make_run(tmp_path / "krum", "krum", ["site-4"], topology="star")
    with pytest.raises(DetectionError, match=r"no aggregator_state\.json at .*krum/ws/server/simulate_job"):
        run_detection(open_run(str(star)))
    (star / "ws" / "server" / "simulate_job" / "aggregator_state.json").write_text(json.dumps({"reputation": {}}))
    with pytest.raises(DetectionError, match=r"aggregator_state\.json has no 'history'"):
        run_detection(open_run(str(star)))
    write_history(star, [{"round": 0, "kept": ["site-1"]}])
    with pytest.raises(DetectionError, match="history entry 0 has no 'excluded'"):
        run_detection(open_run(str(star)))
    write_history(
        star,
        [
            {"round": 0, "kept": ["site-1"], "excluded": ["site-9"], "rejected": []},
            {"round": 1, "kept": [], "excluded": []},
        ],
    )
    found = run_detection(open_run(str(star)))  # a site outside the run is just another benign sender
    assert found.decisions[0].counts == counts(0, 1, 1, 0)
    with pytest.raises(DetectionError, match="no folder at .*nowhere"):
        open_run(str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DetectionError, match="no job meta.json at"):
        open_run(str(tmp_path / "empty"))


def test_a_simulator_workspace_and_the_console(tmp_path, capsys):
    """A workspace holds its job's meta.json in server/simulate_job/; --job names it otherwise."""
    run = krum_run(tmp_path / "run")
    ws = run / "ws"
    shutil.copy(run / "job" / "meta.json", ws / "server" / "simulate_job" / "meta.json")
    assert detection.main([str(ws), "--csv", str(tmp_path / "d.csv")]) == 0
    text = capsys.readouterr().out
    assert "run: krum, faulty sites site-4" in text and "not among the m models" in text
    assert "all  2   3   6   1   0.666667  0.333333  0.333333" in text
    assert (tmp_path / "d.csv").exists()
    os.remove(ws / "server" / "simulate_job" / "meta.json")
    assert detection.main([str(ws)]) == 2
    assert "no job meta.json" in capsys.readouterr().err
    assert detection.main([str(ws), "--job", str(run / "job")]) == 0
    fedavg = make_run(tmp_path / "fedavg", "fedavg", [], topology="star")
    assert detection.main([str(fedavg)]) == 0 and "fedavg has no detection" in capsys.readouterr().out


# ---------------------------------------------------------------------------- the report
@pytest.fixture
def sweep(tmp_path):
    s = tmp_path / "sweep" / "runs"
    krum_run(s / "krum_digits_sfa1_s0", seed=0)
    krum_run(s / "krum_digits_sfa1_s1", seed=1)
    lightyear_run(s / "lightyear_digits_sfa1_s0")
    make_run(s / "fedavg_digits_sfa1_s0", "fedavg", ["site-4"], topology="star")
    clean = make_run(s / "krum_digits_clean_s0", "krum", [], topology="star")
    write_history(clean, [{"round": 0, "kept": ["site-1"], "excluded": ["site-2", "site-3", "site-4"], "rejected": []}])
    broken = make_run(s / "lightyear_digits_sfa2_s0", "lightyear", ["site-3", "site-4"])
    write_rounds(broken, "site-1", [{"round": 0, "selected": ""}], ["round", "selected"])
    attack = make_run(
        s / "krum_digits_lie1_s0",
        "krum",
        ["site-4"],
        topology="star",
        malfunction="none",
        attack="lie",
        knowledge="full",
    )
    write_history(
        attack, [{"round": 0, "kept": ["site-4"], "excluded": ["site-1", "site-2", "site-3"], "rejected": []}]
    )
    make_run(
        s / "krum_digits_sfa3_s0", "krum", ["site-2", "site-3", "site-4"], topology="star", summary=False
    )  # not finished
    return tmp_path / "sweep"


def test_tables_pool_every_decision_over_seeds(sweep):
    items, left_out, damaged = detection_tables.detect_runs([r for r in load_sweep(str(sweep)) if r.finished])
    assert (
        list(left_out) == ["lightyear_digits_sfa2_s0"]
        and "has no column 'rejected'" in left_out["lightyear_digits_sfa2_s0"]
    )
    assert [run.name for run, _ in damaged] == ["lightyear_digits_sfa2_s0"]
    tables = {t.stem: t for t in detection_tables.build_tables(items, damaged)}
    assert set(tables) == {"digits_sfa_detection", "digits_attack_full_detection"}
    sfa = tables["digits_sfa_detection"]
    assert sfa.methods == ["krum", "lightyear"] and sfa.no_detection == ["fedavg"]
    assert [label for _, label in sfa.columns] == ["0 (clean)", "1", "2"]
    cell, runs = sfa.cells[("krum", "1")]  # two seeds of (2, 3, 6, 1)
    assert runs == 2 and cell == counts(4, 6, 12, 2)
    # clean krum: (0, 3, 1, 0), no malicious sender so FNR undefined; lightyear has no clean run, and
    # its run with 2 faulty sites gives no figures: n/a, named beside it
    assert detection_tables.grid(sfa) == [
        ["krum", "25.0 / 75.0 / -", "66.7 / 33.3 / 33.3", "-"],
        ["lightyear", "-", "75.0 / 25.0 / 25.0", "n/a (unusable records: lightyear_digits_sfa2_s0)"],
    ]
    attack = tables["digits_attack_full_detection"]
    assert [label for _, label in attack.columns] == ["clean", "lie"]
    assert detection_tables.grid(attack) == [["krum", "25.0 / 75.0 / -", "0.0 / 100.0 / 100.0"]]


def test_report_writes_detection_tables_run_files_and_a_section(sweep, capsys):
    assert report.main([str(sweep)]) == 0
    out = sweep / "report"
    for rel in (
        "detection/digits_sfa_detection.csv",
        "detection/digits_sfa_detection.md",
        "detection/digits_attack_full_detection.md",
        "detection_results.csv",
        "detection.md",
    ):
        assert (out / rel).stat().st_size > 0, rel
    for run in ("krum_digits_sfa1_s0", "lightyear_digits_sfa1_s0", "krum_digits_clean_s0"):
        assert (sweep / "runs" / run / "detection.csv").exists(), run
    assert not (sweep / "runs" / "fedavg_digits_sfa1_s0" / "detection.csv").exists()
    text = (out / "report.md").read_text()
    assert "## Detection" in text and "| krum | 25.0 / 75.0 / - | 66.7 / 33.3 / 33.3 | - |" in text
    assert "No detection (they exclude no sender): fedavg." in text
    assert "- lightyear_digits_sfa2_s0: " in text and "has no column 'rejected'" in text
    long = list(csv.DictReader((out / "detection_results.csv").read_text().splitlines()))
    row = next(r for r in long if (r["threat"], r["scenario"], r["method"]) == ("sfa", "1", "lightyear"))
    assert (row["runs"], row["tp"], row["fp"], row["tn"], row["fn"], row["dacc"]) == ("1", "3", "2", "6", "1", "0.75")
    assert "detection: 1 run(s) left out" in capsys.readouterr().out


# ---------------------------------------------------------------------------- real runs
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


def test_fedcap_per_client_counts_judge_each_client_once_at_the_end_of_the_run(tmp_path):
    """site-4 attacks. r0: keeps all four (site-4 missed); r1: removes site-4 and, wrongly, site-3;
    r2: site-3 and site-4 stay removed. Pooled over rounds (TP, FP, TN, FN): (0, 0, 3, 1) + (1, 1, 2, 0)
    + (1, 1, 2, 0) = (2, 2, 7, 1); per client, as FedCAP's Table III: site-4 removed (TP), site-3
    removed (FP), sites 1 and 2 kept (TN): (1, 1, 2, 0), DAcc 75 %, FPR 33.3 %, FNR 0 %."""
    run = make_run(tmp_path / "fedcap", "fedcap", ["site-4"], topology="star")
    write_history(
        run,
        [
            {"round": 0, "kept": SITES4, "excluded": [], "rejected": []},
            {"round": 1, "kept": ["site-1", "site-2"], "excluded": ["site-3", "site-4"], "rejected": []},
            {"round": 2, "kept": ["site-1", "site-2"], "excluded": ["site-3", "site-4"], "rejected": []},
        ],
    )
    found = run_detection(open_run(str(run)))
    assert found.total == counts(2, 2, 7, 1)
    client = found.per_client()
    assert client == counts(1, 1, 2, 0)
    assert (client.dacc, client.fpr, client.fnr) == (0.75, pytest.approx(1 / 3), 0.0)


@pytest.mark.simulator
@pytest.mark.extended
def test_a_real_lightyear_run_excludes_the_function_preserving_copies_of_each_receivers_own_model(tmp_path):
    """Peer-to-peer, full knowledge: two attackers send every benign receiver a rescaled and permuted
    copy of that receiver's own model of the round (per receiver). The run finishes, the attackers'
    records name the transform, and no benign site ever adopts a crafted copy: the validated
    aggregation excludes it after averaging when its selection kept it."""
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
                assert row[f"{attacker}_excluded"], row  # selected, then excluded after averaging, with the reason
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

"""Detection metrics (FedCAP's DAcc, FPR, FNR) from hand-made run records, counted by hand; the
labelling rules of the methods; the error messages; the console. The report's detection tables are
in test_detection_tables.py, real simulator runs in test_detection_real_runs.py."""

import csv
import json
import os
import re
import shutil

import pytest

from lightyear.algorithms.attacks import catalogue
from lightyear.algorithms.detection import Labelling
from lightyear.experiments import detection
from lightyear.experiments.detection import DetectionError, open_run, run_detection

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


def test_per_client_counts_judge_a_removed_client_by_the_round_that_removed_it(tmp_path):
    """FedCAP's records name a removed site only in the round that removed it. site-4 attacks.
    r0: keeps all four (site-4 missed); r1: removes site-4 and site-3, leaves out site-2 this round;
    r2: keeps site-1 and site-2, the removed two are no longer named. Per client, each by its last
    decision: site-4 removed (TP), site-3 removed (FP), site-2 kept again and site-1 kept (TN):
    (1, 1, 2, 0). Judged by r2 alone, the removed attacker would vanish: (0, 0, 2, 0)."""
    run = make_run(tmp_path / "fedcap", "fedcap", ["site-4"], topology="star")
    write_history(
        run,
        [
            {"round": 0, "kept": SITES4, "excluded": [], "rejected": []},
            {"round": 1, "kept": ["site-1"], "excluded": ["site-2", "site-3", "site-4"], "rejected": []},
            {"round": 2, "kept": ["site-1", "site-2"], "excluded": [], "rejected": []},
        ],
    )
    found = run_detection(open_run(str(run)))
    assert found.total == counts(1, 2, 6, 1)
    assert found.per_client() == counts(1, 1, 2, 0)


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


def test_a_run_of_an_attack_no_one_declares_is_refused_naming_the_known_ones(tmp_path):
    attack = {"malfunction": "none", "attack": "lie", "knowledge": "partial"}
    lie = make_run(tmp_path / "lie", "krum", ["site-4"], topology="star", **attack)
    assert open_run(str(lie)).info["attack"] == "lie"
    odd = make_run(tmp_path / "odd", "krum", ["site-4"], topology="star", **dict(attack, attack="backdoor"))
    known = re.escape(", ".join(catalogue.names()))
    with pytest.raises(
        DetectionError,
        match=rf"odd/job/meta\.json: no attack 'backdoor' is known \(the toolkit's and installed plugins': {known}\); "
        "install the plugin that declares it",
    ):
        open_run(str(odd))


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
    with pytest.raises(  # a site outside the run: damaged records, never counted as a benign sender
        DetectionError, match=r"aggregator_state\.json, round 0: excluded names site-9, which is not one of the job's"
    ):
        run_detection(open_run(str(star)))
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

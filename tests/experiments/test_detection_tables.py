"""lightyear-report's detection: tables that pool every decision over seeds, per threat and
scenario, the runs left out named beside their cell, each run's detection.csv and the report's section."""

import csv

import pytest

from lightyear.experiments import detection_tables, report
from lightyear.experiments.results import load_sweep

from detection_runs import counts, krum_run, lightyear_run, make_run, write_history, write_rounds


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


def test_a_detection_csv_of_the_users_in_a_run_folder_is_kept(sweep, capsys):
    mine = sweep / "runs" / "krum_digits_sfa1_s0" / "detection.csv"
    mine.write_text("my own notes\n")
    assert report.main([str(sweep)]) == 0
    assert mine.read_text() == "my own notes\n"
    assert "kept " in capsys.readouterr().out and (sweep / "runs" / "krum_digits_sfa1_s1" / "detection.csv").exists()


def test_a_report_written_again_holds_no_table_of_runs_gone_from_the_sweep(sweep, tmp_path, capsys):
    assert report.main([str(sweep)]) == 0
    attack_table = sweep / "report" / "detection" / "digits_attack_full_detection.md"
    assert attack_table.exists()
    (sweep / "runs" / "krum_digits_lie1_s0").rename(tmp_path / "aside")  # the attack runs leave the sweep
    assert report.main([str(sweep)]) == 0
    assert not attack_table.exists() and (sweep / "report" / "detection" / "digits_sfa_detection.md").exists()
    # a folder that is not a report's keeps whatever else it holds
    other = tmp_path / "other"
    (other / "tables").mkdir(parents=True)
    (other / "tables" / "mine.md").write_text("mine")
    assert report.main([str(sweep), "--out", str(other), "--force"]) == 0
    assert (other / "tables" / "mine.md").read_text() == "mine"
    # nor is a file of the user's in a report folder removed when the report is written again
    (sweep / "report" / "detection" / "mine.md").write_text("mine")
    assert report.main([str(sweep)]) == 0
    assert (sweep / "report" / "detection" / "mine.md").read_text() == "mine"

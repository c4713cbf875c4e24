"""lightyear-report on a hand-written sweep folder (:mod:`report_runs`): everything it writes, and what it
refuses. Its tables, figures, peer selection and damaged runs have test_report_*.py files of their own."""

import csv
import shutil

import pytest

from lightyear.experiments import report
from lightyear.experiments.results import ReportError

from report_runs import make_run, write_sweep


@pytest.fixture
def sweep(tmp_path):
    return write_sweep(tmp_path / "sweep")


def test_report_writes_everything(sweep, tmp_path, capsys):
    out = tmp_path / "report"
    assert report.main([str(sweep), "--out", str(out), "--metrics", "ece"]) == 0
    for rel in (
        "tables/digits_sfa_acc.csv",
        "tables/digits_sfa_acc.md",
        "tables/digits_sfa_acc.tex",
        "tables/digits_sfa_ece.tex",
        "tables/shapes_clean_dice.md",
        "results.csv",
        "figures/digits_acc.png",
        "figures/digits_acc_topology.png",
        "figures/shapes_dice.png",
        "selection/lightyear_digits_sfa1_s0_selection.png",
        "selection/lightyear_digits_sfa1_s0_scores.png",
        "selection_quality.csv",
        "selection_quality.md",
        "selection_rounds.csv",
        "selection_rounds.md",
        "report.md",
    ):
        assert (out / rel).stat().st_size > 0, rel
    assert not (out / "figures" / "shapes_dice_topology.png").exists()  # one topology group only
    text = (out / "report.md").read_text()
    assert (
        "left out): lightyear_digits_dynamic2_s1, lightyear_digits_sfa2_s0" in text
        and "| lightyear | digits | sfa | 1 | 2 | 5 | 0.4 | 0 |" in text
    )
    long = list(csv.DictReader((out / "results.csv").read_text().splitlines()))
    row = next(
        r
        for r in long
        if (r["dataset"], r["malfunction"], r["metric"], r["method"], r["faulty"])
        == ("digits", "sfa", "acc", "lightyear", "1")
    )
    assert float(row["mean"]) == pytest.approx(0.85) and row["values"] == "4"
    assert "9/11 runs finished" in capsys.readouterr().out


def test_report_refuses_empty_or_unfinished_sweeps(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="holds no runs"):
        report.report(str(tmp_path / "empty"))
    make_run(tmp_path / "s", "fedavg_digits_clean_s0", "fedavg", "digits", "none", [], 0, None)
    with pytest.raises(ReportError, match="none of the 1 runs"):
        report.report(str(tmp_path / "s"))
    assert report.main([str(tmp_path / "nowhere")]) == 2
    with pytest.raises(SystemExit):
        report.main([str(tmp_path / "s"), "--metrics", "f1"])


def test_a_report_out_that_is_a_file_is_refused_and_nothing_written(sweep, tmp_path, capsys):
    (tmp_path / "FILE").write_text("mine")
    assert report.main([str(sweep), "--out", str(tmp_path / "FILE")]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "is a file" in err and err.count("\n") == 1 and (tmp_path / "FILE").read_text() == "mine"
    assert report.main([str(sweep), "--out", "/proc/x"]) == 2
    assert "--out /proc/x cannot be created" in capsys.readouterr().err


def test_a_copied_run_folder_counts_once(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    make_run(sweep, "fedavg_digits_sfa1_s0", "fedavg", "digits", "sfa", ["site-3"], 0, {"site-1": 0.5, "site-2": 0.7})
    make_run(sweep, "fedavg_digits_sfa1_s1", "fedavg", "digits", "sfa", ["site-3"], 1, {"site-1": 0.9, "site-2": 0.9})
    table = tmp_path / "report" / "tables" / "digits_sfa_acc.md"
    assert report.main([str(sweep), "--out", str(tmp_path / "report")]) == 0
    before = table.read_text()
    shutil.copytree(sweep / "runs" / "fedavg_digits_sfa1_s0", sweep / "runs" / "fedavg_digits_sfa1_s0 (copy)")
    assert report.main([str(sweep), "--out", str(tmp_path / "report")]) == 0
    assert table.read_text() == before  # 75.0 ± 16.6 over 4 benign results, not 70.0 over 6
    assert "the same job as run fedavg_digits_sfa1_s0 (a copy?)" in capsys.readouterr().err

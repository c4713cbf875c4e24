"""lightyear-report over damaged runs: an unreadable run, summary row or rounds.csv is left out with the
reason named, and the rest is reported."""

import json

import pytest

from lightyear.experiments import report, tables
from lightyear.experiments.results import load_sweep

from report_runs import by_stem, make_run, write_sweep


@pytest.fixture
def sweep(tmp_path):
    return write_sweep(tmp_path / "sweep")


def damage(run, rel, content):
    path = run / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)


RUN3 = {"site-1": 0.8, "site-2": 0.9, "site-3": 0.1}


@pytest.mark.parametrize(
    "rel, content, message",
    [
        ("ws/server/simulate_job/summary.csv", b"\x89PNG\r\n\x1a\n\x00", "is not a UTF-8 text file"),
        ("job/meta.json", '{"name": "x", "lightyear": ', "is not valid JSON: Expecting value at line 1 column 28"),
        ("job/meta.json", "[1, 2]", "has no 'lightyear' block"),
        (
            "job/meta.json",
            json.dumps(
                {
                    "deploy_map": {"app": ["server"]},
                    "lightyear": {
                        "method": "lightyear",
                        "dataset": "digits",
                        "malfunction": "sfa",
                        "faulty_sites": ["site-3"],
                        "seed": "abc",
                    },
                }
            ),
            "seed 'abc' is not a whole number",
        ),
        (
            "job/meta.json",
            json.dumps(
                {
                    "deploy_map": {"app": ["server"]},
                    "lightyear": {
                        "method": "lightyear",
                        "dataset": "digits",
                        "malfunction": "sfa",
                        "faulty_sites": "site-3",
                        "seed": 0,
                    },
                }
            ),
            "faulty_sites 'site-3' is not a list of site names",
        ),
    ],
)
def test_a_run_that_cannot_be_read_is_left_out_with_the_reason_and_the_rest_reported(
    sweep, tmp_path, capsys, rel, content, message
):
    bad = make_run(sweep, "lightyear_digits_sfa1_s7", "lightyear", "digits", "sfa", ["site-3"], 7, RUN3)
    damage(bad, rel, content)
    assert report.main([str(sweep), "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "lightyear_digits_sfa1_s7" in x)
    assert line.startswith("lightyear-report: run lightyear_digits_sfa1_s7 left out: ") and message in line, err
    text = (tmp_path / "r" / "report.md").read_text()
    assert "9/12 runs finished" in text and "lightyear_digits_sfa1_s7 left out" in text
    cell = by_stem(tables.build_tables(load_sweep(str(sweep))))["digits_sfa_acc"].cells[("lightyear", 1)]
    assert cell.mean == pytest.approx(0.85)  # the unreadable run is not in it


@pytest.mark.parametrize(
    "row, message",
    [
        ("site-2,none,finished,0.", "line 3 has 4 fields, the header 5"),  # cut mid-value
        ("site-2,none,finished,inf,0.1", "site-2: acc 'inf' is not a finite number"),
        ("site-2,none,finished,abc,0.1", "site-2: acc 'abc' is not a finite number"),
        ("site-2,none,finish,0.9,0.1", "site-2: status 'finish' is none of finished, failed, dropped"),
    ],
)
def test_an_unusable_summary_row_is_named_and_left_out_visibly(tmp_path, capsys, row, message):
    sweep = tmp_path / "sweep"
    run = make_run(
        sweep,
        "fedavg_digits_clean_s0",
        "fedavg",
        "digits",
        "none",
        [],
        0,
        {"site-1": 0.8, "site-2": 0.2, "site-3": 0.9},
    )
    summary = run / "ws" / "server" / "simulate_job" / "summary.csv"
    lines = summary.read_text().splitlines()
    lines[2] = row  # site-2's row
    summary.write_text("\n".join(lines) + "\n")
    assert report.main([str(sweep), "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert f"run fedavg_digits_clean_s0: summary.csv {message}" in err and "left out" in err, err
    cell = tables.build_tables(load_sweep(str(sweep)))[0].cells[("fedavg", 0)]
    assert (cell.values, cell.mean) == (2, pytest.approx(0.85))  # site-1 and site-3
    assert f"summary.csv {message}" in (tmp_path / "r" / "report.md").read_text()


def test_an_unreadable_rounds_csv_leaves_out_the_runs_selection_only(sweep, tmp_path, capsys):
    damage(sweep / "runs" / "lightyear_digits_sfa1_s0", "ws/site-2/simulate_job/rounds.csv", b"\x00\x01binary")
    assert report.main([str(sweep), "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    assert (
        "run lightyear_digits_sfa1_s0: peer selection left out: site-2's rounds.csv" in err
        and "is not a text file" in err
    )
    assert not (tmp_path / "r" / "selection" / "lightyear_digits_sfa1_s0_selection.png").exists()
    assert (tmp_path / "r" / "selection" / "lightyear_digits_dynamic2_s0_selection.png").exists()
    assert (tmp_path / "r" / "tables" / "digits_sfa_acc.csv").exists()

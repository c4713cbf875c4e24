"""Damaged records never give a number: lightyear-detection refuses them in one line naming the
file and the damage, and lightyear-report leaves their figures out with the run named beside the
cell; neither command writes over a file a user made without --force."""

import csv
import json
import os
import shutil

import pytest

from lightyear.experiments import detection, report
from lightyear.experiments.detection import DetectionError, open_run, run_detection

from detection_runs import krum_run, lightyear_run


def one_line_error(capsys, prog="lightyear-detection"):
    out = capsys.readouterr()
    assert out.err.startswith(f"{prog}: error: ") and out.err.count("\n") == 1 and "Traceback" not in out.err, out.err
    return out.err


def rounds_csv(run, site="site-1"):
    return run / "ws" / site / "simulate_job" / "rounds.csv"


def state_json(run):
    return run / "ws" / "server" / "simulate_job" / "aggregator_state.json"


def meta(run):
    return run / "job" / "meta.json"


def edit_meta(run, **changes):
    data = json.loads(meta(run).read_text())
    data["lightyear"].update(changes.pop("lightyear", {}))
    data.update(changes)
    meta(run).write_text(json.dumps(data))


def set_first_round(run, value):
    lines = rounds_csv(run).read_text().splitlines()
    lines[1] = value + lines[1][lines[1].index(",") :]
    rounds_csv(run).write_text("\n".join(lines) + "\n")


def edit_round(run, site, rnd, **cells):
    """Change cells of round ``rnd`` in ``site``'s rounds.csv."""
    with open(rounds_csv(run, site), newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        if row["round"] == str(rnd):
            row.update(cells)
    with open(rounds_csv(run, site), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def edit_entry(run, rnd, **keys):
    """Change keys of round ``rnd`` in the server's aggregator_state.json history."""
    state = json.loads(state_json(run).read_text())
    for entry in state["history"]:
        if entry["round"] == rnd:
            entry.update(keys)
    state_json(run).write_text(json.dumps(state))


def replace(path, make):
    path.unlink()
    make(path)


DAMAGE = {
    "meta.json malformed": (lambda r: meta(r).write_text('{"name": '), "is not valid JSON"),
    "meta.json binary": (lambda r: meta(r).write_bytes(b"\x00\xff\xfe"), "is not a UTF-8 text file"),
    "meta.json a list": (lambda r: meta(r).write_text("[1, 2]"), "has no 'lightyear' block"),
    "deploy_map a string": (lambda r: edit_meta(r, deploy_map="site-1"), "has no deploy_map"),
    "faulty_sites a string": (
        lambda r: edit_meta(r, lightyear={"faulty_sites": "site-4"}),
        "faulty_sites 'site-4' is not a list",
    ),
    "faulty_sites a stranger": (
        lambda r: edit_meta(r, lightyear={"faulty_sites": ["site-99"]}),
        "faulty_sites names site-99",
    ),
    "rounds.csv binary": (lambda r: rounds_csv(r).write_bytes(b"round\x00\xff\n"), "is not a UTF-8 text file"),
    "rounds.csv Latin-1": (
        lambda r: rounds_csv(r).write_bytes("round,selected\n0,caf\xe9\n".encode("latin-1")),
        "is not a UTF-8 text file",
    ),
    "round abc": (lambda r: set_first_round(r, "abc"), "round 'abc' is not a round number"),
    "round 0.5": (lambda r: set_first_round(r, "0.5"), "round '0.5' is not a round number"),
    "round of 5000 digits": (lambda r: set_first_round(r, "9" * 5000), "is not a round number"),
    "rounds.csv empty": (lambda r: rounds_csv(r).write_text(""), "is empty: the run did not finish writing it"),
    "rounds.csv a header only": (lambda r: rounds_csv(r).write_text("round,sel"), "has a header and no rows"),
    "rounds.csv a folder": (lambda r: replace(rounds_csv(r), os.mkdir), "is not a file (a folder?)"),
    "rounds.csv a loop of links": (
        lambda r: replace(rounds_csv(r), lambda p: os.symlink(p, p)),
        "leads nowhere (or to itself)",
    ),
}

STAR_DAMAGE = {
    "aggregator_state.json malformed": (lambda r: state_json(r).write_text('{"history": ['), "is not valid JSON"),
    "aggregator_state.json binary": (lambda r: state_json(r).write_bytes(b"\xff\x00"), "is not a UTF-8 text file"),
    "aggregator_state.json a list": (lambda r: state_json(r).write_text("[]"), "has no 'history'"),
    "a history entry a string": (
        lambda r: state_json(r).write_text('{"history": ["x"]}'),
        "history entry 0 is not a JSON object",
    ),
    "kept a number": (
        lambda r: state_json(r).write_text('{"history": [{"round": 0, "kept": 3, "excluded": []}]}'),
        "kept 3 is not a list of site names",
    ),
    "round a string": (
        lambda r: state_json(r).write_text('{"history": [{"round": "x", "kept": [], "excluded": []}]}'),
        "round 'x' is not a round number",
    ),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_peer_to_peer_records_are_one_line_naming_the_damage(damage, tmp_path, capsys):
    run = lightyear_run(tmp_path / "run")
    make_damage, message = DAMAGE[damage]
    make_damage(run)
    assert detection.main([str(run)]) == 2
    assert message in one_line_error(capsys)


@pytest.mark.parametrize("damage", sorted(STAR_DAMAGE))
def test_damaged_star_records_are_one_line_naming_the_damage(damage, tmp_path, capsys):
    run = krum_run(tmp_path / "run")
    make_damage, message = STAR_DAMAGE[damage]
    make_damage(run)
    assert detection.main([str(run)]) == 2
    assert message in one_line_error(capsys)


def test_a_row_cut_before_selected_gives_no_figures_instead_of_flagging_every_peer(tmp_path):
    run = lightyear_run(tmp_path / "run")
    with open(rounds_csv(run), "a") as f:
        f.write("2,site-1")  # the site was stopped while writing round 2
    with pytest.raises(
        DetectionError, match=r"site-1's rounds.csv .*: line 4 has 2 fields, the header 10 .*whole record"
    ):
        run_detection(open_run(str(run)))


@pytest.mark.parametrize(
    "make_run, damage, record",
    [
        (
            lightyear_run,
            lambda r: edit_round(r, "site-2", 1, selected="site-1;site-9"),
            lambda r: rounds_csv(r, "site-2"),
        ),
        (lightyear_run, lambda r: edit_round(r, "site-2", 1, rejected="site-9"), lambda r: rounds_csv(r, "site-2")),
        (krum_run, lambda r: edit_entry(r, 1, excluded=["site-3", "site-9"]), state_json),
    ],
    ids=["selected", "rejected", "star excluded"],
)
def test_a_round_naming_a_site_the_job_does_not_run_gives_no_figures(make_run, damage, record, tmp_path, capsys):
    """site-9 is not one of the job's sites: the records are damaged (or another job's), never counted."""
    run = make_run(tmp_path / "run")
    damage(run)
    assert detection.main([str(run)]) == 2
    err = one_line_error(capsys)
    assert f"{record(run)}, round 1: " in err and "names site-9, which is not one of the job's sites" in err, err


def test_the_report_gives_a_damaged_run_no_detection_or_selection_figure_and_says_why(tmp_path, capsys):
    runs = tmp_path / "sweep" / "runs"
    lightyear_run(runs / "lightyear_digits_sfa1_s0")
    cut = lightyear_run(runs / "lightyear_digits_sfa1_s1", seed=1)
    with open(rounds_csv(cut), "a") as f:
        f.write("2,site-1")
    krum_run(runs / "krum_digits_sfa1_s0")
    stranger = krum_run(runs / "krum_digits_sfa1_s1", seed=1)
    edit_meta(stranger, lightyear={"faulty_sites": ["site-99"]})
    assert report.main([str(tmp_path / "sweep")]) == 0
    out = tmp_path / "sweep" / "report"
    table = (out / "detection" / "digits_sfa_detection.md").read_text()
    assert "| lightyear | n/a (unusable records: lightyear_digits_sfa1_s1) |" in table
    assert "| krum | 66.7 / 33.3 / 33.3 |" in table  # the run naming a site outside the job is in no cell
    text = (out / "report.md").read_text()
    assert "- lightyear_digits_sfa1_s1: site-1's rounds.csv" in text and "line 4 has 2 fields" in text
    assert "run krum_digits_sfa1_s1 left out: " in text and "faulty_sites names site-99" in text
    assert "peer selection left out: site-1's rounds.csv" in text
    quality = (out / "selection_quality.md").read_text()
    assert (
        "| lightyear | digits | sfa | 1 | n/a | n/a | n/a | n/a | lightyear_digits_sfa1_s1 (unusable records) |"
        in quality
    )
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "where, message",
    [
        ("{tmp}", "is a folder"),
        ("{tmp}/missing/d.csv", "does not exist: create it first"),
        ("/proc/d.csv", "no file can be written in /proc"),
        ("{tmp}/" + "x" * 300 + ".csv", "the name is too long"),
        ("{tmp}/file/d.csv", "is a file, not a folder"),
        ("{tmp}/loop.csv", "a link that leads nowhere"),
        ("{tmp}/mine.csv", "exists and this command did not write it: give another name, or add --force"),
    ],
)
def test_a_csv_that_cannot_or_may_not_be_written_is_refused_before_any_work(where, message, tmp_path, capsys):
    run = krum_run(tmp_path / "run")
    (tmp_path / "file").write_text("")
    os.symlink(tmp_path / "loop.csv", tmp_path / "loop.csv")
    (tmp_path / "mine.csv").write_text("my notes\n")
    assert detection.main([str(run), "--csv", where.format(tmp=tmp_path)]) == 2
    assert message in one_line_error(capsys)
    assert (tmp_path / "mine.csv").read_text() == "my notes\n"


def test_csv_replaces_its_own_file_and_a_users_only_with_force(tmp_path, capsys):
    run = krum_run(tmp_path / "run")
    mine = tmp_path / "mine.csv"
    mine.write_text("my notes\n")
    assert detection.main([str(run), "--csv", str(mine), "--force"]) == 0
    assert mine.read_text().startswith(",".join(detection.COLUMNS))
    assert detection.main([str(run), "--csv", str(mine)]) == 0  # now a detection.csv of its own
    capsys.readouterr()


def test_report_out_never_replaces_a_users_files_without_force(tmp_path, capsys):
    runs = tmp_path / "sweep" / "runs"
    krum_run(runs / "krum_digits_sfa1_s0")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.md").write_text("# My own notes\n")
    assert report.main([str(tmp_path / "sweep"), "--out", str(out)]) == 2
    assert "holds report.md that lightyear-report did not write" in one_line_error(capsys, "lightyear-report")
    assert os.listdir(out) == ["report.md"] and (out / "report.md").read_text() == "# My own notes\n"
    assert report.main([str(tmp_path / "sweep"), "--out", str(out), "--force"]) == 0
    assert (out / "report.md").read_text().startswith("# Sweep report (")
    shutil.rmtree(out / "tables")  # a report stopped half-way, or edited: still its own folder
    assert report.main([str(tmp_path / "sweep"), "--out", str(out)]) == 0
    assert report.main([str(tmp_path / "sweep")]) == 0 and report.main([str(tmp_path / "sweep")]) == 0


@pytest.mark.parametrize("damage", sorted(DAMAGE) + sorted(STAR_DAMAGE))
def test_the_report_names_each_damage_and_reports_the_rest(damage, tmp_path, capsys):
    runs = tmp_path / "sweep" / "runs"
    krum_run(runs / "krum_digits_sfa1_s0")
    damaged = (lightyear_run if damage in DAMAGE else krum_run)(runs / "x_digits_sfa1_s1", seed=1)
    make_damage, message = {**DAMAGE, **STAR_DAMAGE}[damage]
    make_damage(damaged)
    assert report.main([str(tmp_path / "sweep")]) == 0
    assert "Traceback" not in capsys.readouterr().err
    text = (tmp_path / "sweep" / "report" / "report.md").read_text()
    assert "x_digits_sfa1_s1" in text and message in text

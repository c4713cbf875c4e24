"""lightyear-report on attack runs: attackers never count as benign (even when their summary rows
say ``none``), an attack gets tables of its own, and its detection tables reach report.md."""

import csv
import json
import math

import pytest

from lightyear.experiments import figures, report, tables
from lightyear.experiments.results import load_sweep

SITES = ["site-1", "site-2", "site-3", "site-4"]


def make_run(
    sweep, name, method, values, attackers=(), attack=None, knowledge="partial", topology="star", seed=0, history=None
):
    """A finished run folder; the attackers' summary rows say malfunction ``none``, as an honest
    attacker's own evaluation may."""
    run = sweep / "runs" / name
    (run / "job").mkdir(parents=True)
    info = {
        "method": method,
        "dataset": "digits",
        "topology": topology,
        "malfunction": "none",
        "faulty_sites": list(attackers),
        "seed": seed,
    }
    if attack:
        info.update(attack=attack, knowledge=knowledge, attack_params={})
    meta = {"name": name, "deploy_map": {"app": ["server"] + SITES}, "lightyear": info}
    (run / "job" / "meta.json").write_text(json.dumps(meta))
    server = run / "ws" / "server" / "simulate_job"
    server.mkdir(parents=True)
    with open(server / "summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["site", "malfunction", "status", "acc"])
        w.writerows([site, "none", "finished", values[site]] for site in SITES)
        w.writerow(["mean_benign", "n=4", "", 0.999])  # what a summary counting the attacker would say: never read
    if history is not None:
        (server / "aggregator_state.json").write_text(json.dumps({"history": history}))
    return run


@pytest.fixture
def sweep(tmp_path):
    s = tmp_path / "sweep"
    clean = {"site-1": 0.9, "site-2": 0.8, "site-3": 0.7, "site-4": 0.6}
    make_run(
        s,
        "krum_digits_clean_s0",
        "krum",
        clean,
        history=[{"round": 0, "kept": ["site-1", "site-2"], "excluded": ["site-3", "site-4"], "rejected": []}],
    )
    # site-4 attacks; its own model is fine (0.99) and must not lift the benign mean (0.5, 0.6, 0.4)
    make_run(
        s,
        "krum_digits_sf1_s0",
        "krum",
        {"site-1": 0.5, "site-2": 0.6, "site-3": 0.4, "site-4": 0.99},
        ["site-4"],
        "sf",
        history=[{"round": 0, "kept": ["site-1", "site-2"], "excluded": ["site-3", "site-4"], "rejected": []}],
    )
    make_run(
        s,
        "krum_digits_sf1_s1",
        "krum",
        {"site-1": 0.7, "site-2": 0.6, "site-3": 0.5, "site-4": 0.99},
        ["site-4"],
        "sf",
        seed=1,
        history=[{"round": 0, "kept": ["site-1", "site-4"], "excluded": ["site-2", "site-3"], "rejected": []}],
    )
    make_run(
        s,
        "krum_digits_lie2_full_s0",
        "krum",
        {"site-1": 0.3, "site-2": 0.2, "site-3": 0.99, "site-4": 0.99},
        ["site-3", "site-4"],
        "lie",
        "full",
        history=[{"round": 0, "kept": ["site-3"], "excluded": ["site-1", "site-2", "site-4"], "rejected": []}],
    )
    return s


def test_attackers_are_not_benign_and_each_attack_has_its_tables(sweep):
    runs = {r.name: r for r in load_sweep(str(sweep))}
    assert runs["krum_digits_sf1_s0"].benign_values("acc") == [0.5, 0.6, 0.4]
    assert (
        runs["krum_digits_sf1_s0"].threat,
        runs["krum_digits_lie2_full_s0"].threat,
        runs["krum_digits_clean_s0"].threat,
    ) == ("sf", "lie_full", "none")
    by = {t.stem: t for t in tables.build_tables(list(runs.values()))}
    assert set(by) == {"digits_sf_acc", "digits_lie_full_acc"}
    sf = by["digits_sf_acc"]
    assert sf.counts == [0, 1] and sf.attack == "sf" and sf.knowledge == "partial"
    cell = sf.cells[("krum", 1)]  # pooled over seeds: 0.5, 0.6, 0.4, 0.7, 0.6, 0.5
    assert (
        (cell.runs, cell.values) == (2, 6)
        and cell.mean == pytest.approx(0.55)
        and cell.std == pytest.approx(math.sqrt(0.055 / 6))
    )
    assert sf.cells[("krum", 0)].mean == pytest.approx(0.75)
    lie = by["digits_lie_full_acc"]
    assert lie.cells[("krum", 2)].mean == pytest.approx(0.25) and lie.cells[("krum", 2)].values == 2
    assert "attack lie (full knowledge)" in lie.caption and "by number of attacking sites (0 = clean)" in lie.caption
    assert r"{Number of attacking sites}" in tables.to_latex(lie)
    fig = figures.metric_figure([sf, lie])
    assert [ax.get_xlabel() for ax in fig.axes[:2]] == ["number of attacking sites"] * 2
    assert [ax.get_title() for ax in fig.axes[:2]] == ["SF (sign flipping)", "LIE (a little is enough), full knowledge"]


def test_a_run_whose_attackers_are_the_only_finished_sites_is_not_finished(tmp_path):
    make_run(
        tmp_path / "s",
        "fedavg_digits_sf3_s0",
        "fedavg",
        {"site-1": "nan", "site-2": 0.9, "site-3": 0.9, "site-4": 0.9},
        ["site-2", "site-3", "site-4"],
        "sf",
    )
    path = tmp_path / "s" / "runs" / "fedavg_digits_sf3_s0" / "ws" / "server" / "simulate_job" / "summary.csv"
    path.write_text(path.read_text().replace("site-1,none,finished", "site-1,none,dropped"))
    [run] = load_sweep(str(tmp_path / "s"))
    assert not run.finished and run.problems == []


def test_the_report_has_the_attack_tables_results_and_detection(sweep, capsys):
    assert report.main([str(sweep)]) == 0
    out = sweep / "report"
    long = list(csv.DictReader((out / "results.csv").read_text().splitlines()))
    row = next(r for r in long if (r["attack"], r["faulty"]) == ("sf", "1"))
    assert (row["malfunction"], row["knowledge"], row["method"], row["mean"], row["values"]) == (
        "none",
        "partial",
        "krum",
        "0.55",
        "6",
    )
    assert {r["knowledge"] for r in long if r["attack"] == "lie"} == {"full"}
    text = (out / "report.md").read_text()
    assert (
        "digits - attack sf (partial knowledge): test accuracy (%)" in text
        and "| krum | **75.0 ± 11.2** | **55.0 ± 9.6** |" in text
    )
    # detection: site-4 attacks; seed 0 excludes it and site-3 (1, 1, 2, 0), seed 1 keeps it and excludes 2
    # and 3 (0, 2, 1, 1)
    assert "**digits - attack_partial: detection DAcc / FPR / FNR (%)" in text
    assert "| krum | 50.0 / 50.0 / - | 50.0 / 50.0 / 50.0 |" in text
    assert (out / "detection" / "digits_attack_full_detection.md").exists()
    assert (sweep / "runs" / "krum_digits_sf1_s0" / "detection.csv").exists()


def test_a_meta_with_faulty_sites_but_neither_malfunction_nor_attack_is_left_out(tmp_path, capsys):
    make_run(tmp_path / "s", "krum_digits_clean_s0", "krum", dict.fromkeys(SITES, 0.5))
    make_run(tmp_path / "s", "krum_digits_odd_s0", "krum", dict.fromkeys(SITES, 0.5), ["site-4"])
    assert report.main([str(tmp_path / "s")]) == 0
    assert "run krum_digits_odd_s0 left out" in capsys.readouterr().err
    assert "neither a malfunction nor an attack" in (tmp_path / "s" / "report" / "report.md").read_text()

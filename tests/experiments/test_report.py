"""lightyear-report on a hand-written sweep folder: exact table numbers, figures, heatmaps, selection quality."""

import csv
import json
import math

import numpy as np
import pytest

from lightyear.experiments import figures, report, selection, selection_plots, tables
from lightyear.experiments.results import ReportError, load_sweep

SITES3 = ["site-1", "site-2", "site-3"]


def make_run(
    sweep,
    name,
    method,
    dataset,
    malfunction,
    faulty,
    seed,
    values,
    topology=None,
    metric="acc",
    rounds=None,
    statuses=None,
):
    """A run folder as lightyear-sweep leaves it: job/meta.json, summary.csv and optionally rounds.csv."""
    run = sweep / "runs" / name
    sites = sorted(values or dict.fromkeys(SITES3))
    meta = {
        "name": name,
        "deploy_map": {"app": ["server"] + [s for s in sites if s not in faulty], "app_faulty": faulty},
        "lightyear": {
            "method": method,
            "dataset": dataset,
            "topology": topology or ("star" if method == "fedavg" else "p2p"),
            "malfunction": malfunction,
            "faulty_sites": faulty,
            "seed": seed,
        },
    }
    (run / "job" / "app" / "config").mkdir(parents=True)
    (run / "job" / "meta.json").write_text(json.dumps(meta))
    (run / "job" / "app" / "config" / "config_fed_client.json").write_text(
        json.dumps({"executors": [{"executor": {"args": {"tau": 0.75}}}]})
    )
    if values is None:
        return run
    server = run / "ws" / "server" / "simulate_job"
    server.mkdir(parents=True)
    with open(server / "summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["site", "malfunction", "status", metric, "ece"])
        for site in sites:
            w.writerow(
                [
                    site,
                    malfunction if site in faulty else "none",
                    (statuses or {}).get(site, "finished"),
                    values[site],
                    0.1,
                ]
            )
        w.writerow(["mean_benign", "n=?", "", 0.123, 0.1])  # summary rows are recomputed, never read
        w.writerow(["std_benign", "n=?", "", 0.456, 0.0])
    for site, rows in (rounds or {}).items():
        folder = run / "ws" / site / "simulate_job"
        folder.mkdir(parents=True)
        cols = ["round", "site", "malfunction", "selected"] + [f"{p}_score" for p in sites if p != site] + ["val_acc"]
        with open(folder / "rounds.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=cols, restval="")
            w.writeheader()
            for rnd, (chosen, scores) in enumerate(rows):
                w.writerow(
                    {
                        "round": rnd,
                        "site": site,
                        "malfunction": "sfa" if site in faulty else "none",
                        "selected": ";".join(chosen),
                        **{f"{p}_score": v for p, v in scores.items()},
                        "val_acc": 0.5,
                    }
                )
    return run


# site-1 picks the faulty site-3 in round 0, site-2 in round 1; site-2 did not score site-3 in round 2
SFA_ROUNDS = {
    "site-1": [
        (["site-2", "site-3"], {"site-2": 0.8, "site-3": 0.76}),
        (["site-2"], {"site-2": 0.8, "site-3": 0.5}),
        (["site-2"], {"site-2": 0.9, "site-3": 0.4}),
    ],
    "site-2": [
        (["site-1"], {"site-1": 0.8, "site-3": 0.6}),
        (["site-1", "site-3"], {"site-1": 0.8, "site-3": 0.77}),
        (["site-1"], {"site-1": 0.9}),
    ],
    "site-3": [(["site-1", "site-2"], {"site-1": 0.8, "site-2": 0.8})] * 3,
}
# the faulty peers are still picked in the last round
DYN_ROUNDS = {"site-1": [(["site-2"], {"site-2": 0.8, "site-3": 0.1}), (["site-3"], {"site-2": 0.2, "site-3": 0.9})]}


@pytest.fixture
def sweep(tmp_path):
    s = tmp_path / "sweep"
    make_run(
        s,
        "lightyear_digits_sfa1_s0",
        "lightyear",
        "digits",
        "sfa",
        ["site-3"],
        0,
        {"site-1": 0.8, "site-2": 0.9, "site-3": 0.1},
        rounds=SFA_ROUNDS,
    )
    make_run(
        s,
        "lightyear_digits_sfa1_s1",
        "lightyear",
        "digits",
        "sfa",
        ["site-3"],
        1,
        {"site-1": 0.7, "site-2": 1.0, "site-3": 0.1},
    )
    make_run(
        s,
        "fedavg_digits_sfa1_s0",
        "fedavg",
        "digits",
        "sfa",
        ["site-3"],
        0,
        {"site-1": 0.5, "site-2": 0.7, "site-3": 0.2},
    )
    make_run(
        s,
        "fedavg_digits_sfa1_s1",
        "fedavg",
        "digits",
        "sfa",
        ["site-3"],
        1,
        {"site-1": 0.6, "site-2": 0.6, "site-3": 0.2},
    )
    # a benign site that failed is left out of the pool
    make_run(
        s,
        "fedavg_digits_sfa1_s2",
        "fedavg",
        "digits",
        "sfa",
        ["site-3"],
        2,
        {"site-1": 0.6, "site-2": 0.0, "site-3": 0.2},
        statuses={"site-2": "failed"},
    )
    make_run(
        s,
        "lightyear_digits_clean_s0",
        "lightyear",
        "digits",
        "none",
        [],
        0,
        {"site-1": 0.9, "site-2": 0.9, "site-3": 0.9},
    )
    make_run(
        s, "fedavg_digits_clean_s0", "fedavg", "digits", "none", [], 0, {"site-1": 0.8, "site-2": 1.0, "site-3": 0.9}
    )
    make_run(
        s,
        "lightyear_digits_dynamic2_s0",
        "lightyear",
        "digits",
        "dynamic",
        ["site-2", "site-3"],
        0,
        {"site-1": 0.75, "site-2": 0.1, "site-3": 0.1},
        rounds=DYN_ROUNDS,
    )
    make_run(
        s, "lightyear_digits_dynamic2_s1", "lightyear", "digits", "dynamic", ["site-2", "site-3"], 1, None
    )  # never finished
    # every benign site dropped: a summary, but no finished run
    make_run(
        s,
        "lightyear_digits_sfa2_s0",
        "lightyear",
        "digits",
        "sfa",
        ["site-2", "site-3"],
        0,
        {"site-1": "nan", "site-2": "nan", "site-3": "nan"},
        statuses=dict.fromkeys(SITES3, "dropped"),
    )
    make_run(
        s,
        "lightyear_shapes_clean_s0",
        "lightyear",
        "shapes",
        "none",
        [],
        0,
        {"site-1": 0.5, "site-2": 0.7},
        metric="dice",
    )
    return s


def by_stem(all_tables):
    return {t.stem: t for t in all_tables}


def test_tables_pool_benign_sites_over_seeds(sweep):
    t = by_stem(tables.build_tables(load_sweep(str(sweep))))
    assert set(t) == {"digits_sfa_acc", "digits_dynamic_acc", "shapes_clean_dice"}
    sfa = t["digits_sfa_acc"]
    assert sfa.methods == ["fedavg", "lightyear"] and sfa.counts == [0, 1]
    cell = sfa.cells[("lightyear", 1)]  # pooled [0.8, 0.9, 0.7, 1.0]
    assert (cell.runs, cell.values) == (2, 4)
    assert cell.mean == pytest.approx(0.85) and cell.std == pytest.approx(math.sqrt(0.0125))
    cell = sfa.cells[("fedavg", 1)]  # pooled [0.5, 0.7, 0.6, 0.6, 0.6]; the failed site-2 of seed 2 is out
    assert (cell.runs, cell.values) == (3, 5)
    assert cell.mean == pytest.approx(0.6) and cell.std == pytest.approx(math.sqrt(0.02 / 5))
    assert sfa.cells[("fedavg", 0)].std == pytest.approx(math.sqrt(0.02 / 3))
    grid = list(csv.reader(open_table(sweep, sfa, ".csv").splitlines()))
    assert grid == [
        ["method", "0 (clean)", "1"],
        ["fedavg", "90.0 ± 8.2", "60.0 ± 6.3"],
        ["lightyear", "90.0 ± 0.0", "85.0 ± 11.2"],
    ]
    dyn = t["digits_dynamic_acc"]
    assert dyn.counts == [0, 2] and ("fedavg", 2) not in dyn.cells and dyn.cells[("lightyear", 2)].mean == 0.75
    assert t["shapes_clean_dice"].cells[("lightyear", 0)].mean == pytest.approx(0.6)
    assert tables.fmt(t["shapes_clean_dice"].cells[("lightyear", 0)], "dice") == "60.0 ± 10.0"


def open_table(sweep, table, ext):
    folder = sweep / "tables_out"
    tables.write_table(table, str(folder))
    return (folder / f"{table.stem}{ext}").read_text()


def test_markdown_and_latex(sweep):
    t = by_stem(tables.build_tables(load_sweep(str(sweep))))
    md = tables.to_markdown(t["digits_dynamic_acc"])
    assert "| method | 0 (clean) | 2 |" in md
    assert "| fedavg | **90.0 ± 8.2** | - |" in md and "| lightyear | **90.0 ± 0.0** | **75.0 ± 0.0** |" in md
    tex = tables.to_latex(t["digits_sfa_acc"])
    assert r"\begin{tabular}{lcc}" in tex and r"accuracy (\%)" in tex
    assert r"lightyear & \textbf{90.0 $\pm$ 0.0} & \textbf{85.0 $\pm$ 11.2} \\" in tex
    assert r"fedavg & \textbf{90.0 $\pm$ 8.2} & 60.0 $\pm$ 6.3 \\" in tex  # ties in the mean are both bold
    ece = by_stem(tables.build_tables(load_sweep(str(sweep)), ("ece",)))["digits_sfa_ece"]
    assert tables.fmt(ece.cells[("fedavg", 1)], "ece") == "10.0 ± 0.0"


def visible_axes(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def test_metric_and_topology_figures(sweep, tmp_path):
    group = [t for t in tables.build_tables(load_sweep(str(sweep))) if t.dataset == "digits"]
    fig = figures.metric_figure(group)
    axes = visible_axes(fig)
    assert [ax.get_title() for ax in axes] == ["SFA (sign flipping)", "dynamic (kind drawn each round)"]
    assert [len(ax.containers) for ax in axes] == [2, 2]  # error-bar lines: fedavg and lightyear in each panel
    assert axes[0].get_xlabel() == "number of malfunctioning sites" and axes[0].get_ylabel() == "test accuracy (%)"
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["fedavg", "lightyear"]
    lightyear = axes[0].containers[1].lines[0]
    assert list(lightyear.get_ydata()) == pytest.approx([90.0, 85.0])
    path = figures.save(fig, str(tmp_path / "f.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    topo = figures.topology_figure(group, {"fedavg": "star", "lightyear": "p2p"})
    assert len(visible_axes(topo)) == 2
    assert [line.get_label() for line in visible_axes(topo)[0].lines] == ["star methods (mean)", "lightyear"]


def test_a_one_panel_figure_keeps_its_whole_title_inside(sweep):
    """The one-panel figure of a single scenario: the long title wraps instead of running off both edges."""
    group = [t for t in tables.build_tables(load_sweep(str(sweep))) if t.dataset == "digits"][:1]
    fig = figures.metric_figure(group)
    fig.canvas.draw()
    box = fig._suptitle.get_window_extent()
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width
    assert fig._suptitle.get_text().replace("\n", " ").startswith("digits: test accuracy (%) of benign sites")


def test_selection_heatmap_data_and_figure(sweep):
    runs = {r.name: r for r in load_sweep(str(sweep))}
    assert selection.run_selection(runs["fedavg_digits_sfa1_s0"]) is None
    sel = selection.run_selection(runs["lightyear_digits_sfa1_s0"])
    assert sel.sites == SITES3 and sel.faulty == ["site-3"] and sel.rounds == [0, 1, 2]
    assert sel.selected["site-1"]["site-3"] == [1.0, 0.0, 0.0]
    s2 = sel.selected["site-2"]["site-3"]
    assert s2[:2] == [0.0, 1.0] and math.isnan(s2[2])  # not scored in round 2: no candidate
    assert all(math.isnan(v) for v in sel.selected["site-1"]["site-1"])
    assert sel.scores["site-1"]["site-3"] == [0.76, 0.5, 0.4]
    fig = selection_plots.selection_heatmap(sel)
    axes = visible_axes(fig)
    assert [ax.get_title() for ax in axes] == ["site-1 selects", "site-2 selects", "site-3 (faulty) selects"]
    image = axes[0].images[0].get_array()
    assert np.ma.getmaskarray(image)[0].all() and list(image[2]) == [1.0, 0.0, 0.0]
    labels = [t.get_text() for t in axes[0].get_yticklabels()]
    assert labels == ["site-1", "site-2", "site-3 (faulty)"]
    scores = selection_plots.score_plot(sel, tau=0.75)
    assert len(visible_axes(scores)) == 3
    assert [line.get_label() for line in visible_axes(scores)[0].lines[:2]] == ["site-2", "site-3 (faulty)"]


def test_selection_quality_counts(sweep):
    runs = load_sweep(str(sweep))
    items = [(r, s) for r in runs if r.finished for s in [selection.run_selection(r)] if s]
    per_run = {row["run"]: row for row in selection.run_rows(items)}
    sfa = per_run["lightyear_digits_sfa1_s0"]
    assert (sfa["selections"], sfa["opportunities"], sfa["fraction"], sfa["rounds_to_exclusion"]) == (2, 5, 0.4, 2)
    dyn = per_run["lightyear_digits_dynamic2_s0"]
    assert (dyn["selections"], dyn["opportunities"], dyn["fraction"], dyn["rounds_to_exclusion"]) == (
        2,
        4,
        0.5,
        "never",
    )
    kinds = {row["malfunction"]: row for row in selection.kind_rows(items)}
    assert kinds["sfa"] == {
        "method": "lightyear",
        "dataset": "digits",
        "malfunction": "sfa",
        "runs": 1,
        "selections": 2,
        "opportunities": 5,
        "fraction": 0.4,
        "runs_never_excluding": 0,
        "left_out": "",
    }
    assert kinds["dynamic"]["runs_never_excluding"] == 1


def test_rounds_to_exclusion_is_zero_when_never_selected(tmp_path):
    rows = {
        "site-1": [(["site-2"], {"site-2": 0.9, "site-3": 0.1})] * 2,
        "site-2": [(["site-1"], {"site-1": 0.9, "site-3": 0.2})] * 2,
    }
    run = make_run(
        tmp_path,
        "lightyear_digits_sfa1_s0",
        "lightyear",
        "digits",
        "sfa",
        ["site-3"],
        0,
        {s: 0.5 for s in SITES3},
        rounds=rows,
    )
    sel = selection.run_selection(load_sweep(str(tmp_path))[0])
    assert selection.counts(sel)[:2] == (0, 4) and selection.rounds_to_exclusion(sel) == 0
    assert run.exists()


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


def test_a_report_out_that_is_a_file_is_refused_and_nothing_written(sweep, tmp_path, capsys):
    (tmp_path / "FILE").write_text("mine")
    assert report.main([str(sweep), "--out", str(tmp_path / "FILE")]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "is a file" in err and err.count("\n") == 1 and (tmp_path / "FILE").read_text() == "mine"
    assert report.main([str(sweep), "--out", "/proc/x"]) == 2
    assert "--out /proc/x cannot be created" in capsys.readouterr().err

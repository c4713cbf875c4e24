"""lightyear-report's peer selection: the heatmap and score plots of a run, and the selection quality counts."""

import math

import numpy as np
import pytest

from lightyear.experiments import selection, selection_plots
from lightyear.experiments.results import load_sweep

from report_runs import SITES3, make_run, visible_axes, write_sweep


@pytest.fixture
def sweep(tmp_path):
    return write_sweep(tmp_path / "sweep")


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

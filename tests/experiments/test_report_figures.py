"""lightyear-report's figures: a metric over the number of malfunctioning sites, per topology, one panel."""

import pytest

from lightyear.experiments import figures, tables
from lightyear.experiments.results import load_sweep

from report_runs import visible_axes, write_sweep


@pytest.fixture
def sweep(tmp_path):
    return write_sweep(tmp_path / "sweep")


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

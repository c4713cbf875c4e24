"""lightyear-report's result tables: benign sites pooled over seeds, with exact numbers; CSV, Markdown and LaTeX."""

import csv
import math

import pytest

from lightyear.experiments import tables
from lightyear.experiments.results import load_sweep

from report_runs import by_stem, write_sweep


@pytest.fixture
def sweep(tmp_path):
    return write_sweep(tmp_path / "sweep")


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

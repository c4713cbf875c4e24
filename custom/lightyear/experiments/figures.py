"""The paper's figures: a metric against the number of malfunctioning (or attacking) sites, a panel per kind:
:func:`metric_figure` (Figures 3, 4, 7, 8) and :func:`topology_figure` (Figures 5, 6). Colours are the Okabe-Ito
palette (safe with the common colour-vision deficiencies), with markers and line styles for more than eight methods.
"""

from __future__ import annotations

import math
import os
import textwrap

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402  (after choosing the backend)

from lightyear.algorithms.attacks import catalogue
from lightyear.experiments.tables import LABELS, PERCENT, Table  # noqa: E402
from lightyear.jobs import registry

OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#F0E442", "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", ":", "-."]
FAULTY_COLOUR = "#D55E00"  # vermillion: marks faulty sites in every figure
KIND_TITLES = {
    "ana": "ANA (additive noise)",
    "ana_relative": "ANA (relative noise)",
    "sfa": "SFA (sign flipping)",
    "random": "random model",
    "dynamic": "dynamic (kind drawn each round)",
}
"""The malfunctions' titles; an attack's comes from its declaration (``Attack.text``)."""


FEATURED = {"color": "#000000", "marker": "*", "linestyle": "-", "linewidth": 2.5, "markersize": 9}
"""The look of the toolkit's own method (``registry.FEATURED``): black, a star, thicker."""


def method_styles(methods: list[str]) -> dict[str, dict]:
    """A fixed colour, marker and line style per method (the featured one as :data:`FEATURED`)."""
    styles = {}
    featured = set(registry.featured())
    others = [m for m in methods if m not in featured]
    for i, method in enumerate(others):
        styles[method] = {
            "color": OKABE_ITO[i % 7],
            "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[(i // 7) % len(LINESTYLES)],
            "linewidth": 1.5,
        }
    styles.update({m: dict(FEATURED) for m in methods if m in featured})
    return styles


def axis_label(metric: str) -> str:
    return f"test {LABELS.get(metric, metric)}" + (" (%)" if metric in PERCENT else "")


def _scale(metric: str) -> float:
    return 100.0 if metric in PERCENT else 1.0


def _panels(n: int, title: str, height: float = 3.4) -> tuple[Figure, list]:
    """A figure with ``n`` panels, at most three a row, sharing the y axis."""
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    width = 4.4 * cols + 1.8
    fig = Figure(figsize=(width, height * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    # wrapped to the figure's width (about 10 title characters an inch)
    fig.suptitle("\n".join(textwrap.wrap(title, int(width * 10))))
    return fig, axes[:n]


def kind_title(kind: str) -> str:
    """A panel's title: the malfunction or attack in words (``<attack>_full``: with full knowledge)."""
    base = kind.removesuffix("_full")
    titles = {**KIND_TITLES, **{name: a.text for name, a in catalogue.attacks().items()}}
    return titles.get(base, base) + (", full knowledge" if kind.endswith("_full") and base in titles else "")


def _finish_axes(ax, table: Table, title: str) -> None:
    ax.set_title(kind_title(title))
    ax.set_xlabel(f"number of {table.role} sites")
    if ax.get_subplotspec().is_first_col():
        ax.set_ylabel(axis_label(table.metric))
    ax.set_xticks(table.counts)
    ax.grid(True, alpha=0.3)


def _legend(fig: Figure, axes: list, **kwargs) -> None:
    """One legend for the figure, every line of every panel once."""
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if handles:
        fig.legend(handles, labels, loc="outside right center", **kwargs)


def metric_figure(tables: list[Table], styles: dict | None = None) -> Figure:
    """One dataset and metric: a panel per kind, a line per method, mean ± std over benign sites and seeds."""
    if not tables:
        raise ValueError("metric_figure needs at least one table")
    methods = list(dict.fromkeys(m for t in tables for m in t.methods))
    styles = styles or method_styles(methods)
    first = tables[0]
    fig, axes = _panels(
        len(tables), f"{first.dataset}: {axis_label(first.metric)} of benign sites (mean ± std over sites and seeds)"
    )
    scale = _scale(first.metric)
    for ax, table in zip(axes, tables):
        for method in table.methods:
            points = [(k, c) for k in table.counts if (c := table.cells.get((method, k))) and not math.isnan(c.mean)]
            if points:
                ax.errorbar(
                    [k for k, _ in points],
                    [c.mean * scale for _, c in points],
                    yerr=[c.std * scale for _, c in points],
                    label=method,
                    capsize=3,
                    **styles[method],
                )
        _finish_axes(ax, table, table.kind)
    _legend(fig, axes, title="method")
    return fig


def topology_means(table: Table, topology: dict[str, str]) -> dict[str, list[tuple[int, float]]]:
    """Per count: the mean over star methods, over peer-to-peer baselines, and each featured method's."""
    featured = registry.featured()
    groups = {
        "star methods (mean)": [m for m in table.methods if topology.get(m) == "star"],
        "peer-to-peer baselines (mean)": [m for m in table.methods if topology.get(m) == "p2p" and m not in featured],
        **{m: [m] for m in featured if m in table.methods},
    }
    out = {}
    for label, members in groups.items():
        points = []
        for k in table.counts:
            means = [c.mean for m in members if (c := table.cells.get((m, k))) and not math.isnan(c.mean)]
            if means:
                points.append((k, sum(means) / len(means)))
        if points:
            out[label] = points
    return out


def topology_figure(tables: list[Table], topology: dict[str, str]) -> Figure:
    """Figures 5-6: star vs peer-to-peer vs LIGHTYEAR, a panel per kind."""
    if not tables:
        raise ValueError("topology_figure needs at least one table")
    first = tables[0]
    fig, axes = _panels(
        len(tables), f"{first.dataset}: topology comparison, {axis_label(first.metric)} of benign sites"
    )
    look = {
        "star methods (mean)": dict(color=OKABE_ITO[0], marker="o", linestyle="--"),
        "peer-to-peer baselines (mean)": dict(color=OKABE_ITO[1], marker="s", linestyle=":"),
        **{m: dict(FEATURED) for m in registry.featured()},
    }
    scale = _scale(first.metric)
    for ax, table in zip(axes, tables):
        for label, points in topology_means(table, topology).items():
            ax.plot([k for k, _ in points], [v * scale for _, v in points], label=label, **look[label])
        _finish_axes(ax, table, table.kind)
    _legend(fig, axes)
    return fig


def save(fig: Figure, path: str, dpi: int = 150) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path

"""Per-run figures of peer selection (:mod:`~lightyear.experiments.selection`): who selected whom
(:func:`selection_heatmap`) and each peer's agreement score over rounds (:func:`score_plot`), a panel per selecting
site, faulty peers and sites marked in vermillion.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from lightyear.experiments.figures import FAULTY_COLOUR, OKABE_ITO
from lightyear.experiments.selection import Selection

NOT_SELECTED, SELECTED = "#E8E8E8", "#0072B2"
FAULTY_MARKERS = ["x", "+", "v", "^", "<", ">", "1", "2"]


def _grid(sel: Selection, title: str) -> tuple[Figure, list]:
    n = len(sel.sites)
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    width = max(2.6, 0.38 * len(sel.rounds) + 1.6)
    fig = Figure(figsize=(width * cols + 1.5, (0.32 * len(sel.peers) + 1.4) * rows + 0.7), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    fig.suptitle(title)
    return fig, axes[:n]


def _peer_label(sel: Selection, peer: str) -> str:
    return f"{peer} (faulty)" if peer in sel.faulty else peer


def _site_title(ax, sel: Selection, site: str, verb: str) -> None:
    faulty = site in sel.faulty
    ax.set_title(f"{site} (faulty) {verb}" if faulty else f"{site} {verb}", color=FAULTY_COLOUR if faulty else "black")


def selection_matrix(sel: Selection, site: str) -> np.ndarray:
    """Peers x rounds: 1 selected, 0 candidate not selected, nan no candidate."""
    return np.array([sel.selected[site][p] for p in sel.peers], dtype=float)


def selection_heatmap(sel: Selection) -> Figure:
    """Which site selected which peer in each round; faulty peers marked."""
    fig, axes = _grid(sel, f"{sel.run}: peers selected per round")
    cmap = ListedColormap([NOT_SELECTED, SELECTED]).with_extremes(bad="white")
    for ax, site in zip(axes, sel.sites):
        matrix = np.ma.masked_invalid(selection_matrix(sel, site))
        ax.imshow(matrix, cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
        _site_title(ax, sel, site, "selects")
        ax.set_xticks(range(len(sel.rounds)), [str(r) for r in sel.rounds])
        ax.set_yticks(range(len(sel.peers)), [_peer_label(sel, p) for p in sel.peers])
        for tick, peer in zip(ax.get_yticklabels(), sel.peers):
            if peer in sel.faulty:
                tick.set_color(FAULTY_COLOUR)
        ax.set_xticks(np.arange(-0.5, len(sel.rounds)), minor=True)
        ax.set_yticks(np.arange(-0.5, len(sel.peers)), minor=True)
        ax.grid(which="minor", color="white", linewidth=1.5)
        ax.tick_params(which="minor", length=0)
        ax.set_xlabel("round")
    fig.legend(
        handles=[
            Patch(color=SELECTED, label="selected"),
            Patch(color=NOT_SELECTED, label="scored, not selected"),
            Patch(facecolor="white", edgecolor="grey", label="no candidate"),
        ],
        loc="outside lower center",
        ncols=3,
    )
    return fig


def score_plot(sel: Selection, tau: float | None = None) -> Figure:
    """Each peer's agreement score over rounds, per selecting site; faulty peers dashed."""
    fig, axes = _grid(sel, f"{sel.run}: agreement scores over rounds")
    benign_peers = [p for p in sel.peers if p not in sel.faulty]
    colours = {p: OKABE_ITO[[0, 1, 2, 3, 5, 6, 7][i % 7]] for i, p in enumerate(benign_peers)}
    markers = {p: FAULTY_MARKERS[i % len(FAULTY_MARKERS)] for i, p in enumerate(sel.faulty)}
    for ax, site in zip(axes, sel.sites):
        for peer in sel.peers:
            values = sel.scores[site][peer]
            if peer == site or all(math.isnan(v) for v in values):
                continue
            faulty = peer in sel.faulty
            ax.plot(
                sel.rounds,
                values,
                marker=markers[peer] if faulty else "o",
                markersize=5,
                label=_peer_label(sel, peer),
                color=FAULTY_COLOUR if faulty else colours[peer],
                linestyle="--" if faulty else "-",
            )
        if tau is not None:
            ax.axhline(tau, color="grey", linestyle=":", linewidth=1)
        _site_title(ax, sel, site, "scores")
        ax.set_xlabel("round")
        ax.set_ylabel("agreement score")
        ax.set_ylim(-0.02, 1.02)
        ax.set_xticks(sel.rounds)
        ax.grid(True, alpha=0.3)
    handles = [Line2D([], [], color=colours[p], marker="o", label=p) for p in benign_peers]
    handles += [
        Line2D([], [], color=FAULTY_COLOUR, marker=markers[p], linestyle="--", label=_peer_label(sel, p))
        for p in sel.faulty
    ]
    if tau is not None:
        handles.append(Line2D([], [], color="grey", linestyle=":", label=f"tau = {tau}"))
    fig.legend(handles=handles, loc="outside right center", title="peer")
    return fig

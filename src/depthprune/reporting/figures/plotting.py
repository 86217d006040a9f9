"""Plotting helpers shared by Figures 1-3: seaborn calls in the project's look, the common legend.

The figures draw with seaborn's axes-level functions (``heatmap``, ``scatterplot``) on axes of a
bare matplotlib ``Figure`` (style.new_figure): no pyplot figure registry, no seaborn theme, so the
look is style.RC_PARAMS alone and files stay byte-identical from run to run (style.save_figure).
Colours encode the calibration and markers the algorithm, always through style's mappings.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from depthprune.evaluation_only import is_random_set
from depthprune.reporting.style import (
    COLUMN_WIDTH_IN,
    DENSE_MARKER,
    algorithm_marker,
    algorithm_name,
    calibration_colour,
    calibration_name,
    new_figure,
    note_panel,
    save_figure,
)

MARKER_SIZE = 22  # points², as matplotlib's scatter ``s``
LEGEND_MARKER_COLOUR = "#555555"  # markers in the legend are neutral: colour is the calibration's


def empty_figure(out_dir: str | Path, stem: str, text: str = "no search results") -> list[Path]:
    """A one-panel figure that says why there is nothing to plot (still both files, as usual)."""
    fig = new_figure(COLUMN_WIDTH_IN, 1.0)
    note_panel(fig.add_subplot(), text)
    return save_figure(fig, out_dir, stem)


def scatter_runs(
    ax,
    frame: pd.DataFrame,
    x: str,
    y: str,
    calibrations: list[str],
    algorithms: list[str],
    zorder: int = 3,
) -> None:
    """One point per row of ``frame``: colour = its ``calibration``, marker = its ``algorithm``.

    ``calibrations`` / ``algorithms`` are every level of the figure (not only this panel's), so a
    calibration or an algorithm has the same colour and marker in every panel.
    """
    present = frame["algorithm"].unique()
    sns.scatterplot(
        data=frame,
        x=x,
        y=y,
        hue="calibration",
        hue_order=calibrations,
        palette={c: calibration_colour(c, calibrations) for c in calibrations},
        style="algorithm",
        style_order=[a for a in algorithms if a in present] or None,
        markers={a: algorithm_marker(a) for a in present},
        s=MARKER_SIZE,
        edgecolor="white",
        linewidth=0.4,
        legend=False,
        zorder=zorder,
        ax=ax,
    )
    ax.set_xlabel("")  # seaborn labels the axes with the column names; the figures set their own
    ax.set_ylabel("")


def marker_legend(fig, algorithms: list[str], calibrations: list[str] = (), has_dense: bool = False) -> None:
    """One legend for the whole figure, below the panels: calibration colours, then algorithm markers."""
    handles = [
        Line2D(
            [], [], linestyle="", marker="o", color=calibration_colour(c, list(calibrations)), label=calibration_name(c)
        )
        for c in calibrations
    ]
    draws = [a for a in algorithms if is_random_set(a)]  # the random-set control: one entry for its draws
    named = [a for a in algorithms if not is_random_set(a)] + draws[:1]
    handles += [
        Line2D(
            [],
            [],
            linestyle="",
            marker=algorithm_marker(a),
            color=LEGEND_MARKER_COLOUR,
            label=f"Random sets ({len(draws)})" if is_random_set(a) else algorithm_name(a),
        )
        for a in named
    ]
    if has_dense:
        handles.append(Line2D([], [], linestyle="", marker=DENSE_MARKER, color="black", markersize=6, label="Dense"))
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncols=min(4, len(handles)),
        frameon=False,
        handletextpad=0.2,
        columnspacing=0.8,
    )

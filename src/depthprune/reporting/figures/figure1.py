"""Figure 1: which layers each algorithm removed.

One panel per (calibration, model, M): rows are the seven algorithms (the order of docs/method.md), columns the layers
(0-based), a filled cell is a removed layer, in the calibration's colour; with several seeds the
shade is the fraction of seeds that removed it. Panels are stacked by
calibration, then M (as the paper's (a)/(b) blocks with M = 7 above M = 9); models side by side.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import LinearSegmentedColormap

from depthprune.io import parse_layers
from depthprune.reporting.aggregate import DENSE_ALGORITHM
from depthprune.reporting.figures.plotting import empty_figure
from depthprune.reporting.style import (
    COLUMN_WIDTH_IN,
    EMPTY_CELL,
    NOTE_COLOUR,
    TEXT_WIDTH_IN,
    algorithm_name,
    calibration_colour,
    figure_style,
    new_figure,
    note_panel,
    ordered_algorithms,
    ordered_calibrations,
    panel_title,
    save_figure,
)

ROW_HEIGHT_IN = 0.16  # per algorithm row: 6 pt labels stay legible
PANEL_EXTRA_IN = 0.42  # title and tick labels


def removal_matrix(group: pd.DataFrame, algorithms: list[str], n_layers: int) -> np.ndarray:
    """algorithms × layers: how often the layer was removed across the seeds of ``group`` (1 removed,
    0 kept with one seed), NaN for an algorithm without a result."""
    sums = np.zeros((len(algorithms), n_layers))
    counts = np.zeros(len(algorithms))
    for algorithm, removed in zip(group["algorithm"], group["removed"]):
        i = algorithms.index(algorithm)
        sums[i, list(parse_layers(removed))] += 1.0
        counts[i] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts[:, None] > 0, sums / counts[:, None], np.nan)


def figure1(selections: pd.DataFrame, out_dir: str | Path, stem: str = "figure1") -> list[Path]:
    pruned = selections[selections["algorithm"] != DENSE_ALGORITHM]
    models = sorted(pruned["model"].unique())
    calibrations = ordered_calibrations(pruned["calibration"].unique())
    budgets = sorted(pruned["budget"].unique())
    algorithms = ordered_algorithms(pruned["algorithm"].unique())
    rows = [(cal, m) for cal in calibrations for m in budgets]
    with figure_style():
        if not rows:
            return empty_figure(out_dir, stem)
        width = COLUMN_WIDTH_IN if len(models) == 1 else TEXT_WIDTH_IN
        height = len(rows) * (len(algorithms) * ROW_HEIGHT_IN + PANEL_EXTRA_IN) + 0.2
        fig = new_figure(width, height)
        axes = fig.subplots(len(rows), len(models), squeeze=False)
        run = {(m, cal, int(b)) for m, cal, b in zip(pruned["model"], pruned["calibration"], pruned["budget"])}
        # Algorithm names label the first panel of each row that has data (not every panel: width).
        labelled = {row: next((m for m in models if (m, *row) in run), None) for row in rows}
        for c, model in enumerate(models):
            n_layers = int(selections.loc[selections["model"] == model, "n_layers"].max())
            for r, (calibration, budget) in enumerate(rows):
                ax = axes[r][c]
                ax.set_title(panel_title(model, budget, calibration), loc="left")
                group = pruned[
                    (pruned["model"] == model) & (pruned["calibration"] == calibration) & (pruned["budget"] == budget)
                ]
                if group.empty:
                    note_panel(ax, "not run")
                    continue
                _draw_panel(ax, removal_matrix(group, algorithms, n_layers), algorithms, calibration, calibrations)
                ax.tick_params(
                    axis="y",
                    left=labelled[(calibration, budget)] == model,
                    labelleft=labelled[(calibration, budget)] == model,
                )
                if r == len(rows) - 1:
                    ax.set_xlabel("layer (0-based)")
        return save_figure(fig, out_dir, stem)


def _draw_panel(ax, matrix: np.ndarray, algorithms: list[str], calibration: str, calibrations: list[str]) -> None:
    n_layers = matrix.shape[1]
    # Shade = fraction of seeds that removed the layer (exactly the two colours with one seed).
    cmap = LinearSegmentedColormap.from_list("removal", [EMPTY_CELL, calibration_colour(calibration, calibrations)])
    frame = pd.DataFrame(matrix, index=[algorithm_name(a) for a in algorithms], columns=range(n_layers))
    step = 5 if n_layers > 12 else 1
    sns.heatmap(
        frame,
        mask=frame.isna(),  # an algorithm without a result: no cells (and a note below)
        cmap=cmap,
        vmin=0,
        vmax=1,
        cbar=False,
        linewidths=0.4,
        linecolor="white",
        xticklabels=step,
        yticklabels=True,
        ax=ax,
    )
    for row in np.flatnonzero(np.isnan(matrix).all(axis=1)):
        ax.text(n_layers / 2, row + 0.5, "not run", ha="center", va="center", color=NOTE_COLOUR, fontsize=5)
    ax.tick_params(length=2, pad=1, labelrotation=0)
    ax.set_ylabel("")

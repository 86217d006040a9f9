"""Figure 2: the calibration trade-off, average perplexity (log scale) against average accuracy.

One panel per (model, M) (rows M, columns models); one point per (algorithm, calibration): colour
is the calibration, marker the algorithm. The dense model, when evaluated, is a black star. Thin
bars: 95 % paired document-bootstrap intervals of both averages (when per-document results exist).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.ticker import LogFormatterSciNotation, NullFormatter

from depthprune.reporting.aggregate import DENSE_ALGORITHM
from depthprune.reporting.figures.plotting import empty_figure, marker_legend, scatter_runs
from depthprune.reporting.style import (
    COLUMN_WIDTH_IN,
    DENSE_MARKER,
    NOTE_COLOUR,
    TEXT_WIDTH_IN,
    calibration_colour,
    figure_style,
    new_figure,
    note_panel,
    ordered_algorithms,
    ordered_calibrations,
    save_figure,
)

PANEL_HEIGHT_IN = 2.0
LEGEND_HEIGHT_IN = 0.7


def figure2(summary: pd.DataFrame, out_dir: str | Path, stem: str = "figure2") -> list[Path]:
    pruned = summary[summary["algorithm"] != DENSE_ALGORITHM]
    dense = summary[summary["algorithm"] == DENSE_ALGORITHM]
    models = sorted(pruned["model"].unique())
    budgets = sorted(pruned["budget"].unique())
    calibrations = ordered_calibrations(pruned["calibration"].unique())
    algorithms = [a for a in ordered_algorithms(pruned["algorithm"].unique()) if a in set(pruned["algorithm"])]
    with figure_style():
        if not models:
            return empty_figure(out_dir, stem)
        width = COLUMN_WIDTH_IN if len(models) == 1 else TEXT_WIDTH_IN
        fig = new_figure(width, len(budgets) * PANEL_HEIGHT_IN + LEGEND_HEIGHT_IN)
        axes = fig.subplots(len(budgets), len(models), squeeze=False)
        for c, model in enumerate(models):
            for r, budget in enumerate(budgets):
                ax = axes[r][c]
                ax.set_title(f"{model} (M={budget})", loc="left")
                cell = pruned[(pruned["model"] == model) & (pruned["budget"] == budget)]
                _draw_panel(ax, cell, dense[dense["model"] == model], calibrations, algorithms)
                if r == len(budgets) - 1:
                    ax.set_xlabel("average perplexity (log scale)")
                if c == 0:
                    ax.set_ylabel("average accuracy (%)")
        marker_legend(fig, algorithms, calibrations, has_dense=not dense.empty)
        return save_figure(fig, out_dir, stem)


def _draw_panel(ax, cell: pd.DataFrame, dense: pd.DataFrame, calibrations: list[str], algorithms: list[str]) -> None:
    valid = cell.dropna(subset=["avg_perplexity", "avg_accuracy"])
    valid = valid[valid["avg_perplexity"] > 0]
    if valid.empty:
        note_panel(ax, "no run with both averages" if not cell.empty else "not run")
        return
    valid = valid.assign(accuracy_pct=100 * valid["avg_accuracy"])
    for row in valid.itertuples(index=False):
        _error_bars(ax, row, calibration_colour(row.calibration, calibrations))
    scatter_runs(ax, valid, "avg_perplexity", "accuracy_pct", calibrations, algorithms)
    dense = dense.dropna(subset=["avg_perplexity", "avg_accuracy"])
    if not dense.empty:
        sns.scatterplot(
            x=dense["avg_perplexity"],
            y=100 * dense["avg_accuracy"],
            marker=DENSE_MARKER,
            color="black",
            s=40,
            edgecolor="black",
            linewidth=0.4,
            zorder=4,
            ax=ax,
        )
        ax.set_xlabel("")
        ax.set_ylabel("")
    ax.set_xscale("log")
    # Narrow ranges (within one decade) get crowded minor-tick labels; keep readable plain numbers.
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(LogFormatterSciNotation(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    ax.grid(True, which="major", linewidth=0.3, alpha=0.5)
    missing = len(cell) - len(valid)
    if missing:
        ax.text(
            0.99,
            0.02,
            f"{missing} run(s) without both averages",
            ha="right",
            va="bottom",
            transform=ax.transAxes,
            color=NOTE_COLOUR,
            fontsize=5,
        )


def _error_bars(ax, row, colour) -> None:
    """95 % bootstrap intervals (when the aggregate has per-document results) as thin error bars.

    matplotlib's errorbar, not seaborn's: seaborn's axes-level functions compute their own intervals
    from raw observations, while these are paired document-bootstrap intervals computed beforehand
    (reporting/statistics/bootstrap.py, docs/method.md §7).
    """
    acc = (getattr(row, "avg_acc_ci_low", float("nan")), getattr(row, "avg_acc_ci_high", float("nan")))
    ppl = (getattr(row, "avg_ppl_ci_low", float("nan")), getattr(row, "avg_ppl_ci_high", float("nan")))
    yerr = xerr = None
    if not any(pd.isna(v) for v in acc):
        y = 100 * row.avg_accuracy
        yerr = [[max(0.0, y - 100 * acc[0])], [max(0.0, 100 * acc[1] - y)]]
    if not any(pd.isna(v) for v in ppl) and ppl[0] > 0:
        xerr = [[max(0.0, row.avg_perplexity - ppl[0])], [max(0.0, ppl[1] - row.avg_perplexity)]]
    if yerr is not None or xerr is not None:
        ax.errorbar(
            row.avg_perplexity,
            100 * row.avg_accuracy,
            yerr=yerr,
            xerr=xerr,
            fmt="none",
            ecolor=colour,
            elinewidth=0.5,
            alpha=0.6,
            capsize=0,
            zorder=2,
        )

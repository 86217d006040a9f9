"""Figure 3: rank agreement of average perplexity and average accuracy across the algorithms.

One block of panels per calibration (the paper's blocks (a) TLM and (b) perplexity pruning, and any
further calibration), one panel per (model, M), at most three to a row (the text width; more wrap
onto the block's next row, so titles never overlap). A panel plots each algorithm's perplexity rank
against its accuracy rank (1 = lowest value, ties averaged, as Spearman's ρ does) and reports
ρ = spearmanr(avg perplexity, avg accuracy) with its p-value, n and (when per-document results
exist) its 95 % paired document-bootstrap interval. A negative ρ means the algorithms with lower
perplexity reach higher accuracy (the rankings agree); a positive ρ means they disagree.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from scipy.stats import rankdata

from depthprune.reporting.aggregate import DENSE_ALGORITHM
from depthprune.reporting.figures.plotting import empty_figure, marker_legend, scatter_runs
from depthprune.reporting.style import (
    COLUMN_WIDTH_IN,
    NOTE_COLOUR,
    TEXT_WIDTH_IN,
    calibration_name,
    figure_style,
    new_figure,
    note_panel,
    ordered_algorithms,
    ordered_calibrations,
    save_figure,
)

PANEL_IN = 1.8  # wide enough for a panel's title line "ρ = −1.00 (p < 0.01, n = 7)" at 7 pt
MAX_COLUMNS = int(TEXT_WIDTH_IN // PANEL_IN)  # more (model, M) cells wrap onto further rows


def figure3(summary: pd.DataFrame, spearman: pd.DataFrame, out_dir: str | Path, stem: str = "figure3") -> list[Path]:
    pruned = summary[summary["algorithm"] != DENSE_ALGORITHM]
    calibrations = ordered_calibrations(pruned["calibration"].unique())
    cells = sorted({(m, int(b)) for m, b in zip(pruned["model"], pruned["budget"])})
    algorithms = [a for a in ordered_algorithms(pruned["algorithm"].unique()) if a in set(pruned["algorithm"])]
    with figure_style():
        if not cells:
            return empty_figure(out_dir, stem)
        columns = min(len(cells), MAX_COLUMNS)
        rows_per_calibration = -(-len(cells) // columns)
        n_rows = rows_per_calibration * len(calibrations)
        fig = new_figure(max(COLUMN_WIDTH_IN, PANEL_IN * columns), (PANEL_IN + 0.15) * n_rows + 0.6)
        axes = fig.subplots(n_rows, columns, squeeze=False)
        for r, calibration in enumerate(calibrations):
            for i in range(len(cells), rows_per_calibration * columns):  # the block's last row, past its cells
                axes[r * rows_per_calibration + i // columns][i % columns].set_axis_off()
            for i, (model, budget) in enumerate(cells):
                row, c = r * rows_per_calibration + i // columns, i % columns
                ax = axes[row][c]
                ax.set_title(f"{calibration_name(calibration)}\n{model} (M={budget})", loc="left")
                group = pruned[
                    (pruned["model"] == model) & (pruned["budget"] == budget) & (pruned["calibration"] == calibration)
                ]
                stat = spearman[
                    (spearman["model"] == model)
                    & (spearman["budget"] == budget)
                    & (spearman["calibration"] == calibration)
                ]
                _draw_panel(ax, group, stat, calibrations, algorithms)
                if r == len(calibrations) - 1 and i + columns >= len(cells):  # no panel below
                    ax.set_xlabel("perplexity rank")
                if c == 0:
                    ax.set_ylabel("accuracy rank")
        fig.text(0.0, 0.0, "ranks: 1 = lowest value", fontsize=5, color=NOTE_COLOUR, ha="left", va="bottom")
        marker_legend(fig, algorithms)
        return save_figure(fig, out_dir, stem)


def _draw_panel(ax, group: pd.DataFrame, stat: pd.DataFrame, calibrations: list[str], algorithms: list[str]) -> None:
    valid = group.dropna(subset=["avg_perplexity", "avg_accuracy"])
    if group.empty:
        note_panel(ax, "not run")
        return
    if len(valid) < 3 or stat.empty or pd.isna(stat["rho"].iloc[0]):
        reason = stat["note"].iloc[0] if not stat.empty and stat["note"].iloc[0] else f"n = {len(valid)}"
        note_panel(ax, f"ρ undefined\n({reason})")
        return
    ranks = valid.assign(
        perplexity_rank=rankdata(valid["avg_perplexity"]), accuracy_rank=rankdata(valid["avg_accuracy"])
    )
    scatter_runs(ax, ranks, "perplexity_rank", "accuracy_rank", calibrations, algorithms)
    n = len(valid)
    ax.set_xlim(0.4, n + 0.6)
    ax.set_ylim(0.4, n + 0.6)
    ax.set_xticks(range(1, n + 1))
    ax.set_yticks(range(1, n + 1))
    ax.set_aspect("equal")
    ax.grid(True, linewidth=0.3, alpha=0.5)
    # ρ goes into the title: inside the axes it would cover the points of a negative correlation.
    row = stat.iloc[0]
    p_text = "p < 0.01" if row["p_value"] < 0.01 else f"p = {row['p_value']:.2f}"
    rho_text = f"{row['rho']:+.2f}".replace("-", "−")  # a typographic minus, as in the paper
    ci_text = ""
    if "rho_ci_low" in row and not pd.isna(row["rho_ci_low"]):
        lo, hi = (f"{v:+.2f}".replace("-", "−") for v in (row["rho_ci_low"], row["rho_ci_high"]))
        ci_text = f"\n95% CI [{lo}, {hi}]"
    ax.set_title(f"{ax.get_title(loc='left')}\nρ = {rho_text} ({p_text}, n = {int(row['n'])}){ci_text}", loc="left")

"""The cross-seed figure (docs/method.md §10): per claim and M, each seed's estimate with its document
interval, and the two-stage interval (seeds, then documents) of their mean.

One panel per statistic of ``tables/seeds_two_stage.csv``; in a panel one row per (model, M,
condition): the seeds as coloured dots with thin bars, the two-stage mean as a black diamond with a
thick bar; a grey line where the claim is decided.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from depthprune.reporting.figures.plotting import empty_figure
from depthprune.reporting.statistics.two_stage import (
    ACCURACY_RATIO,
    ALGORITHM_SPREAD,
    CALIBRATION_SHIFT,
    GAP,
    TWO_STAGE,
)
from depthprune.reporting.style import EXTRA_COLOURS, OKABE_ITO, TEXT_WIDTH_IN, figure_style, new_figure, save_figure

# Where each statistic's claim is decided: 0 for a difference, one order of magnitude for the §5.2
# perplexity conditions, ratio 1 for the accuracy shift ratio (its band is drawn around it).
REFERENCE = {CALIBRATION_SHIFT: 1.0, ALGORITHM_SPREAD: 1.0, ACCURACY_RATIO: 1.0}
PANEL_ORDER = (GAP, ACCURACY_RATIO, ALGORITHM_SPREAD, CALIBRATION_SHIFT)
SEED_COLOURS = (OKABE_ITO["blue"], OKABE_ITO["vermillion"], OKABE_ITO["bluish_green"], *EXTRA_COLOURS)
ROW_HEIGHT_IN = 0.45
MIN_HEIGHT_IN = 1.6


def _row_label(model: str, budget, condition, several_models: bool) -> str:
    if model == "all":
        return "max over cells"
    label = f"{model} M={budget}" if several_models else f"M={budget}"
    return f"{label} {condition}" if isinstance(condition, str) and condition else label


def figure_seeds(table: pd.DataFrame, out_dir: str | Path, stem: str = "seeds") -> list[Path]:
    with figure_style():
        if table.empty:
            return empty_figure(out_dir, stem, "fewer than two seeds")
        table = table.assign(condition=table["condition"].fillna("") if "condition" in table else "")
        present = list(dict.fromkeys(table["statistic"]))
        statistics = [s for s in PANEL_ORDER if s in present] + [s for s in present if s not in PANEL_ORDER]
        rows_of = {
            statistic: sorted(
                table.loc[table["statistic"] == statistic, ["model", "budget", "condition"]]
                .drop_duplicates()
                .itertuples(index=False, name=None),
                key=lambda c: (c[0] == "all", c[0], c[1], c[2]),
            )
            for statistic in statistics
        }
        several_models = len({m for m in table["model"] if m != "all"}) > 1
        tallest = max(len(rows) for rows in rows_of.values())
        fig = new_figure(TEXT_WIDTH_IN, max(MIN_HEIGHT_IN, ROW_HEIGHT_IN * tallest + 0.9))
        axes = fig.subplots(1, len(statistics), squeeze=False)[0]
        seeds = sorted(int(s) for s in table["seed"].unique() if s != TWO_STAGE)
        for ax, statistic in zip(axes, statistics):
            rows = table[table["statistic"] == statistic]
            ax.axvline(REFERENCE.get(statistic, 0.0), color="#999999", linewidth=0.6, zorder=0)
            for y, (model, budget, condition) in enumerate(rows_of[statistic]):
                cell = rows[(rows["model"] == model) & (rows["budget"] == budget) & (rows["condition"] == condition)]
                for k, seed in enumerate(seeds):
                    row = cell[cell["seed"] == str(seed)]
                    if row.empty:
                        continue
                    r = row.iloc[0]
                    offset = y + 0.12 + 0.28 * k / max(len(seeds) - 1, 1)
                    colour = SEED_COLOURS[k % len(SEED_COLOURS)]
                    ax.plot([r["ci_low"], r["ci_high"]], [offset, offset], color=colour, linewidth=0.8)
                    ax.scatter(
                        [r["estimate"]],
                        [offset],
                        color=colour,
                        s=10,
                        zorder=3,
                        label=f"seed {seed}" if y == 0 else None,
                    )
                pooled = cell[cell["seed"] == TWO_STAGE]
                if not pooled.empty:
                    p = pooled.iloc[0]
                    ax.plot([p["ci_low"], p["ci_high"]], [y - 0.15, y - 0.15], color="black", linewidth=2.0)
                    label = f"two-stage ({int(p['n_seeds'])} seeds)" if y == 0 else None
                    ax.scatter([p["estimate"]], [y - 0.15], color="black", marker="D", s=14, zorder=3, label=label)
            labels = [_row_label(m, b, c, several_models) for m, b, c in rows_of[statistic]]
            ax.set_yticks(np.arange(len(labels)), labels, fontsize="x-small")
            ax.set_ylim(tallest - 0.5, -0.7)  # rows equally spaced in every panel, from the top
            ax.set_xlabel(textwrap.fill(statistic, 30), fontsize="x-small")
        axes[0].legend(loc="best", frameon=False, fontsize="x-small")
        return save_figure(fig, out_dir, stem)

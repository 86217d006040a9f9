"""The calibration-size study's figure (``calibration_size.{pdf,png}``): per model, the seeds' agreement,
held-out loss, accuracy and perplexity against the calibration size, one line per algorithm.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from depthprune.reporting.statistics.calibration_size import NAME, STABLE_JACCARD
from depthprune.reporting.style import (
    algorithm_marker,
    algorithm_name,
    calibration_name,
    figure_style,
    new_figure,
    note_panel,
    ordered_algorithms,
    save_figure,
)

# (value, bar low, bar high, y label, log scale); the held-out loss row only when the study has one.
PANELS = [
    ("jaccard_mean", "jaccard_lo", "jaccard_hi", "Jaccard across seeds", False),
    ("heldout_loss_mean", "heldout_loss_min", "heldout_loss_max", "held-out loss", False),
    ("avg_accuracy_mean", "avg_accuracy_min", "avg_accuracy_max", "avg. accuracy (%)", False),
    ("avg_perplexity_geomean", "avg_perplexity_min", "avg_perplexity_max", "perplexity", True),
]


def draw(table: pd.DataFrame, dense: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """One column per (model, calibration, M), one row per statistic; x: size; a line per algorithm;
    bars: the Jaccard's bootstrap interval over draws, else the range over seeds; grey band: the
    central 95 % of random sets' Jaccard; dotted line: the dense model."""
    keys = (
        list(table[["model", "calibration", "budget"]].drop_duplicates().itertuples(index=False))
        if not table.empty
        else []
    )
    panels = [p for p in PANELS if p[0] == "jaccard_mean" or (p[0] in table and table[p[0]].notna().any())]
    with figure_style():
        fig = new_figure(max(3.2, 2.6 * max(1, len(keys))), 2.2 * len(panels))
        axes = fig.subplots(len(panels), max(1, len(keys)), squeeze=False)
        if not keys:
            for ax in axes[:, 0]:
                note_panel(ax, "no calibration-size results")
        for c, (model, calibration, budget) in enumerate(keys):
            panel = table[
                (table["model"] == model) & (table["calibration"] == calibration) & (table["budget"] == budget)
            ]
            sizes = list(dict.fromkeys(panel["size"]))
            x_of = {size: i for i, size in enumerate(sizes)}
            for r, (col, lo, hi, label, log_scale) in enumerate(panels):
                ax = axes[r, c]
                scale = 100.0 if col.startswith("avg_accuracy") else 1.0
                for algorithm in ordered_algorithms(panel["algorithm"].unique()):
                    rows = panel[panel["algorithm"] == algorithm]
                    if rows.empty:
                        continue
                    x = [x_of[s] for s in rows["size"]]
                    y = rows[col].to_numpy(dtype=float) * scale
                    ax.plot(x, y, marker=algorithm_marker(algorithm), label=algorithm_name(algorithm))
                    low = rows[lo].to_numpy(dtype=float) * scale
                    high = rows[hi].to_numpy(dtype=float) * scale
                    ax.vlines(x, low, high, alpha=0.5, color=ax.lines[-1].get_color())
                if col == "jaccard_mean":
                    null = panel.drop_duplicates("size")
                    x = [x_of[s] for s in null["size"]]
                    ax.fill_between(
                        x,
                        null["jaccard_random_lo"].to_numpy(dtype=float),
                        null["jaccard_random_hi"].to_numpy(dtype=float),
                        color="0.85",
                        label="random sets (95 %)",
                    )
                    ax.axhline(STABLE_JACCARD, linestyle="--", color="0.6", linewidth=0.8)
                    ax.set_ylim(-0.05, 1.05)
                    ax.set_title(f"{model} · {calibration_name(calibration)} · M={budget}")
                reference = dense[dense["model"] == model]
                dense_column = {"avg_accuracy_mean": "avg_accuracy", "avg_perplexity_geomean": _dense_perplexity(panel)}
                if col in dense_column and not reference.empty and dense_column[col] in reference:
                    value = reference.iloc[0][dense_column[col]]
                    if pd.notna(value):
                        ax.axhline(float(value) * scale, linestyle=":", color="0.4", label="dense")
                if log_scale:
                    ax.set_yscale("log")
                ax.set_xticks(range(len(sizes)), sizes, rotation=30)
                if c == 0 or col == "heldout_loss_mean":  # held-out losses are in each objective's units
                    ax.set_ylabel(label if col != "avg_perplexity_geomean" else _perplexity_label(panel))
                if r == len(panels) - 1:
                    ax.set_xlabel("calibration size (items, or docs x tokens)")
        if keys:
            legend = {}  # label -> handle, over every panel (panels may hold different algorithms)
            for ax in axes.flat:
                for handle, label in zip(*ax.get_legend_handles_labels()):
                    legend.setdefault(label, handle)
            fig.legend(legend.values(), legend.keys(), loc="outside lower center", ncols=min(6, len(legend)))
        return save_figure(fig, out_dir, NAME)


def _perplexity_label(panel: pd.DataFrame) -> str:
    column = _dense_perplexity(panel)
    return "avg. perplexity" if column == "avg_perplexity" else f"{column.removeprefix('ppl_')} perplexity"


def _dense_perplexity(panel: pd.DataFrame) -> str:
    """The summary column of the perplexity the panel shows (avg_perplexity or ppl_<benchmark>)."""
    source = panel["perplexity_of"].iloc[0] if "perplexity_of" in panel and len(panel) else "average"
    return "avg_perplexity" if source == "average" else f"ppl_{source}"

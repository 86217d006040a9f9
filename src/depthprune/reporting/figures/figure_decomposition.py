"""The cross-control figure: the data and the objective step of the calibration effect, per M.

Two panels: average zero-shot accuracy (points) and log10 average perplexity (orders of magnitude).
In each, per M, the mean over the algorithms of the data step (ppl_cs170k − ppl_c4), the objective
step (tlm_cs170k − ppl_cs170k) and their sum, the total (tlm_cs170k − ppl_c4), with 95 % paired
document-bootstrap intervals (``decomposition.decomposition_table``). Filled markers: the interval
excludes zero (the step moves the response); open markers: it does not.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from depthprune.reporting.figures.plotting import empty_figure
from depthprune.reporting.style import OKABE_ITO, TEXT_WIDTH_IN, figure_style, new_figure, save_figure
from depthprune.reporting.verdicts.decomposition import HOLDS, MEAN_OVER_ALGORITHMS, STEPS

STEP_LABELS = {"data": "data\nC4 → CS170k", "objective": "objective\nppl → TLM", "total": "total"}
PANELS = {"avg_accuracy": "average accuracy (points)", "log10_avg_perplexity": "log10 average perplexity"}
BUDGET_COLOURS = (OKABE_ITO["blue"], OKABE_ITO["vermillion"], OKABE_ITO["bluish_green"], OKABE_ITO["orange"])
HEIGHT_IN = 2.3


def figure_decomposition(table: pd.DataFrame, out_dir: str | Path, stem: str = "decomposition") -> list[Path]:
    means = table[(table["algorithm"] == MEAN_OVER_ALGORITHMS) & table["effect"].isin(list(STEPS))]
    with figure_style():
        if means.empty:
            return empty_figure(out_dir, stem)
        keys = sorted(means[["model", "budget"]].drop_duplicates().itertuples(index=False, name=None))
        fig = new_figure(TEXT_WIDTH_IN, HEIGHT_IN)
        axes = fig.subplots(1, len(PANELS), squeeze=False)[0]
        steps = list(STEPS)
        width = 0.7 / max(len(keys), 1)
        for ax, (response, label) in zip(axes, PANELS.items()):
            ax.axhline(0.0, color="#999999", linewidth=0.6, zorder=0)
            for k, (model, budget) in enumerate(keys):
                colour = BUDGET_COLOURS[k % len(BUDGET_COLOURS)]
                rows = means[(means["model"] == model) & (means["budget"] == budget) & (means["response"] == response)]
                rows = rows.set_index("effect").reindex(steps)
                x = np.arange(len(steps)) + (k - (len(keys) - 1) / 2) * width
                est = rows["estimate"].to_numpy(float)
                err = np.vstack([est - rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float) - est])
                ax.errorbar(x, est, yerr=err, fmt="none", ecolor=colour, elinewidth=1.0, capsize=2)
                filled = (rows["verdict"] == HOLDS).to_numpy()
                name = f"{model} M={budget}" if len({m for m, _ in keys}) > 1 else f"M={budget}"
                ax.scatter(x[filled], est[filled], color=colour, s=18, zorder=3, label=name)
                ax.scatter(x[~filled], est[~filled], facecolor="white", edgecolor=colour, s=18, zorder=3)
            ax.set_xticks(np.arange(len(steps)), [STEP_LABELS[s] for s in steps])
            ax.set_ylabel(label)
        axes[0].legend(loc="best", frameon=False)
        return save_figure(fig, out_dir, stem)

"""Whether the paper's three observations hold in our numbers, stated from the analyses.

1. §5.1 Calibration reshapes the pruned sets: for a (model, M) cell, sets found by different
   algorithms under one calibration agree more (mean Jaccard, "within") than the sets one algorithm
   finds under different calibrations ("across", same algorithm).
2. §5.2 Calibration dominates perplexity but not accuracy: the calibration main effect explains more
   of the variance of log10 average perplexity than the search algorithm does, but not more of the
   variance of average accuracy.
3. §5.3 Perplexity-accuracy misalignment: Spearman ρ(avg perplexity, avg accuracy) across the
   algorithms is negative or weak (ρ < WEAK_RHO) under perplexity pruning and positive under TLM.

Each is checked per (model, M) (or per (model, M, calibration) for 3): "holds" when every cell
agrees, "partly holds" when some do, "does not hold" when none do, "not testable" without data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from depthprune.reporting.aggregate import load_aggregate
from depthprune.reporting.analysis import pairwise_jaccard, spearman_table, variance_decomposition
from depthprune.reporting.style import calibration_name

WEAK_RHO = 0.3  # |ρ| below this counts as "weak"; the paper's perplexity-pruning maximum was +0.11


def _num(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:.2f}"


@dataclass
class Observation:
    key: str
    claim: str
    criterion: str
    cells: pd.DataFrame  # one row per cell, with a boolean "holds" column
    summary: str  # pooled numbers in one sentence

    @property
    def verdict(self) -> str:
        flags = self.cells["holds"].dropna().astype(bool) if not self.cells.empty else pd.Series(dtype=bool)
        if flags.empty:
            return "not testable"
        if flags.all():
            return "holds"
        return "partly holds" if flags.any() else "does not hold"

    @property
    def count(self) -> str:
        flags = self.cells["holds"].dropna() if not self.cells.empty else pd.Series(dtype=bool)
        return f"{int(flags.astype(bool).sum())} of {len(flags)} cells"


def observe_calibration_reshapes_sets(pairs: pd.DataFrame) -> Observation:
    rows = []
    for (model, budget), cell in pairs.groupby(["model", "budget"], sort=True):
        within = cell.loc[cell["relation"] == "within", "jaccard"]
        across = cell.loc[cell["relation"] == "across_same_algorithm", "jaccard"]
        testable = len(within) > 0 and len(across) > 0
        rows.append({
            "model": model, "budget": budget, "within_mean_jaccard": within.mean() if len(within) else np.nan,
            "across_mean_jaccard": across.mean() if len(across) else np.nan,
            "holds": (within.mean() > across.mean()) if testable else None,
        })  # fmt: skip
    cells = pd.DataFrame(rows, columns=["model", "budget", "within_mean_jaccard", "across_mean_jaccard", "holds"])
    within_all = pairs.loc[pairs["relation"] == "within", "jaccard"].mean()
    across_all = pairs.loc[pairs["relation"] == "across_same_algorithm", "jaccard"].mean()
    return Observation(
        key="5.1",
        claim="Calibration reshapes the pruned layer sets (Figure 1, Table 5).",
        criterion="mean Jaccard of different algorithms under one calibration > mean Jaccard of one algorithm across calibrations",
        cells=cells,
        summary=f"pooled within-calibration Jaccard {_num(within_all)} vs across-calibration (same algorithm) {_num(across_all)}",
    )


def observe_variance_shares(decomposition: pd.DataFrame) -> Observation:
    rows = []
    full = decomposition[decomposition["calibration_set"] == "all"]
    for (model, budget), cell in full.groupby(["model", "budget"], sort=True):
        ppl = cell[cell["response"] == "log10_avg_perplexity"].iloc[0]
        acc = cell[cell["response"] == "avg_accuracy"].iloc[0]
        values = [ppl["share_calibration"], ppl["share_algorithm"], acc["share_calibration"], acc["share_algorithm"]]
        testable = not any(pd.isna(v) for v in values)
        rows.append({
            "model": model, "budget": budget, "calibrations": ppl["calibrations"],
            "ppl_share_calibration": values[0], "ppl_share_algorithm": values[1],
            "acc_share_calibration": values[2], "acc_share_algorithm": values[3],
            "holds": (values[0] > values[1] and values[2] <= values[3]) if testable else None,
        })  # fmt: skip
    columns = ["model", "budget", "calibrations", "ppl_share_calibration", "ppl_share_algorithm",
               "acc_share_calibration", "acc_share_algorithm", "holds"]  # fmt: skip
    cells = pd.DataFrame(rows, columns=columns)
    summary = (
        "mean shares over cells: log10 perplexity calibration "
        f"{_num(cells['ppl_share_calibration'].mean())} vs algorithm {_num(cells['ppl_share_algorithm'].mean())}; "
        f"accuracy calibration {_num(cells['acc_share_calibration'].mean())} vs algorithm "
        f"{_num(cells['acc_share_algorithm'].mean())}"
    )
    return Observation(
        key="5.2",
        claim="Calibration explains more perplexity variance than the search does, but not more accuracy variance (Tables 1-3, Figure 2).",
        criterion="SS share of calibration > share of algorithm for log10 avg perplexity, and <= for avg accuracy (two-way decomposition, all calibrations)",
        cells=cells,
        summary=summary,
    )


def observe_misalignment(spearman: pd.DataFrame) -> Observation:
    frame = spearman[spearman["calibration_kind"].isin(["ppl", "tlm"])].copy()

    def holds(row) -> bool | None:
        if pd.isna(row["rho"]):
            return None
        return bool(row["rho"] < WEAK_RHO) if row["calibration_kind"] == "ppl" else bool(row["rho"] > 0)

    frame["holds"] = [holds(r) for _, r in frame.iterrows()] if not frame.empty else []
    parts = []
    for kind, label in (("ppl", "perplexity pruning"), ("tlm", "TLM pruning")):
        rho = frame.loc[frame["calibration_kind"] == kind, "rho"].dropna()
        if len(rho):
            parts.append(
                f"{label}: median ρ {rho.median():+.2f} (range {rho.min():+.2f} to {rho.max():+.2f}, {len(rho)} cells)"
            )
    return Observation(
        key="5.3",
        claim="Perplexity and accuracy rankings are negatively or weakly correlated under perplexity pruning, positively under TLM pruning (Figure 3).",
        criterion=f"Spearman ρ(avg perplexity, avg accuracy) < {WEAK_RHO} for ppl* calibrations and > 0 for tlm* calibrations",
        cells=frame[["model", "budget", "calibration", "n", "rho", "p_value", "holds"]].reset_index(drop=True),
        summary="; ".join(parts) or "no Spearman ρ could be computed",
    )


def evaluate_observations(selections: pd.DataFrame, summary: pd.DataFrame) -> list[Observation]:
    return [
        observe_calibration_reshapes_sets(pairwise_jaccard(selections)),
        observe_variance_shares(variance_decomposition(summary)),
        observe_misalignment(spearman_table(summary)),
    ]


def observations_frame(observations: list[Observation]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"observation": o.key, "claim": o.claim, "criterion": o.criterion, "verdict": o.verdict,
          "cells": o.count, "evidence": o.summary} for o in observations]  # fmt: skip
    )


def observations_markdown(observations: list[Observation]) -> str:
    lines = [
        "# The paper's observations in these results",
        "",
        "Computed by `depthprune render` from `results/aggregate/` (see figures/tables/*.csv for the analyses).",
        "",
    ]
    for obs in observations:
        lines += [
            f"## §{obs.key} {obs.claim}",
            "",
            f"- Criterion: {obs.criterion}.",
            f"- Verdict: **{obs.verdict}** ({obs.count}).",
            f"- Numbers: {obs.summary}.",
            "",
        ]
        if not obs.cells.empty:
            lines += [_markdown_cells(obs.cells), ""]
    return "\n".join(lines).rstrip() + "\n"


def _markdown_cells(cells: pd.DataFrame) -> str:
    shown = cells.copy()
    if "calibration" in shown:
        shown["calibration"] = shown["calibration"].map(calibration_name)
    for col in shown.columns:
        if shown[col].dtype.kind == "f":
            shown[col] = shown[col].map(lambda v: "–" if pd.isna(v) else f"{v:.2f}")
    shown["holds"] = shown["holds"].map(lambda v: "n/a" if v is None or pd.isna(v) else ("yes" if v else "no"))
    header = "| " + " | ".join(shown.columns) + " |"
    rule = "| " + " | ".join("---" for _ in shown.columns) + " |"
    body = ["| " + " | ".join(str(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def summarise_observations(aggregate_dir: str | Path) -> str:
    """Markdown stating, from the aggregated numbers, whether each of the paper's observations holds."""
    agg = load_aggregate(aggregate_dir, tables=("selections", "summary"))
    return observations_markdown(evaluate_observations(agg.selections, agg.summary))

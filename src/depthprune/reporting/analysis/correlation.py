"""Spearman correlations over the algorithms of a cell: ρ between average perplexity and average
accuracy (``spearman_table``; Figure 3, §5.3), and ρ between each set's calibration loss (and
held-out loss) and its average accuracy (``loss_accuracy_table``): does a lower search loss buy a
better pruned model? Intervals from the paired document bootstrap when per-document results exist.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy import stats

from depthprune.reporting.aggregate import DENSE_ALGORITHM, calibration_kind
from depthprune.reporting.analysis.frames import sort_frame


def spearman_table(summary: pd.DataFrame, reps=None) -> pd.DataFrame:
    """Spearman ρ (and p-value) between avg perplexity and avg accuracy across algorithms, per cell.

    ρ is computed on the raw values, as the paper's Figure 3 (docs/method.md §7): a NEGATIVE ρ means
    that lower perplexity goes with higher accuracy (the two rankings agree: alignment); a positive
    ρ means the algorithms with lower perplexity reach lower accuracy (misalignment). Averages are
    rounded (aggregate.TIE_DECIMALS) so equal accuracies tie. Algorithms with a missing average are
    left out (``n`` says how many were used); with fewer than three points, or a constant column, ρ
    is NaN. With bootstrap replicates (``reps``), ``rho_ci_low``/``rho_ci_high`` is the 95 % interval.
    """
    from depthprune.reporting.statistics.bootstrap import interval_mc, spearman_rows

    rows = []
    pruned = sort_frame(summary[summary["algorithm"] != DENSE_ALGORITHM])
    for (model, budget, calibration), group in pruned.groupby(["model", "budget", "calibration"], sort=False):
        valid = group.dropna(subset=["avg_perplexity", "avg_accuracy"])
        rho, p_value, note = _spearman(valid["avg_perplexity"].to_numpy(), valid["avg_accuracy"].to_numpy())
        lo = hi = se_lo = se_hi = float("nan")
        if reps is not None and len(valid) >= 3:
            lo, hi, se_lo, se_hi = interval_mc(
                spearman_rows(reps.aligned(valid, "avg_perplexity"), reps.aligned(valid, "avg_accuracy"))
            )
        # Algorithms that remove the same layers are one model: ρ rests on the distinct sets only.
        distinct = int(valid["removed"].nunique()) if "removed" in valid.columns else len(valid)
        rows.append(
            {
                "model": model,
                "budget": budget,
                "calibration": calibration,
                "calibration_kind": calibration_kind(calibration),
                "n": len(valid),
                "n_algorithms": len(group),
                "n_distinct_sets": distinct,
                "rho": rho,
                "rho_ci_low": lo,
                "rho_ci_high": hi,
                "rho_ci_low_mc_se": se_lo,
                "rho_ci_high_mc_se": se_hi,
                "p_value": p_value,
                "note": note,
            }
        )
    columns = [
        "model",
        "budget",
        "calibration",
        "calibration_kind",
        "n",
        "n_algorithms",
        "n_distinct_sets",
        "rho",
        "rho_ci_low",
        "rho_ci_high",
        "rho_ci_low_mc_se",
        "rho_ci_high_mc_se",
        "p_value",
        "note",
    ]
    return pd.DataFrame(rows, columns=columns)


LOSS_KINDS = {"calibration": "loss", "heldout": "heldout_loss"}


def loss_accuracy_table(summary: pd.DataFrame, reps=None) -> pd.DataFrame:
    """Spearman ρ between the search loss of each algorithm's set and its average accuracy, per
    (model, M, calibration), for the calibration loss the search minimised and, where the study
    scored a held-out draw (``heldout_loss``), the held-out loss (docs/method.md §7).

    A negative ρ is what a search objective should give: a lower loss goes with a higher accuracy.
    A positive ρ means the searches that lowered the loss most made the worse models. The loss is
    fixed per set; the interval resamples the evaluation documents (accuracy) only. Losses of
    different calibrations are on different scales, so there is no pooled row.
    """
    from depthprune.reporting.statistics.bootstrap import interval_mc, spearman_rows

    columns = ["model", "budget", "calibration", "loss_kind", "n", "n_distinct_sets"]
    columns += ["rho", "rho_ci_low", "rho_ci_high", "p_value", "note"]
    rows = []
    pruned = sort_frame(summary[summary["algorithm"] != DENSE_ALGORITHM])
    kinds = {kind: column for kind, column in LOSS_KINDS.items() if column in pruned.columns}
    for (model, budget, calibration), group in pruned.groupby(["model", "budget", "calibration"], sort=False):
        for kind, column in kinds.items():
            valid = group.dropna(subset=[column, "avg_accuracy"])
            loss = valid[column].to_numpy(dtype=float)
            rho, p_value, note = _spearman(loss, valid["avg_accuracy"].to_numpy(dtype=float))
            lo = hi = float("nan")
            if reps is not None and len(valid) >= 3 and np.ptp(loss) > 0:
                accuracy = reps.aligned(valid, "avg_accuracy")
                lo, hi, _, _ = interval_mc(spearman_rows(np.broadcast_to(loss, accuracy.shape), accuracy))
            distinct = int(valid["removed"].nunique()) if "removed" in valid.columns else len(valid)
            values = (model, budget, calibration, kind, len(valid), distinct, rho, lo, hi, p_value, note)
            rows.append(dict(zip(columns, values, strict=True)))
    return pd.DataFrame(rows, columns=columns)


def _spearman(x: np.ndarray, y: np.ndarray) -> tuple[float, float, str]:
    if len(x) < 3:
        return float("nan"), float("nan"), f"only {len(x)} algorithms with both averages"
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan"), "constant averages"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns about small n; n = 7 is the paper's design
        result = stats.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue), ""

"""TLM-pruned against perplexity-pruned models, and against chance or the task baseline, per
(model, M, algorithm) and averaged over the algorithms (``calibration_contrast``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from depthprune.reporting.aggregate import DENSE_ALGORITHM, TIE_DECIMALS, calibration_kind
from depthprune.reporting.statistics.baselines import chance_accuracy
from depthprune.reporting.style import PAPER_CALIBRATIONS, algorithm_sort_key

MEAN_OVER_ALGORITHMS = "mean of the algorithms"


def _side(lo: float, hi: float, above: str, below: str, level: str) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    return above if lo > 0 else below if hi < 0 else level


def calibration_contrast(
    summary: pd.DataFrame, reps=None, baseline: float | None = None, chance: float | None = None
) -> pd.DataFrame:
    """TLM-pruned against perplexity-pruned models and against chance, per (model, M, algorithm).

    For every algorithm run under both of the paper's calibrations: the average accuracy of its
    TLM-pruned and its perplexity-pruned model, their difference (TLM minus perplexity) and the
    TLM-pruned model's margin over chance (``chance_accuracy``), each with its 95 % paired-bootstrap
    interval (the same resampled documents for both models). One more row per (model, M) averages
    the algorithms. ``tlm_vs_ppl`` and ``tlm_vs_chance`` say which side of zero the interval lies on;
    ``diff_se`` is the difference's paired bootstrap SE and ``mdd`` the difference it detects with 80 %
    power (``bootstrap.mdd``). ``baseline`` (``baselines.average_baseline``: the larger of chance
    and the majority answer, per task) gives ``tlm_minus_baseline`` and ``tlm_vs_baseline`` the same
    way; without it the baseline is chance. ``chance`` replaces the six tasks' chance level (an
    average over other tasks, such as the informative tasks of ``reporting/statistics/informative.py``).
    """
    from depthprune.reporting.statistics.bootstrap import interval, mdd, standard_error

    columns = [
        "model",
        "budget",
        "algorithm",
        "acc_perplexity_pruned",
        "acc_tlm_pruned",
        "diff_tlm_minus_ppl",
        "diff_ci_low",
        "diff_ci_high",
        "diff_se",
        "mdd",
        "tlm_vs_ppl",
        "chance",
        "tlm_minus_chance",
        "tlm_minus_chance_ci_low",
        "tlm_minus_chance_ci_high",
        "tlm_vs_chance",
        "baseline",
        "tlm_minus_baseline",
        "tlm_minus_baseline_ci_low",
        "tlm_minus_baseline_ci_high",
        "tlm_vs_baseline",
    ]
    pairs = paper_pairs(summary)
    chance = chance_accuracy() if chance is None else float(chance)
    floor = chance if baseline is None else max(chance, float(baseline))
    rows = []
    for (model, budget), cell in pairs.groupby(["model", "budget"], sort=True):
        cell = cell.sort_values("algorithm", key=lambda s: s.map(algorithm_sort_key), kind="stable")
        acc_ppl, acc_tlm = cell["avg_accuracy_ppl"].to_numpy(float), cell["avg_accuracy_tlm"].to_numpy(float)
        rep_ppl, rep_tlm = paired_replicates(cell, reps)
        names = list(cell["algorithm"]) + [MEAN_OVER_ALGORITHMS]
        observed = [(acc_ppl[j], acc_tlm[j], rep_ppl[:, j], rep_tlm[:, j]) for j in range(len(cell))]
        observed.append((acc_ppl.mean(), acc_tlm.mean(), rep_ppl.mean(axis=1), rep_tlm.mean(axis=1)))
        for name, (a_ppl, a_tlm, r_ppl, r_tlm) in zip(names, observed):
            d_lo, d_hi = interval(r_tlm - r_ppl)
            c_lo, c_hi = interval(r_tlm - chance)
            b_lo, b_hi = interval(r_tlm - floor)
            rows.append(
                {
                    "model": model,
                    "budget": budget,
                    "algorithm": name,
                    "acc_perplexity_pruned": a_ppl,
                    "acc_tlm_pruned": a_tlm,
                    "diff_tlm_minus_ppl": a_tlm - a_ppl,
                    "diff_ci_low": d_lo,
                    "diff_ci_high": d_hi,
                    "diff_se": standard_error(r_tlm - r_ppl),
                    "mdd": mdd(standard_error(r_tlm - r_ppl)),
                    "tlm_vs_ppl": _side(d_lo, d_hi, "higher", "lower", "level"),
                    "chance": chance,
                    "tlm_minus_chance": a_tlm - chance,
                    "tlm_minus_chance_ci_low": c_lo,
                    "tlm_minus_chance_ci_high": c_hi,
                    "tlm_vs_chance": _side(c_lo, c_hi, "above", "below", "at chance"),
                    "baseline": floor,
                    # to the summary's 9 decimals: the baseline can equal an accuracy (both k/696),
                    # and their difference must then be 0 on every CPU, not a 1e-10 residue
                    "tlm_minus_baseline": round(a_tlm - floor, TIE_DECIMALS),
                    "tlm_minus_baseline_ci_low": b_lo,
                    "tlm_minus_baseline_ci_high": b_hi,
                    "tlm_vs_baseline": _side(b_lo, b_hi, "above", "below", "at baseline"),
                }
            )
    return pd.DataFrame(rows, columns=columns)


def paper_pairs(summary: pd.DataFrame) -> pd.DataFrame:
    """Each algorithm's perplexity-pruned and TLM-pruned run under the paper's two calibrations, one
    row per (model, M, algorithm) run under both (columns suffixed ``_ppl`` and ``_tlm``)."""
    kinds = summary["calibration"].map(calibration_kind)
    paper = summary["calibration"].isin(PAPER_CALIBRATIONS) & (summary["algorithm"] != DENSE_ALGORITHM)
    ppl, tlm = summary[paper & (kinds == "ppl")], summary[paper & (kinds == "tlm")]
    return ppl.merge(tlm, on=["model", "budget", "algorithm"], suffixes=("_ppl", "_tlm"))


def paired_replicates(cell: pd.DataFrame, reps, response: str = "avg_accuracy") -> tuple[np.ndarray, np.ndarray]:
    """Document replicates of ``response`` for the rows of ``cell`` (rows of ``paper_pairs``):
    (perplexity-pruned, TLM-pruned), each (B, rows); one NaN row without replicates."""
    if reps is None:
        empty = np.full((1, len(cell)), np.nan)
        return empty, empty
    runs = {
        suffix: cell[["model", "budget", "algorithm"]].assign(calibration=cell[f"calibration_{suffix}"])
        for suffix in ("ppl", "tlm")
    }
    return reps.aligned(runs["ppl"], response), reps.aligned(runs["tlm"], response)

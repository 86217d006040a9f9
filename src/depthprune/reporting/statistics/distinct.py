"""§5.3 on distinct removed sets: Spearman ρ with an exact permutation p-value.

Two algorithms that remove the same layers produce one pruned model: the same perplexity and the
same accuracy. Counting it twice gives that model twice the weight in ρ and makes scipy's p-value
assume more independent points than there are. Here a set found by several algorithms counts once
(``distinct_sets``), and ρ's p-value is exact under exchangeability: every assignment of the
accuracies to the distinct sets is equally likely when perplexity and accuracy are unrelated, so
the two-sided p is the share of the n! assignments whose |ρ| is at least the observed |ρ|
(enumerated when n! ≤ EXACT_LIMIT, 40,320 = 8!; otherwise MONTE_CARLO_DRAWS seeded random
permutations, (1 + hits) / (1 + draws)). ``null_distribution`` returns all n! values of ρ, which
the claim-level pass probabilities of observations.py use (docs/method.md §7, "Distinct sets").
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from depthprune.reporting.aggregate import DENSE_ALGORITHM, TIE_DECIMALS, calibration_kind

EXACT_LIMIT = 40_320  # 8!: enumerate every permutation up to eight distinct sets
MONTE_CARLO_DRAWS = 100_000
PERMUTATION_SEED = 20_260_501
CELL = ["model", "budget", "calibration"]
COLUMNS = [
    "model",
    "budget",
    "calibration",
    "calibration_kind",
    "n_algorithms",
    "n_distinct_sets",
    "rho",
    "p_value",
    "p_method",
    "sets",
]


def distinct_sets(group: pd.DataFrame, x: str = "avg_perplexity", y: str = "avg_accuracy") -> pd.DataFrame:
    """One row per distinct removed set of ``group`` (rows with both ``x`` and ``y``): the mean of
    ``x`` and ``y`` over the algorithms that found it (equal for one set; the mean guards against
    last-digit differences) and ``algorithms``, their names joined by '+'."""
    valid = group.dropna(subset=[x, y])
    if "removed" not in valid.columns:  # no sets recorded: every algorithm counts as its own set
        valid = valid.assign(removed=valid["algorithm"])
    if valid.empty:
        return pd.DataFrame(columns=["removed", x, y, "algorithms"])
    out = (
        valid.groupby("removed", sort=False)
        .agg(**{x: (x, "mean"), y: (y, "mean"), "algorithms": ("algorithm", "+".join)})
        .reset_index()
    )
    return out


def _rho(rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    """Pearson correlation of rank vectors, ry (k, n) against rx (n,)."""
    cx = rx - rx.mean()
    cy = ry - ry.mean(axis=-1, keepdims=True)
    denom = np.sqrt((cx**2).sum() * (cy**2).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (cy * cx).sum(axis=-1) / denom, np.nan)


@lru_cache(maxsize=16)
def _permutations(n: int) -> np.ndarray:
    return np.array(list(itertools.permutations(range(n))), dtype=np.int64)


def null_distribution(x, y) -> np.ndarray:
    """ρ of every permutation of ``y`` against ``x`` (n! values; Monte-Carlo draws above EXACT_LIMIT)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rx, ry = rankdata(x), rankdata(np.round(y, TIE_DECIMALS))
    n = len(x)
    if math.factorial(n) <= EXACT_LIMIT:
        order = _permutations(n)
    else:
        rng = np.random.default_rng([PERMUTATION_SEED, n])
        order = rng.random((MONTE_CARLO_DRAWS, n)).argsort(axis=1)
    return _rho(rx, ry[order])


def spearman_rho(x, y) -> float:
    """ρ alone: NaN below three points or for a constant variable; ties take average ranks
    (accuracies rounded to TIE_DECIMALS first, as everywhere in the reports)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(np.round(y, TIE_DECIMALS)) == 0:
        return float("nan")
    return float(_rho(rankdata(x), rankdata(np.round(y, TIE_DECIMALS))[None])[0])


def spearman_exact(x, y) -> tuple[float, float, str]:
    """(ρ, two-sided permutation p, "exact (n! permutations)" or "Monte Carlo (draws)").

    NaN below three points or for a constant variable. Ties take average ranks (accuracies rounded
    to TIE_DECIMALS first, as everywhere in the reports)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = len(x)
    rho = spearman_rho(x, y)
    if np.isnan(rho):
        return float("nan"), float("nan"), ""
    null = null_distribution(x, y)
    hits = int((np.abs(null) >= abs(rho) - 1e-12).sum())
    if math.factorial(n) <= EXACT_LIMIT:
        return rho, hits / len(null), f"exact ({len(null)} permutations)"
    return rho, (1 + hits) / (1 + len(null)), f"Monte Carlo ({len(null)} permutations)"


def distinct_spearman_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (model, M, calibration): ρ(avg perplexity, avg accuracy) over the distinct removed sets,
    their number beside the number of algorithms, and the permutation p-value."""
    from depthprune.reporting.analysis.frames import sort_frame

    rows = []
    pruned = sort_frame(summary[summary["algorithm"] != DENSE_ALGORITHM])
    for (model, budget, calibration), group in pruned.groupby(CELL, sort=False):
        sets = distinct_sets(group)
        rho, p_value, method = spearman_exact(sets["avg_perplexity"], sets["avg_accuracy"])
        rows.append(
            {
                "model": model,
                "budget": budget,
                "calibration": calibration,
                "calibration_kind": calibration_kind(calibration),
                "n_algorithms": len(group),
                "n_distinct_sets": len(sets),
                "rho": rho,
                "p_value": p_value,
                "p_method": method,
                "sets": "; ".join(sets["algorithms"]),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)

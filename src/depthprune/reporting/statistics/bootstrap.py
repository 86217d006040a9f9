"""Paired bootstrap over documents, and the paper's §5 statistics on a (replicate × run) array.

The bootstrap (docs/method.md §7) resamples, per benchmark, the documents (lm-eval ``doc_id``) and
the perplexity windows with replacement, ``n_resamples`` times, from a seeded generator. The same
resampled documents are used for every model (run), so differences between runs, ranks and every
statistic of the calibration × algorithm grid are computed on paired replicates. Each replicate
gives every run an average accuracy (mean of the six headline task accuracies) and an average
perplexity (mean of the three perplexities, each exp(ΣNLL / Σtokens) over its resampled windows).

Every statistic here takes arrays whose leading axis is the replicate: the point estimate is the
same function applied to the observed values (one "replicate"), and the 95 % interval is the 2.5th
and 97.5th percentile over the bootstrap replicates (percentile bootstrap).
"""

from __future__ import annotations

import logging
import warnings
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from depthprune.errors import InputError
from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS, ZERO_SHOT_BENCHMARKS
from depthprune.memory import DEFAULT_RESAMPLES, check_resamples_fit
from depthprune.reporting.aggregate import KEY, TIE_DECIMALS

log = logging.getLogger(__name__)

DEFAULT_SEED = 0
CONFIDENCE = 0.95
# An interval end closer to a decision boundary than MC_GUARD Monte-Carlo standard errors (or equal to
# it up to BOUNDARY_TOLERANCE, relative: a discrete statistic whose replicates pile on the boundary)
# is not resolved by the bootstrap: the verdict that depends on it is inconclusive.
MC_GUARD = 2.0
BOUNDARY_TOLERANCE = 1e-6
# z_{0.975} + z_{0.80}: a paired difference of (this × its standard error) is detected by a two-sided
# 5 % test with 80 % power (normal approximation).
MDD_FACTOR = 1.959963984540054 + 0.8416212335729143


@dataclass
class Replicates:
    """Bootstrap replicates of each run's averages: arrays (n_resamples, n_runs), runs as ``keys``."""

    keys: pd.DataFrame  # KEY columns, one row per run (column order of the arrays)
    avg_accuracy: np.ndarray
    avg_perplexity: np.ndarray
    n_resamples: int
    seed: int
    units: dict[str, int] | None = None  # benchmark -> resampled documents / windows
    # benchmark -> (n_resamples, n_runs) replicates of that benchmark alone (NaN where a run lacks it)
    per_benchmark: dict[str, np.ndarray] | None = None
    # (n_resamples, n_runs) mean over each run's model's informative tasks (reporting/statistics/informative.py)
    informative_avg_accuracy: np.ndarray | None = None

    def column(self, row: pd.Series | dict) -> int | None:
        match = np.flatnonzero(np.logical_and.reduce([self.keys[k].to_numpy() == row[k] for k in KEY]))
        return int(match[0]) if len(match) else None

    def aligned(self, frame: pd.DataFrame, name: str) -> np.ndarray:
        """Replicates of ``name`` for the rows of ``frame`` (NaN columns for runs without samples)."""
        source = getattr(self, name)
        out = np.full((self.n_resamples, len(frame)), np.nan)
        for j, (_, row) in enumerate(frame.iterrows()):
            col = self.column(row)
            if col is not None:
                out[:, j] = source[:, col]
        return out


def _weights(n_units: int, n_resamples: int, seed: int, benchmark: str) -> np.ndarray:
    """How often each unit is drawn in each replicate, (n_resamples, n_units); one stream per benchmark."""
    rng = np.random.default_rng([seed, zlib.crc32(benchmark.encode())])
    draws = rng.integers(0, n_units, size=(n_resamples, n_units))
    flat = (draws + n_units * np.arange(n_resamples)[:, None]).ravel()
    return np.bincount(flat, minlength=n_resamples * n_units).reshape(n_resamples, n_units).astype(float)


def document_replicates(
    samples: pd.DataFrame, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> Replicates | None:
    """Replicates of every run's average accuracy and perplexity; None without per-document results."""
    if n_resamples < 1:
        raise InputError(f"bootstrap_resamples must be at least 1, got {n_resamples}")
    if samples is None or samples.empty:
        return None
    head = samples[samples["headline"].astype(bool)]
    keys = head[KEY].drop_duplicates().sort_values(KEY, kind="stable").reset_index(drop=True)
    documents = int(head.groupby("benchmark")["unit"].nunique().max())
    check_resamples_fit(n_resamples, documents, len(keys), option="bootstrap_resamples")
    run_index = {tuple(r): i for i, r in enumerate(keys.itertuples(index=False))}
    per_benchmark: dict[str, np.ndarray] = {}
    units = head.groupby("benchmark")["unit"].nunique().astype(int).to_dict()
    for benchmark, group in head.groupby("benchmark", sort=True):
        runs = [run_index[tuple(r)] for r in group[KEY].itertuples(index=False)]
        group = group.assign(_run=runs)
        if benchmark in PERPLEXITY_BENCHMARKS and not (group["metric"] == "nll_sum").any():
            # LAMBADA through lm-eval: each document's "perplexity" value is its continuation's
            # log-likelihood, and lm-eval's perplexity is exp(-mean) of those (docs/method.md §7).
            loglik = group.pivot(index="_run", columns="unit", values="value")
            w = _weights(loglik.shape[1], n_resamples, seed, benchmark)
            values = np.exp(-(loglik.to_numpy() @ w.T) / loglik.shape[1])
            index = loglik.index
        elif benchmark in PERPLEXITY_BENCHMARKS:
            nll = group[group["metric"] == "nll_sum"].pivot(index="_run", columns="unit", values="value")
            tok = group[group["metric"] == "n_tokens"].pivot(index="_run", columns="unit", values="value")
            w = _weights(nll.shape[1], n_resamples, seed, benchmark)
            values = np.exp((nll.to_numpy() @ w.T) / (tok.to_numpy() @ w.T))  # (runs, B); NaN if a run lacks a unit
            index = nll.index
        else:
            scores = group.pivot(index="_run", columns="unit", values="value")
            w = _weights(scores.shape[1], n_resamples, seed, benchmark)
            values = (scores.to_numpy() @ w.T) / scores.shape[1]
            index = scores.index
        full = np.full((len(keys), n_resamples), np.nan)
        full[index.to_numpy()] = values
        per_benchmark[benchmark] = full
    # the tasks the study evaluated, as the summary's avg_accuracy (aggregate.evaluated_accuracy_tasks)
    evaluated = [b for b in ZERO_SHOT_BENCHMARKS if b in per_benchmark]
    acc = _average(per_benchmark, evaluated, len(keys), n_resamples)
    ppl = _average(per_benchmark, list(PERPLEXITY_BENCHMARKS), len(keys), n_resamples)
    return Replicates(
        keys=keys,
        avg_accuracy=acc,
        avg_perplexity=ppl,
        n_resamples=n_resamples,
        seed=seed,
        units=units,
        per_benchmark={benchmark: values.T for benchmark, values in per_benchmark.items()},
    )


def _average(per_benchmark: dict, benchmarks: list[str], n_runs: int, n_resamples: int) -> np.ndarray:
    """(B, runs) mean over ``benchmarks``; NaN where one is missing (as the summary's averages)."""
    if not benchmarks or not all(b in per_benchmark for b in benchmarks):
        return np.full((n_resamples, n_runs), np.nan)
    stacked = np.stack([per_benchmark[b] for b in benchmarks])  # (k, runs, B)
    return np.round(stacked.mean(axis=0).T, TIE_DECIMALS)


def interval(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile interval of replicates along axis 0 (NaN replicates ignored; all NaN -> NaN)."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return float("nan"), float("nan")
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(finite, [tail, 100 - tail])
    return float(lo), float(hi)


def interval_mc(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """Percentile interval (lo, hi) and the Monte-Carlo standard error of each end (se_lo, se_hi).

    With B finite replicates the count below the true q-quantile is Binomial(B, q), of standard
    deviation s = sqrt(B q (1 − q)); the order statistics s ranks either side of the estimate span
    about ±1 standard error of it, so se = (percentile(q + s/B) − percentile(q − s/B)) / 2.
    """
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (float("nan"),) * 4
    tail = (1 - confidence) / 2
    step = np.sqrt(tail * (1 - tail) / finite.size)
    levels = np.clip([tail, 1 - tail, tail - step, tail + step, 1 - tail - step, 1 - tail + step], 0, 1)
    lo, hi, lo_m, lo_p, hi_m, hi_p = np.percentile(finite, 100 * levels)
    return float(lo), float(hi), float((lo_p - lo_m) / 2), float((hi_p - hi_m) / 2)


def resolved(end: float, se: float, boundary: float) -> bool:
    """Whether an interval end lies clearly on one side of ``boundary``: farther from it than
    MC_GUARD Monte-Carlo standard errors and than BOUNDARY_TOLERANCE (relative)."""
    if not np.isfinite(se):
        se = 0.0
    margin = max(MC_GUARD * se, BOUNDARY_TOLERANCE * max(1.0, abs(boundary)))
    return abs(end - boundary) > margin


def standard_error(values: np.ndarray) -> float:
    """Bootstrap standard error: standard deviation of the finite replicates (NaN below two)."""
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    return float(finite.std(ddof=1)) if finite.size >= 2 else float("nan")


def mdd(se: float) -> float:
    """Minimal detectable difference at 80 % power, two-sided α = 0.05: (z_0.975 + z_0.8) · SE."""
    return MDD_FACTOR * se


# --------------------------------------------------------------------------- statistics on replicates


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman ρ of each row pair of (B, n) arrays: Pearson correlation of average ranks (ties tie).

    NaN for a row with fewer than three points or a constant variable.
    """
    x, y = np.atleast_2d(x), np.atleast_2d(y)
    out = np.full(x.shape[0], np.nan)
    if x.shape[1] < 3:
        return out
    ok = np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1)
    if not ok.any():
        return out
    rx = rankdata(x[ok], axis=1) - (x.shape[1] + 1) / 2
    ry = rankdata(y[ok], axis=1) - (x.shape[1] + 1) / 2
    denom = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out[ok] = np.where(denom > 0, (rx * ry).sum(axis=1) / denom, np.nan)
    return out


def range_shifts(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The paper's §5.2 statistic on a (B, algorithms, calibrations) grid.

    calibration shift: the largest |change| of the value when only the calibration changes (same
    algorithm): max over algorithms of (max − min over calibrations); algorithm shift: the largest
    change when only the algorithm changes (same calibration): max over calibrations of
    (max − min over algorithms). Both shape (B,).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN replicate rows give NaN
        cal = np.nanmax(np.nanmax(grid, axis=2) - np.nanmin(grid, axis=2), axis=1)
        alg = np.nanmax(np.nanmax(grid, axis=1) - np.nanmin(grid, axis=1), axis=1)
    return cal, alg


def two_way(grid: np.ndarray) -> dict[str, np.ndarray]:
    """Two-way decomposition of a (B, A algorithms, C calibrations) grid, one run per cell.

    SS_total = SS_calibration (df C−1) + SS_algorithm (df A−1) + SS_interaction (df (A−1)(C−1)).
    With one run per cell the interaction is also the residual: it cannot be told from noise
    without replicates (seeds). Shares are of SS_total; mean squares are SS/df.
    """
    _, a, c = grid.shape
    grand = grid.mean(axis=(1, 2))[:, None, None]
    cal_means = grid.mean(axis=1, keepdims=True)
    alg_means = grid.mean(axis=2, keepdims=True)
    ss_total = ((grid - grand) ** 2).sum(axis=(1, 2))
    ss_cal = a * ((cal_means - grand) ** 2).sum(axis=(1, 2))
    ss_alg = c * ((alg_means - grand) ** 2).sum(axis=(1, 2))
    ss_int = ((grid - cal_means - alg_means + grand) ** 2).sum(axis=(1, 2))
    df_cal, df_alg, df_int = c - 1, a - 1, (a - 1) * (c - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "ss_total": ss_total,
            "share_calibration": ss_cal / ss_total,
            "share_algorithm": ss_alg / ss_total,
            "share_interaction": ss_int / ss_total,
            "ms_calibration": ss_cal / df_cal if df_cal else np.full_like(ss_cal, np.nan),
            "ms_algorithm": ss_alg / df_alg if df_alg else np.full_like(ss_alg, np.nan),
            "ms_interaction": ss_int / df_int if df_int else np.full_like(ss_int, np.nan),
            "df_calibration": np.full_like(ss_cal, df_cal),
            "df_algorithm": np.full_like(ss_cal, df_alg),
            "df_interaction": np.full_like(ss_cal, df_int),
        }

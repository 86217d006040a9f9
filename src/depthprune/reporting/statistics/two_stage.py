"""Two-stage intervals across seeds for a crossed design: seeds, and documents shared by every seed.

docs/method.md §10. Every seed is evaluated on the same documents, and every seed's paired document
bootstrap (``bootstrap.document_replicates``, one bootstrap seed and the same documents) draws the
same resample in its replicate b. A seed's document error is therefore correlated with every other
seed's: replicate b of each seed is read together, never drawn independently per seed.

Model, per seed s: estimate_s = μ + a_s + e_s, a_s the seed effect (variance σ²_seed), e_s the
document error, whose replicates e_s^b = rep_s[b] − mean_b rep_s are shared across seeds through b.
Components (method of moments):

- document variance: the mean over seeds of Var_b(rep_s) (one seed's document variance);
- document covariance: the mean over pairs of seeds of Cov_b(rep_s, rep_t) (the shared part);
- seed variance: the variance (ddof 1) of the S estimates less the document variance that does not
  cancel between seeds (document variance − document covariance), floored at zero;
- standard error of the mean over seeds: sqrt(σ²_seed / S + Var_b(mean_s rep_s)).

The interval is t-based: mean ± t_{0.975, ν} · SE, ν by Welch–Satterthwaite from the seed stage's
S − 1 degrees of freedom (the document stage, thousands of replicates of ~100 documents per task, is
treated as known). A percentile bootstrap over S = 4 seeds cannot reach past the four estimates and
is too narrow by about sqrt((S − 1) / S); the t interval has neither defect. One seed: the seed's
percentile document interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from depthprune.reporting.statistics.bootstrap import CONFIDENCE, interval

TWO_STAGE_SEED = 20_261_205  # the pooled seed stage's generator: fixed, as the nulls' (nulls.NULL_SEED)


@dataclass(frozen=True)
class TwoStage:
    estimate: float  # mean over seeds of the per-seed estimate
    ci_low: float
    ci_high: float
    document_variance: float  # one seed's document variance (mean over seeds)
    seed_variance: float
    n_seeds: int
    seeds_below: int  # seeds whose document interval lies below zero
    seeds_above: int  # ... above zero
    document_covariance: float = float("nan")  # between two seeds' document errors (shared documents)
    standard_error: float = float("nan")  # of the mean over seeds
    degrees_of_freedom: float = float("nan")  # of the t quantile


def shared_replicates(replicates: Mapping[int, np.ndarray], seeds: list[int]) -> np.ndarray:
    """(B, S) document replicates of ``seeds``, column s = seed s; replicate b is the same document
    resample in every column, so the replicates of every seed must have the same length. Replicates
    non-finite in any seed are dropped for all."""
    arrays = [np.asarray(replicates[s], dtype=float).ravel() for s in seeds]
    lengths = {a.size for a in arrays}
    if len(lengths) != 1:
        raise ValueError(
            f"two-stage interval: the seeds' document replicates differ in number ({sorted(lengths)}); "
            "every seed must be bootstrapped with the same resamples of the same documents"
        )
    stacked = np.stack(arrays, axis=1)
    return stacked[np.isfinite(stacked).all(axis=1)]


def two_stage(
    observed: Mapping[int, float],
    replicates: Mapping[int, np.ndarray],
    confidence: float = CONFIDENCE,
) -> TwoStage:
    """The crossed two-stage interval and variance components of a statistic observed at each seed.

    ``observed[s]`` is seed s's estimate, ``replicates[s]`` its document-bootstrap replicates (1-D,
    index b = the same document resample in every seed: ``shared_replicates``).
    """
    seeds = sorted(s for s in observed if np.isfinite(observed[s]))
    if not seeds:
        nan = float("nan")
        return TwoStage(nan, nan, nan, nan, nan, 0, 0, 0)
    estimates = np.array([observed[s] for s in seeds], dtype=float)
    reps = shared_replicates(replicates, seeds)
    if reps.shape[0] == 0:  # no usable replicate: the estimates alone (document variance unknown: 0)
        reps = estimates[None, :]
    tail = (1 - confidence) / 2
    below = int((np.quantile(reps, 1 - tail, axis=0) < 0).sum())  # each seed's percentile interval
    above = int((np.quantile(reps, tail, axis=0) > 0).sum())
    S = len(seeds)
    if reps.shape[0] > 1:
        covariance = np.atleast_2d(np.cov(reps, rowvar=False, ddof=1))
        document_variance = float(np.mean(np.diag(covariance)))
        off = covariance[~np.eye(S, dtype=bool)]
        document_covariance = float(off.mean()) if off.size else float("nan")
        mean_document_variance = float(reps.mean(axis=1).var(ddof=1))
    else:
        document_variance = document_covariance = mean_document_variance = 0.0
    if S == 1:
        lo, hi = interval(reps[:, 0], confidence) if reps.shape[0] > 1 else (estimates[0], estimates[0])
        return TwoStage(
            estimate=float(estimates[0]),
            ci_low=float(lo),
            ci_high=float(hi),
            document_variance=document_variance,
            seed_variance=float("nan"),
            n_seeds=1,
            seeds_below=below,
            seeds_above=above,
            document_covariance=float("nan"),
            standard_error=float(np.sqrt(mean_document_variance)),
            degrees_of_freedom=float("inf"),
        )
    spread = float(estimates.var(ddof=1))
    # Document error that differs between seeds inflates their spread; the shared part does not.
    seed_variance = max(spread - (document_variance - document_covariance), 0.0)
    se2 = seed_variance / S + mean_document_variance
    seed_part = spread / S
    dof = float(se2**2 / (seed_part**2 / (S - 1))) if seed_part > 0 else float("inf")
    half = float(student_t.ppf(1 - tail, dof)) * np.sqrt(se2)
    estimate = float(estimates.mean())
    return TwoStage(
        estimate=estimate,
        ci_low=estimate - half,
        ci_high=estimate + half,
        document_variance=document_variance,
        seed_variance=seed_variance,
        n_seeds=S,
        seeds_below=below,
        seeds_above=above,
        document_covariance=document_covariance,
        standard_error=float(np.sqrt(se2)),
        degrees_of_freedom=dof,
    )


def two_stage_pooled(
    cells: Mapping[int, tuple[np.ndarray, np.ndarray]],
    reduce=np.median,
    n_resamples: int = 10_000,
    seed: int = TWO_STAGE_SEED,
    confidence: float = CONFIDENCE,
) -> tuple[float, float, float]:
    """(estimate, ci_low, ci_high) of a statistic pooled over every seed's cells (§10's median ρ over
    the 2 × S (M, seed) cells). ``cells[s]`` = (observed (k,), document replicates (B, k)) of seed
    s's k cells, B the same document resamples in every seed. A replicate draws S seeds with
    replacement and ONE document replicate b shared by the drawn seeds (the documents are shared),
    and reduces the drawn seeds' cells together. The pooled statistic is not a mean over seeds, so
    its interval is t-based on the replicates' spread: estimate ± t_{0.975, S−1} · sd · sqrt(S/(S−1))
    (a bootstrap over S seeds estimates the seed variance with ddof 0); one seed: percentile.
    ``reduce`` takes an ``axis`` argument (np.median, np.mean)."""
    seeds = sorted(s for s in cells if np.size(cells[s][0]))
    if not seeds:
        nan = float("nan")
        return nan, nan, nan
    estimate = float(reduce(np.concatenate([np.asarray(cells[s][0], dtype=float) for s in seeds])))
    reps = [np.atleast_2d(np.asarray(cells[s][1], dtype=float)) for s in seeds]
    n_documents = {r.shape[0] for r in reps}
    if len(n_documents) != 1:
        raise ValueError(
            f"pooled two-stage interval: the seeds' document replicates differ in number ({sorted(n_documents)})"
        )
    B = n_documents.pop()
    S = len(seeds)
    rng = np.random.default_rng([seed, S, 2])
    drawn = rng.integers(0, S, size=(n_resamples, S))
    document = rng.integers(0, B, size=n_resamples)
    with np.errstate(all="ignore"):
        if len({r.shape[1] for r in reps}) == 1 and all(np.isfinite(r).all() for r in reps):
            # Every seed has as many cells, all finite: the replicates' pooled cells form one
            # (n_resamples, S·k) matrix, in the order of the loop below, reduced row by row at once.
            pooled = np.stack(reps)[drawn, document[:, None]].reshape(n_resamples, -1)
            values = np.asarray(reduce(pooled, axis=1), dtype=float)
        else:
            values = np.empty(n_resamples)
            for b in range(n_resamples):
                pooled = np.concatenate([reps[k][document[b]] for k in drawn[b]])
                pooled = pooled[np.isfinite(pooled)]
                values[b] = reduce(pooled) if pooled.size else np.nan
    finite = values[np.isfinite(values)]
    if S == 1 or finite.size < 2:
        lo, hi = interval(values, confidence)
        return estimate, lo, hi
    half = float(student_t.ppf(1 - (1 - confidence) / 2, S - 1)) * finite.std(ddof=1) * np.sqrt(S / (S - 1))
    return estimate, estimate - half, estimate + half


# --------------------------------------------------------------------------- the cross-seed table

SEEDS_COLUMNS = [
    "model",
    "budget",
    "statistic",
    "condition",
    "n_seeds",
    "seed",
    "estimate",
    "ci_low",
    "ci_high",
    "document_variance",
    "document_covariance",
    "seed_variance",
    "standard_error",
    "degrees_of_freedom",
    "seeds_below",
    "seeds_above",
    "null_pass_probability",
    "null_fail_probability",
    "direction",
    "verdict",
]
TWO_STAGE = "two-stage"
GAP = "TLM − perplexity, mean of the algorithms (points)"
# §5.2 as the paper words it, per condition (verdicts/paper_shifts.py), and its pooled accuracy ratio
CALIBRATION_SHIFT = "calibration shift of avg perplexity (orders; claim: ≥ 1)"
ALGORITHM_SPREAD = "algorithm spread of avg perplexity (orders; claim: < 1)"
ACCURACY_RATIO = "accuracy shift ratio calibration / algorithm, max over cells"


def gap_replicates(summary, reps) -> dict[tuple, tuple[float, np.ndarray]]:
    """Per (model, M, GAP, ""): the mean over the algorithms run under both of the paper's
    calibrations of TLM-pruned minus perplexity-pruned average accuracy (points), and its document
    replicates."""
    from depthprune.reporting.analysis.contrast import paired_replicates, paper_pairs

    out = {}
    for (model, budget), cell in paper_pairs(summary).groupby(["model", "budget"], sort=True):
        observed = float((cell["avg_accuracy_tlm"] - cell["avg_accuracy_ppl"]).mean()) * 100
        if reps is None:
            out[(model, int(budget), GAP, "")] = (observed, np.array([observed]))
            continue
        rep_ppl, rep_tlm = paired_replicates(cell, reps)
        out[(model, int(budget), GAP, "")] = (observed, (rep_tlm - rep_ppl).mean(axis=1) * 100)
    return out


def difference_verdict(lo: float, hi: float) -> dict[str, str]:
    """A difference's direction and verdict from its interval (holds: the interval excludes zero)."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return {"direction": "", "verdict": ""}
    direction = "higher" if lo > 0 else "lower" if hi < 0 else "level"
    return {"direction": direction, "verdict": "inconclusive" if direction == "level" else "holds"}


def seeds_two_stage_table(per_seed: Mapping[int, dict], tests=None) -> pd.DataFrame:
    """One row per seed (its document interval) and one ``two-stage`` row per (model, M, statistic,
    condition); ``per_seed[s]`` maps (model, M, statistic, condition) -> (observed, replicates), as
    ``gap_replicates`` returns. ``tests[statistic](lo, hi)`` gives a row's direction and verdict
    (default: ``difference_verdict``), the same test for a seed's interval and the two-stage one.
    The noise columns are left empty here (``verdicts/across_seeds.py`` fills those it simulates)."""
    tests = tests or {}
    rows = []
    keys = sorted({key for stats in per_seed.values() for key in stats}, key=lambda k: (k[0], k[1], k[2], k[3]))
    for key in keys:
        model, budget, statistic, condition = key
        test = tests.get(statistic, difference_verdict)
        observed = {s: stats[key][0] for s, stats in per_seed.items() if key in stats}
        reps = {s: per_seed[s][key][1] for s in observed}
        base = {"model": model, "budget": budget, "statistic": statistic, "condition": condition}
        for s in sorted(observed):
            lo, hi = interval(reps[s])
            rows.append(
                {
                    **base,
                    "n_seeds": 1,
                    "seed": str(s),
                    "estimate": observed[s],
                    "ci_low": lo,
                    "ci_high": hi,
                    "document_variance": float(np.nanvar(reps[s], ddof=1)) if np.size(reps[s]) > 1 else np.nan,
                    "document_covariance": np.nan,
                    "seed_variance": np.nan,
                    "standard_error": float(np.nanstd(reps[s], ddof=1)) if np.size(reps[s]) > 1 else np.nan,
                    "degrees_of_freedom": np.nan,
                    "seeds_below": int(hi < 0),
                    "seeds_above": int(lo > 0),
                    **test(lo, hi),
                }
            )
        result = two_stage(observed, reps)
        rows.append(
            {
                **base,
                "n_seeds": result.n_seeds,
                "seed": TWO_STAGE,
                "estimate": result.estimate,
                "ci_low": result.ci_low,
                "ci_high": result.ci_high,
                "document_variance": result.document_variance,
                "document_covariance": result.document_covariance,
                "seed_variance": result.seed_variance,
                "standard_error": result.standard_error,
                "degrees_of_freedom": result.degrees_of_freedom,
                "seeds_below": result.seeds_below,
                "seeds_above": result.seeds_above,
                **test(result.ci_low, result.ci_high),
            }
        )
    return pd.DataFrame(rows, columns=SEEDS_COLUMNS)

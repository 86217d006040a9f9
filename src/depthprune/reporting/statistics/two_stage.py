"""Two-stage bootstrap across seeds: resample the seeds, then the documents within each seed.

docs/method.md §10. Every interval of a single-seed study resamples documents only; the calibration
draw and the search seed stay fixed. With several seeds, a replicate of a cross-seed statistic draws
S seeds with replacement and, for each drawn seed, one of that seed's paired document-bootstrap
replicates (``bootstrap.document_replicates`` on that seed's documents); the statistic is the mean
over the drawn seeds. Its 95 % percentile interval carries both sources of variation.

Variance components (method of moments): the document variance is the mean over seeds of the
variance of each seed's document replicates; the seed variance is the variance (ddof 1) of the S
per-seed estimates less the document variance, floored at zero.

With few seeds (S = 4: 35 distinct multisets) the seed stage of a percentile bootstrap is too narrow
by about sqrt((S − 1) / S); ``n_seeds`` stands beside every interval so a reader can tell.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from depthprune.reporting.statistics.bootstrap import CONFIDENCE, interval

TWO_STAGE_SEED = 20_261_205  # the seed stage's generator: fixed, as the nulls' (nulls.NULL_SEED)


@dataclass(frozen=True)
class TwoStage:
    estimate: float  # mean over seeds of the per-seed estimate
    ci_low: float
    ci_high: float
    document_variance: float
    seed_variance: float
    n_seeds: int
    seeds_below: int  # seeds whose document interval lies below zero
    seeds_above: int  # ... above zero


def two_stage(
    observed: Mapping[int, float],
    replicates: Mapping[int, np.ndarray],
    n_resamples: int = 10_000,
    seed: int = TWO_STAGE_SEED,
    confidence: float = CONFIDENCE,
) -> TwoStage:
    """The two-stage interval and variance components of a statistic observed at each seed.

    ``observed[s]`` is seed s's estimate, ``replicates[s]`` its document-bootstrap replicates
    (1-D; NaN replicates are dropped). Seeds are drawn in sorted order from a generator seeded by
    ``seed`` and the number of seeds, so the interval does not depend on dictionary order.
    """
    seeds = sorted(s for s in observed if np.isfinite(observed[s]))
    if not seeds:
        nan = float("nan")
        return TwoStage(nan, nan, nan, nan, nan, 0, 0, 0)
    reps = []
    for s in seeds:
        values = np.asarray(replicates[s], dtype=float).ravel()
        values = values[np.isfinite(values)]
        reps.append(values if values.size else np.array([observed[s]], dtype=float))
    rng = np.random.default_rng([seed, len(seeds)])
    drawn = rng.integers(0, len(seeds), size=(n_resamples, len(seeds)))
    picks = rng.random((n_resamples, len(seeds)))
    values = np.empty((n_resamples, len(seeds)))
    for k, rep in enumerate(reps):
        mask = drawn == k
        values[mask] = rep[(picks[mask] * rep.size).astype(int)]
    means = values.mean(axis=1)
    tail = (1 - confidence) / 2
    lo, hi = np.quantile(means, [tail, 1 - tail])
    estimates = np.array([observed[s] for s in seeds], dtype=float)
    document_variance = float(np.mean([rep.var(ddof=1) if rep.size > 1 else 0.0 for rep in reps]))
    spread = float(estimates.var(ddof=1)) if len(seeds) > 1 else float("nan")
    seed_variance = max(spread - document_variance, 0.0) if np.isfinite(spread) else float("nan")
    below = sum(np.quantile(rep, 1 - tail) < 0 for rep in reps)
    above = sum(np.quantile(rep, tail) > 0 for rep in reps)
    return TwoStage(
        estimate=float(estimates.mean()),
        ci_low=float(lo),
        ci_high=float(hi),
        document_variance=document_variance,
        seed_variance=seed_variance,
        n_seeds=len(seeds),
        seeds_below=int(below),
        seeds_above=int(above),
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
    s's k cells, paired within the seed (one replicate index serves all of them: the same documents).
    A replicate draws S seeds with replacement and one document replicate of each drawn seed, and
    reduces the drawn seeds' cells together."""
    seeds = sorted(s for s in cells if np.size(cells[s][0]))
    if not seeds:
        nan = float("nan")
        return nan, nan, nan
    estimate = float(reduce(np.concatenate([np.asarray(cells[s][0], dtype=float) for s in seeds])))
    reps = [np.atleast_2d(np.asarray(cells[s][1], dtype=float)) for s in seeds]
    rng = np.random.default_rng([seed, len(seeds), 1])
    drawn = rng.integers(0, len(seeds), size=(n_resamples, len(seeds)))
    picks = rng.random((n_resamples, len(seeds)))
    values = np.empty(n_resamples)
    with np.errstate(all="ignore"):
        for b in range(n_resamples):
            parts = [reps[k][int(picks[b, j] * reps[k].shape[0])] for j, k in enumerate(drawn[b])]
            pooled = np.concatenate(parts)
            pooled = pooled[np.isfinite(pooled)]
            values[b] = reduce(pooled) if pooled.size else np.nan
    lo, hi = interval(values, confidence)
    return estimate, lo, hi


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
    "seed_variance",
    "seeds_below",
    "seeds_above",
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


def seeds_two_stage_table(per_seed: Mapping[int, dict], n_resamples: int = 10_000, tests=None) -> pd.DataFrame:
    """One row per seed (its document interval) and one ``two-stage`` row per (model, M, statistic,
    condition); ``per_seed[s]`` maps (model, M, statistic, condition) -> (observed, replicates), as
    ``gap_replicates`` returns. ``tests[statistic](lo, hi)`` gives a row's direction and verdict
    (default: ``difference_verdict``), the same test for a seed's interval and the two-stage one."""
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
                    "seed_variance": np.nan,
                    "seeds_below": int(hi < 0),
                    "seeds_above": int(lo > 0),
                    **test(lo, hi),
                }
            )
        result = two_stage(observed, reps, n_resamples)
        rows.append(
            {
                **base,
                "n_seeds": result.n_seeds,
                "seed": TWO_STAGE,
                "estimate": result.estimate,
                "ci_low": result.ci_low,
                "ci_high": result.ci_high,
                "document_variance": result.document_variance,
                "seed_variance": result.seed_variance,
                "seeds_below": result.seeds_below,
                "seeds_above": result.seeds_above,
                **test(result.ci_low, result.ci_high),
            }
        )
    return pd.DataFrame(rows, columns=SEEDS_COLUMNS)

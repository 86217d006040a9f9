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


# --------------------------------------------------------------------------- the cross-seed tables

SEEDS_COLUMNS = [
    "model",
    "budget",
    "statistic",
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


def gap_replicates(summary, reps) -> dict[tuple[str, int], tuple[float, np.ndarray]]:
    """Per (model, M): the mean over the algorithms run under both of the paper's calibrations of
    TLM-pruned minus perplexity-pruned average accuracy (points), and its document replicates."""
    from depthprune.reporting.analysis.contrast import paired_replicates, paper_pairs

    out = {}
    for (model, budget), cell in paper_pairs(summary).groupby(["model", "budget"], sort=True):
        observed = float((cell["avg_accuracy_tlm"] - cell["avg_accuracy_ppl"]).mean()) * 100
        if reps is None:
            out[(model, int(budget))] = (observed, np.array([observed]))
            continue
        rep_ppl, rep_tlm = paired_replicates(cell, reps)
        out[(model, int(budget))] = (observed, (rep_tlm - rep_ppl).mean(axis=1) * 100)
    return out


def seeds_two_stage_table(per_seed: Mapping[int, dict], n_resamples: int = 10_000) -> pd.DataFrame:
    """One row per seed (its document interval) and one ``two-stage`` row per (model, M, statistic);
    ``per_seed[s]`` maps (model, M) -> (observed, replicates), as ``gap_replicates`` returns."""
    rows = []
    cells = sorted({key for stats in per_seed.values() for key in stats})
    for model, budget in cells:
        observed = {s: stats[(model, budget)][0] for s, stats in per_seed.items() if (model, budget) in stats}
        reps = {s: per_seed[s][(model, budget)][1] for s in observed}
        for s in sorted(observed):
            lo, hi = interval(reps[s])
            rows.append(
                {
                    "model": model,
                    "budget": budget,
                    "statistic": GAP,
                    "n_seeds": 1,
                    "seed": str(s),
                    "estimate": observed[s],
                    "ci_low": lo,
                    "ci_high": hi,
                    "document_variance": float(np.nanvar(reps[s], ddof=1)) if np.size(reps[s]) > 1 else np.nan,
                    "seed_variance": np.nan,
                    "seeds_below": int(hi < 0),
                    "seeds_above": int(lo > 0),
                    **_side(lo, hi),
                }
            )
        result = two_stage(observed, reps, n_resamples)
        rows.append(
            {
                "model": model,
                "budget": budget,
                "statistic": GAP,
                "n_seeds": result.n_seeds,
                "seed": TWO_STAGE,
                "estimate": result.estimate,
                "ci_low": result.ci_low,
                "ci_high": result.ci_high,
                "document_variance": result.document_variance,
                "seed_variance": result.seed_variance,
                "seeds_below": result.seeds_below,
                "seeds_above": result.seeds_above,
                **_side(result.ci_low, result.ci_high),
            }
        )
    return pd.DataFrame(rows, columns=SEEDS_COLUMNS)


def _side(lo: float, hi: float) -> dict[str, str]:
    """A difference's direction and verdict from its interval (holds: the interval excludes zero)."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return {"direction": "", "verdict": ""}
    direction = "higher" if lo > 0 else "lower" if hi < 0 else "level"
    return {"direction": direction, "verdict": "inconclusive" if direction == "level" else "holds"}

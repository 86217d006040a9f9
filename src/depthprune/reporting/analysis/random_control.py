"""Searches against random sets: does a search's removed set beat chance selection?
(docs/method.md §11, "How the rescore study judges the accuracy claims").

Per (model, M, calibration) of one seed: the mean average accuracy of the paper's searches' sets
minus the mean over the K random M-sets of the random-set control (``evaluation_only``). The two
sources of noise are resampled as they were sampled:

- the documents: one resample shared by every run (``bootstrap.Replicates``, the paired bootstrap);
- the random sets: they are a sample of the C(N', M) sets the barrier allows, so each replicate also
  draws K of the K sets with replacement (crossed with the document resample, seeded). The searches
  are fixed: the claim is about these seven searches, not a population of searches.

Across seeds the per-seed estimates and replicates enter ``two_stage`` (docs/method.md §10): every
seed draws its own random sets, so the seed stage carries their variation.

The noise null (``noise_rates``): within each document, the searches' and the random sets' scores
are exchanged at random (``noise_null.permuted_units`` over those runs), i.e. searches no better
than chance selection; the share of such null studies reaching each verdict of the same rule.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from depthprune.evaluation_only import is_random_set
from depthprune.reporting.aggregate import KEY
from depthprune.reporting.statistics.bootstrap import interval, standard_error
from depthprune.reporting.statistics.two_stage import two_stage
from depthprune.reporting.style import PAPER_ALGORITHMS, PAPER_CALIBRATIONS

SEARCH_MEAN = "mean of the searches"
SET_RESAMPLE_SEED = 20_261_206  # the random sets' resample (fixed, as the other generators of the render)
ABOVE, BELOW, LEVEL = "above random sets", "below random sets", "level with random sets"
# The claim the across-seeds rows judge, and its verdict from the interval's side (the rule of
# docs/method.md §11): holds above zero, does not hold below (worse than random), else inconclusive.
CLAIM = "the searches' sets beat random selection"
VERDICT_OF_SIDE = {ABOVE: "holds", BELOW: "does not hold", LEVEL: "inconclusive", "": ""}
COLUMNS = [
    "model",
    "budget",
    "calibration",
    "comparison",
    "acc_searches",
    "acc_random_sets",
    "diff",
    "ci_low",
    "ci_high",
    "se",
    "verdict",
    "n_random_sets",
]


def side(lo: float, hi: float) -> str:
    """The verdict of an interval of (searches − random sets): which side of zero it lies on."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    return ABOVE if lo > 0 else BELOW if hi < 0 else LEVEL


def set_draws(n_sets: int, n_resamples: int, seed: tuple[int, ...] = ()) -> np.ndarray:
    """(B, K) indices: each replicate's K of the K random sets, drawn with replacement. ``seed`` holds
    the study seed: every seed drew its own random sets, so each resamples them independently (the
    documents, shared by the seeds, are resampled alike in every seed)."""
    rng = np.random.default_rng([SET_RESAMPLE_SEED, n_sets, n_resamples, *seed])
    return rng.integers(0, n_sets, size=(n_resamples, n_sets))


def difference_replicates(searches: np.ndarray, random_sets: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """(B,) replicates of mean(searches) − mean(random sets): ``searches`` (B, A) and ``random_sets``
    (B, K) document replicates of the same resamples, the random sets redrawn by ``draws`` (B, K)."""
    return searches.mean(axis=1) - np.take_along_axis(random_sets, draws, axis=1).mean(axis=1)


def cell_runs(summary: pd.DataFrame) -> dict[tuple, tuple[pd.DataFrame, pd.DataFrame]]:
    """(model, M, calibration) -> (the paper's searches' runs, the random sets' runs of that model and M)."""
    random_rows = summary[summary["algorithm"].map(is_random_set)]
    searches = summary[summary["calibration"].isin(PAPER_CALIBRATIONS) & summary["algorithm"].isin(PAPER_ALGORITHMS)]
    cells = {}
    for (model, budget, calibration), runs in searches.groupby(["model", "budget", "calibration"], sort=True):
        random_runs = random_rows[(random_rows["model"] == model) & (random_rows["budget"] == budget)]
        if len(random_runs) >= 2:
            cells[(model, int(budget), calibration)] = (runs, random_runs)
    return cells


def random_contrast(
    summary: pd.DataFrame, reps, seed: int
) -> tuple[pd.DataFrame, dict[tuple, tuple[float, np.ndarray]]]:
    """Seed ``seed``'s table (the mean of the searches, then each search, against the random sets'
    mean) and, per (model, M, calibration), the mean's (observed, replicates) for ``across_seeds``."""
    rows, for_seeds = [], {}
    for (model, budget, calibration), (runs, random_runs) in cell_runs(summary).items():
        acc_searches = runs["avg_accuracy"].to_numpy(float)
        acc_random = float(random_runs["avg_accuracy"].to_numpy(float).mean())
        rep_searches = reps.aligned(runs[KEY], "avg_accuracy")
        rep_random = reps.aligned(random_runs[KEY], "avg_accuracy")
        draws = set_draws(len(random_runs), rep_random.shape[0], (int(budget), int(seed)))
        comparisons = [(SEARCH_MEAN, acc_searches.mean(), rep_searches)]
        comparisons += [(a, acc_searches[j], rep_searches[:, [j]]) for j, a in enumerate(runs["algorithm"])]
        for name, observed, replicates in comparisons:
            diff_reps = difference_replicates(replicates, rep_random, draws)
            lo, hi = interval(diff_reps)
            rows.append(
                {
                    "model": model,
                    "budget": budget,
                    "calibration": calibration,
                    "comparison": name,
                    "acc_searches": float(observed),
                    "acc_random_sets": acc_random,
                    "diff": float(observed) - acc_random,
                    "ci_low": lo,
                    "ci_high": hi,
                    "se": standard_error(diff_reps),
                    "verdict": side(lo, hi),
                    "n_random_sets": len(random_runs),
                }
            )
            if name == SEARCH_MEAN:
                for_seeds[(model, int(budget), calibration)] = (float(observed) - acc_random, diff_reps)
    return pd.DataFrame(rows, columns=COLUMNS), for_seeds


def across_seeds(per_seed: Mapping[int, Mapping[tuple, tuple[float, np.ndarray]]]) -> pd.DataFrame:
    """Per (model, M, calibration): the two-stage crossed interval of the mean of the searches minus
    the random sets' mean over the seeds that have it, and its verdict."""
    keys = sorted({key for cells in per_seed.values() for key in cells})
    rows = []
    for key in keys:
        seeds = [s for s in sorted(per_seed) if key in per_seed[s]]
        result = two_stage({s: per_seed[s][key][0] for s in seeds}, {s: per_seed[s][key][1] for s in seeds})
        model, budget, calibration = key
        rows.append(
            {
                "model": model,
                "budget": budget,
                "calibration": calibration,
                "diff": result.estimate,
                "ci_low": result.ci_low,
                "ci_high": result.ci_high,
                "n_seeds": result.n_seeds,
                "seed_variance": result.seed_variance,
                "verdict": side(result.ci_low, result.ci_high),
            }
        )
    return pd.DataFrame(rows)


def null_cell(samples: pd.DataFrame, runs: pd.DataFrame, random_runs: pd.DataFrame):
    """The per-document scores of one cell's searches then random sets (``noise_null.UnitScores``),
    on the accuracy tasks both have; None when a run lacks a document."""
    from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS
    from depthprune.reporting.statistics.noise_null import unit_scores

    both = pd.concat([runs[KEY], random_runs[KEY]], ignore_index=True)
    present = set(samples.loc[samples["headline"].astype(bool), "benchmark"])
    return unit_scores(samples, both, [b for b in ZERO_SHOT_BENCHMARKS if b in present])


def _decide_one(n_searches: int, observed: np.ndarray, replicates: np.ndarray, seed: int) -> tuple[float, np.ndarray]:
    """(observed difference, replicates) of one null cell of seed ``seed``: columns [searches | random
    sets], the random sets resampled as the rule resamples them (``set_draws``: per seed)."""
    n_random = observed.shape[1] - n_searches
    draws = set_draws(n_random, replicates.shape[0], (n_searches, int(seed)))
    diff = observed[0, :n_searches].mean() - observed[0, n_searches:].mean()
    return float(diff), difference_replicates(replicates[:, :n_searches], replicates[:, n_searches:], draws)


def noise_rates(cells_by_seed: Mapping[int, object], n_searches: int, n_null: int | None = None) -> dict[str, float]:
    """Share of null studies (searches exchangeable with random sets in every document, every seed)
    reaching each verdict of the rule actually applied: one seed, the percentile interval; several,
    the two-stage t interval over the seeds (``across_seeds_verdict_rates``: shared documents)."""
    from depthprune.reporting.statistics import noise_null

    seeds = sorted(s for s, cell in cells_by_seed.items() if cell is not None)
    if not seeds:
        return {}
    kwargs = {} if n_null is None else {"n_null": n_null}

    def decide(observed: dict, replicates: dict) -> str:
        per_seed = {s: _decide_one(n_searches, observed[s][0], replicates[s][0], s) for s in seeds}
        if len(seeds) == 1:
            return side(*interval(per_seed[seeds[0]][1]))
        result = two_stage({s: v[0] for s, v in per_seed.items()}, {s: v[1] for s, v in per_seed.items()})
        return side(result.ci_low, result.ci_high)

    return noise_null.across_seeds_verdict_rates({s: [cells_by_seed[s]] for s in seeds}, decide, "accuracy", **kwargs)


def has_random_sets(summary: pd.DataFrame) -> bool:
    """Whether a study evaluated the random-set control (config ``random_sets``)."""
    return bool(summary["algorithm"].map(is_random_set).any())


def with_noise(table: pd.DataFrame, rates: Mapping[tuple, Mapping[str, float]]) -> pd.DataFrame:
    """``table`` (one row per (model, M, calibration)) with each row's noise rates (the share of null
    studies reaching "above" and "below"), the interval's ``side``, and the ``verdict`` on ``CLAIM``:
    ``uninformative`` in place of a verdict that noise reaches more than UNINFORMATIVE_LEVEL of the
    time (docs/method.md §7)."""
    from depthprune.reporting.statistics.noise_null import UNINFORMATIVE_LEVEL

    table = table.copy()
    found = [rates.get((r.model, int(r.budget), r.calibration), {}) for r in table.itertuples(index=False)]
    # a verdict no null study reached has rate 0; a row without a null (no per-document scores) NaN
    table["null_above"] = [r.get(ABOVE, 0.0) if r else np.nan for r in found]
    table["null_below"] = [r.get(BELOW, 0.0) if r else np.nan for r in found]
    reached = [r.get(v, np.nan) for r, v in zip(found, table["verdict"])]
    table["side"] = table["verdict"]
    table["verdict"] = [
        "uninformative" if v in (ABOVE, BELOW) and rate > UNINFORMATIVE_LEVEL else VERDICT_OF_SIDE[v]
        for v, rate in zip(table["side"], reached)
    ]
    return table


def markdown(table: pd.DataFrame, n_seeds: int) -> str:
    """The "Searches against random sets" section of observations.md (points of average accuracy)."""
    if table.empty:
        return ""
    scope = "one seed" if n_seeds == 1 else f"{n_seeds} seeds, two-stage crossed t interval"
    lines = [
        "",
        "## Searches against random sets (docs/method.md §11)",
        "",
        f"Mean over the paper's searches minus the mean over the random sets, average accuracy ({scope}; "
        "the random sets resampled as sampled; null: searches exchangeable with random sets):",
        "",
        f"| model | M | calibration | searches − random [95% CI] (points) | null above | null below | interval | "
        f"{CLAIM} |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in table.itertuples(index=False):
        lines.append(
            f"| {r.model} | {r.budget} | {r.calibration} | {100 * r.diff:+.2f} [{100 * r.ci_low:+.2f}, "
            f"{100 * r.ci_high:+.2f}] | {r.null_above:.1%} | {r.null_below:.1%} | {r.side} | {r.verdict} |"
        )
    return "\n".join(lines) + "\n"

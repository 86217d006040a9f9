"""§5.3 on distinct removed sets (``reporting/statistics/distinct.py``). ρ = Spearman(avg perplexity,
avg accuracy) on raw values, as the paper's Figure 3: a NEGATIVE ρ means lower perplexity goes with
higher accuracy (alignment). Per cell ρ, the number of distinct sets and the exact permutation p are
descriptive; the claims are judged across cells as the paper states them: TLM pruning positive in
every cell; perplexity pruning negative in most cells, with a weak median (−strong_rho < median < 0,
ours); each with the chance that it passes, and that it does not hold, under no association.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from depthprune.reporting.statistics.distinct import distinct_sets, distinct_spearman_table, null_distribution
from depthprune.reporting.style import PAPER_CALIBRATIONS
from depthprune.reporting.verdicts.rules import (
    FAILS,
    HOLDS,
    NAN2,
    combine,
    observation_row,
    uninformative_under_noise,
)

# |ρ| above this is strong; the paper's perplexity-pruning median −0.27 is weak (alignment, but loose).
DEFAULT_STRONG_RHO = 0.5


def observe_rho(summary: pd.DataFrame, reps, paper: dict, strong_rho: float) -> tuple[list[dict], str]:
    """§5.3 on distinct removed sets (``reporting/statistics/distinct.py``): per cell ρ, its number of distinct
    sets, exact permutation p and bootstrap interval (descriptive); the claims judged as the paper
    states them, across cells: TLM pruning positive in every cell, perplexity pruning negative in
    most cells with a weak median (−strong_rho < median < 0). Beside each claim verdict, the chance
    that it passes when perplexity and accuracy are unrelated in every cell (each cell's exact
    permutation distribution)."""
    from depthprune.reporting.statistics.bootstrap import interval_mc

    table = distinct_spearman_table(summary)
    table = table[table["calibration"].isin(PAPER_CALIBRATIONS)]
    p = paper["section_5_3"]
    rows, verdicts = [], []
    nulls: dict[str, list[np.ndarray]] = {"tlm": [], "ppl": []}
    observed: dict[str, list[float]] = {"tlm": [], "ppl": []}
    pruned = summary[summary["algorithm"] != "dense"]
    for r in table.itertuples(index=False):
        group = pruned[
            (pruned["model"] == r.model) & (pruned["budget"] == r.budget) & (pruned["calibration"] == r.calibration)
        ]
        sets = distinct_sets(group)
        ci = se = NAN2
        replicates = rho_replicates(group, reps)
        if replicates is not None:
            ends = interval_mc(replicates)
            ci, se = ends[:2], ends[2:]
        kind = r.calibration_kind
        if np.isfinite(r.rho):
            nulls[kind].append(null_distribution(sets["avg_perplexity"], sets["avg_accuracy"]))
            observed[kind].append(r.rho)
        rows.append(
            observation_row(
                "5.3",
                f"{r.model} M={r.budget} {r.calibration}",
                "ρ over distinct sets (per cell, descriptive)",
                r.rho,
                ci,
                se=se,
                p=r.p_value,
                note=f"{r.n_distinct_sets} distinct sets among {r.n_algorithms} algorithms; p: {r.p_method}, "
                f"two-sided; sets: {r.sets}",
            )
        )
    for kind, label in (("tlm", "TLM"), ("ppl", "perplexity")):
        rho = np.asarray(observed[kind], dtype=float)
        if not len(rho):
            continue
        lo, hi = p[kind]["range"]
        n = len(rho)
        rows.append(
            observation_row(
                "5.3",
                f"all, {label} pruning",
                "median ρ over cells (distinct sets)",
                float(np.median(rho)),
                paper=f"{p[kind]['median']:+.2f} (range {lo:+.2f} to {hi:+.2f})",
            )
        )
        if kind == "tlm":
            count = int((rho > 0).sum())
            verdict = HOLDS if count == n else FAILS
            null_pass = float(np.prod([(null > 0).mean() for null in nulls[kind]]))
            statistic = "cells with ρ > 0 (claim: all cells, misalignment)"
            paper_text = f"{p['tlm']['positive_cells']}/{p['tlm']['cells']} positive"
        else:
            count = int((rho < 0).sum())
            verdict = HOLDS if count > n / 2 else FAILS
            null_pass = _majority_negative_probability([(null < 0).mean() for null in nulls[kind]])
            statistic = "cells with ρ < 0 (claim: most cells, i.e. > half (ours), alignment)"
            paper_text = f"{p['ppl']['negative_cells']}/{p['ppl']['cells']} negative"
        # Two outcomes: noise that does not pass does not hold.
        verdict = uninformative_under_noise(verdict, null_pass, 1 - null_pass)
        verdicts.append(verdict)
        rows.append(
            observation_row(
                "5.3",
                f"all, {label} pruning",
                statistic,
                count,
                paper=paper_text,
                verdict=verdict,
                null_pass=null_pass,
                null_fail=1 - null_pass,
                note=f"of {n} cells; null pass: probability under no association in any cell (exact per cell)",
            )
        )
        if kind == "ppl":
            median = float(np.median(rho))
            weak = HOLDS if -strong_rho < median < 0 else FAILS
            null_pass = _median_in_probability(nulls[kind], -strong_rho, 0.0)
            weak = uninformative_under_noise(weak, null_pass, 1 - null_pass)
            verdicts.append(weak)
            rows.append(
                observation_row(
                    "5.3",
                    "all, perplexity pruning",
                    f"median ρ (claim: weak alignment, −{strong_rho:g} < median < 0 (ours))",
                    median,
                    paper=f"median {p['ppl']['median']:+.2f} (weak)",
                    verdict=weak,
                    null_pass=null_pass,
                    null_fail=1 - null_pass,
                    note=f"null pass: Monte Carlo, {MEDIAN_NULL_DRAWS} draws from the cells' exact null distributions",
                )
            )
    return rows, combine(verdicts)


MEDIAN_NULL_DRAWS = 20_000


def rho_replicates(group: pd.DataFrame, reps) -> np.ndarray | None:
    """Document replicates (B,) of ρ over the distinct sets of one cell's runs (``group``: one model,
    M and calibration); None without replicates or with fewer than three distinct sets."""
    from depthprune.reporting.statistics.bootstrap import spearman_rows

    sets = distinct_sets(group)
    if reps is None or len(sets) < 3:
        return None
    first = [a.split("+")[0] for a in sets["algorithms"]]
    keyed = group.set_index("algorithm").loc[first].reset_index()
    return spearman_rows(reps.aligned(keyed, "avg_perplexity"), reps.aligned(keyed, "avg_accuracy"))


def _majority_negative_probability(probabilities: list[float]) -> float:
    """P(more than half of independent cells are negative), cell i negative with probability p_i
    (Poisson-binomial, exact)."""
    pmf = np.array([1.0])
    for q in probabilities:
        pmf = np.convolve(pmf, [1 - q, q])
    n = len(probabilities)
    return float(pmf[np.arange(n + 1) > n / 2].sum())


def _median_in_probability(nulls: list[np.ndarray], low: float, high: float) -> float:
    """P(low < median of one draw per cell < high), cells independent, each from its null values."""
    if not nulls:
        return float("nan")
    rng = np.random.default_rng([20_260_503, len(nulls), *(len(n) for n in nulls)])
    draws = np.stack([null[rng.integers(0, len(null), MEDIAN_NULL_DRAWS)] for null in nulls], axis=1)
    median = np.median(draws, axis=1)
    return float(((median > low) & (median < high)).mean())

"""§5.3 on distinct removed sets (``reporting/statistics/distinct.py``). ρ = Spearman(avg perplexity,
avg accuracy) on raw values, as the paper's Figure 3: a NEGATIVE ρ means lower perplexity goes with
higher accuracy (alignment). Per cell ρ, the number of distinct sets and the exact permutation p are
descriptive; the claims are judged across cells as the paper states them (docs/method.md §7): TLM
pruning positive in every cell; perplexity pruning "negative or weak": negative in most cells
**or** a weak median (|median| < strong_rho, ours), the claim holding when either part does
(``either``). Each claim carries the chance that it passes, and that it does not hold, under no
association (the cells' exact permutation distributions); the two parts of the "or" are rows beside
it that do not enter the claim's verdict.
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
    UNSURE,
    conjunction,
    observation_row,
    uninformative_under_noise,
)

# |ρ| above this is strong; the paper's perplexity-pruning median −0.27 is weak (alignment, but loose).
DEFAULT_STRONG_RHO = 0.5


def either(first: str, second: str) -> str:
    """The three-valued "or" of two parts' verdicts: holds when either holds, does not hold when
    both do not hold, else inconclusive (a part that is neither leaves the "or" undecided)."""
    if HOLDS in (first, second):
        return HOLDS
    if first == FAILS and second == FAILS:
        return FAILS
    return UNSURE


def cell_rows(summary: pd.DataFrame, reps) -> tuple[list[dict], dict[str, list[float]], dict[str, list[np.ndarray]]]:
    """Per (model, M, paper calibration) cell: ρ over its distinct sets with its number of sets,
    exact permutation p and bootstrap interval (descriptive rows); and per calibration kind the
    cells' defined ρ and their exact null distributions."""
    from depthprune.reporting.statistics.bootstrap import interval_mc

    table = distinct_spearman_table(summary)
    table = table[table["calibration"].isin(PAPER_CALIBRATIONS)]
    rows: list[dict] = []
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
        if np.isfinite(r.rho):
            nulls[r.calibration_kind].append(null_distribution(sets["avg_perplexity"], sets["avg_accuracy"]))
            observed[r.calibration_kind].append(r.rho)
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
    return rows, observed, nulls


def tlm_claim_row(rho: np.ndarray, nulls: list[np.ndarray], paper: dict) -> dict:
    """TLM pruning: ρ > 0 in every cell, with its exact chance under no association."""
    count = int((rho > 0).sum())
    verdict = HOLDS if count == len(rho) else FAILS
    null_pass = float(np.prod([(null > 0).mean() for null in nulls]))
    # Two outcomes: noise that does not pass does not hold.
    return observation_row(
        "5.3",
        "all, TLM pruning",
        "cells with ρ > 0 (claim: all cells, misalignment)",
        count,
        paper=f"{paper['tlm']['positive_cells']}/{paper['tlm']['cells']} positive",
        verdict=uninformative_under_noise(verdict, null_pass, 1 - null_pass),
        null_pass=null_pass,
        null_fail=1 - null_pass,
        note=f"of {len(rho)} cells; null pass: probability under no association in any cell (exact per cell)",
    )


def perplexity_rows(rho: np.ndarray, nulls: list[np.ndarray], paper: dict, strong_rho: float) -> list[dict]:
    """Perplexity pruning, "negative or weak": the negative part (ρ < 0 in more than half the cells),
    the weak part (|median ρ| < strong_rho) and the claim (``either``), each with its noise rates;
    only the claim row enters §5.3's verdict."""
    n, median = len(rho), float(np.median(rho))
    negative = HOLDS if int((rho < 0).sum()) > n / 2 else FAILS
    weak = HOLDS if abs(median) < strong_rho else FAILS
    negative_pass = _majority_negative_probability([(null < 0).mean() for null in nulls])
    weak_pass = _median_in_probability(nulls, -strong_rho, strong_rho)
    claim = either(negative, weak)
    claim_pass, claim_fail = either_noise_rates(nulls, strong_rho)
    where = f"of {n} cells"
    return [
        observation_row(
            "5.3",
            "all, perplexity pruning",
            "cells with ρ < 0 (part 'negative' of the claim: most cells, i.e. > half (ours), alignment)",
            int((rho < 0).sum()),
            paper=f"{paper['ppl']['negative_cells']}/{paper['ppl']['cells']} negative",
            verdict=uninformative_under_noise(negative, negative_pass, 1 - negative_pass),
            null_pass=negative_pass,
            null_fail=1 - negative_pass,
            note=f"{where}; a part of the 'or', not in the claim's verdict; null pass: exact per cell",
        ),
        observation_row(
            "5.3",
            "all, perplexity pruning",
            f"median ρ (part 'weak' of the claim: −{strong_rho:g} < median < {strong_rho:g} (ours))",
            median,
            paper=f"median {paper['ppl']['median']:+.2f} (weak)",
            verdict=uninformative_under_noise(weak, weak_pass, 1 - weak_pass),
            null_pass=weak_pass,
            null_fail=1 - weak_pass,
            note=f"{where}; a part of the 'or', not in the claim's verdict; null pass: Monte Carlo, "
            f"{MEDIAN_NULL_DRAWS} draws from the cells' exact null distributions",
        ),
        observation_row(
            "5.3",
            "all, perplexity pruning",
            f"negative or weak (claim: most cells ρ < 0, or −{strong_rho:g} < median ρ < {strong_rho:g})",
            float(claim == HOLDS),
            paper="negative or weak (abstract, §1); 5/6 negative, median −0.27 (§5.3)",
            verdict=uninformative_under_noise(claim, claim_pass, claim_fail),
            null_pass=claim_pass,
            null_fail=claim_fail,
            note=f"{where}; value 1 when the 'or' holds; null rates: the 'or' on {MEDIAN_NULL_DRAWS} draws "
            "from the cells' exact null distributions (both parts on the same draw)",
        ),
    ]


def observe_rho(summary: pd.DataFrame, reps, paper: dict, strong_rho: float) -> tuple[list[dict], str]:
    """§5.3 rows (module docstring): per cell ρ (descriptive), the median over cells beside the
    paper's, and the claims across cells; the claim's verdict combines TLM's row and perplexity
    pruning's "or"."""
    p = paper["section_5_3"]
    rows, observed, nulls = cell_rows(summary, reps)
    verdicts = []
    for kind, label in (("tlm", "TLM"), ("ppl", "perplexity")):
        rho = np.asarray(observed[kind], dtype=float)
        if not len(rho):
            continue
        lo, hi = p[kind]["range"]
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
            rows.append(tlm_claim_row(rho, nulls[kind], p))
        else:
            rows += perplexity_rows(rho, nulls[kind], p, strong_rho)
        verdicts.append(rows[-1]["verdict"])
    return rows, conjunction(verdicts)


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


def either_noise_rates(nulls: list[np.ndarray], strong_rho: float) -> tuple[float, float]:
    """(null pass, null fail) of "negative or weak" under no association in any cell: the shares of
    MEDIAN_NULL_DRAWS draws (one value from each cell's exact null per draw, both parts judged on
    the same draw) in which the "or" holds and in which it does not (point values: two outcomes)."""
    if not nulls:
        return float("nan"), float("nan")
    rng = np.random.default_rng([20_261_206, len(nulls), *(len(n) for n in nulls)])
    draws = np.stack([null[rng.integers(0, len(null), MEDIAN_NULL_DRAWS)] for null in nulls], axis=1)
    negative = (draws < 0).sum(axis=1) > draws.shape[1] / 2
    weak = np.abs(np.median(draws, axis=1)) < strong_rho
    passed = float((negative | weak).mean())
    return passed, 1 - passed

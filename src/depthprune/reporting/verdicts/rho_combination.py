"""§5.3 across seeds by magnitude (docs/method.md §10, "§5.3 across seeds, by magnitude").

The claimed sign of ρ (TLM pruning positive, perplexity pruning negative) is tested on the mean ρ
over the 2 × S (seed, M) cells, each ρ over its cell's distinct removed sets (``distinct.py``),
against the cells' exact permutation nulls combined:

- every null draw gives each seed one uniform random order of its algorithms (random keys) and each
  cell the order this induces on the algorithms that represent its distinct sets (a set found by
  several algorithms is represented by the first one, as ``alignment.rho_replicates`` keys it): the
  set represented by the k-th smallest key takes the accuracy of the cell's k-th set. A cell's
  marginal null is its exact n! distribution (``distinct.null_distribution``), and a seed's two M
  cells share the permutation of the algorithms' labels, so whatever ties an algorithm's two cells
  (same calibration draw, same search seed, nested sets) stays in the null;
- seeds draw independent orders (independent calibration draws and search seeds).

``magnitude_test`` turns the observed mean and its null into a verdict: holds when the mean lies on
the claimed side with one-sided p ≤ ALPHA, does not hold when on the other side with p ≤ ALPHA,
else inconclusive, with the noise rates read off the null draws themselves.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from depthprune.reporting.aggregate import TIE_DECIMALS
from depthprune.reporting.statistics.distinct import _rho
from depthprune.reporting.verdicts.rules import FAILS, HOLDS, UNSURE

NULL_DRAWS = 100_000
NULL_SEED = 20_261_207
ALPHA = 0.05  # per side: either outcome earned by noise at most 5 % of the time (the sign count's design)
TOLERANCE = 1e-12  # a null mean equal to the observed one up to rounding counts as "as far"


def cell_permuted_rho(
    perplexity: np.ndarray, accuracy: np.ndarray, representatives: list[str], keys: dict[str, np.ndarray]
) -> np.ndarray:
    """(D,) ρ of one cell under D joint draws: ``keys`` maps each algorithm of the seed to its (D,)
    random keys; the set represented by the algorithm with the k-th smallest key (among the cell's
    representatives) takes the accuracy of the cell's k-th set."""
    rx = rankdata(np.asarray(perplexity, dtype=float))
    ry = rankdata(np.round(np.asarray(accuracy, dtype=float), TIE_DECIMALS))
    cell_keys = np.stack([keys[a] for a in representatives], axis=1)  # (D, n)
    order = cell_keys.argsort(axis=1).argsort(axis=1)  # rank of each set's key: the set it takes y from
    return _rho(rx, ry[order])


def null_means(cells: pd.DataFrame, draws: int = NULL_DRAWS, seed: int = NULL_SEED, joint: bool = True) -> np.ndarray:
    """(draws,) null values of the mean ρ over ``cells`` (rows with seed, budget, perplexity,
    accuracy, representatives; one calibration). ``joint``: a seed's cells share one permutation of
    the algorithms' labels (the rule); False draws every cell on its own (for comparison)."""
    total = np.zeros(draws)
    rng = np.random.default_rng([seed, draws, len(cells)])
    for _, group in cells.groupby("seed", sort=True):
        algorithms = sorted({a for reps in group["representatives"] for a in reps})
        shared = {a: rng.random(draws) for a in algorithms}
        for r in group.itertuples(index=False):
            keys = shared if joint else {a: rng.random(draws) for a in r.representatives}
            total += cell_permuted_rho(r.perplexity, r.accuracy, list(r.representatives), keys)
    return total / len(cells)


def side_p_values(value: float | np.ndarray, null: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One-sided permutation p-values (1 + draws at least as far) / (1 + draws), above and below."""
    ordered = np.sort(null)
    value = np.asarray(value, dtype=float)
    n = len(ordered)
    above = (1 + n - np.searchsorted(ordered, value - TOLERANCE, side="left")) / (1 + n)
    below = (1 + np.searchsorted(ordered, value + TOLERANCE, side="right")) / (1 + n)
    return above, below


def sign_verdict(p_claimed: float, p_other: float, alpha: float = ALPHA) -> str:
    """holds when the claimed side's p ≤ alpha, does not hold when the other side's is, else inconclusive."""
    if p_claimed <= alpha:
        return HOLDS
    if p_other <= alpha:
        return FAILS
    return UNSURE


def magnitude_verdict(mean: float, null: np.ndarray, claimed_sign: int, alpha: float = ALPHA) -> dict:
    """The verdict of the mean ρ on the claimed side and its two one-sided p-values."""
    above, below = side_p_values(mean, null)
    claimed, other = (above, below) if claimed_sign > 0 else (below, above)
    return {
        "p_claimed": float(claimed),
        "p_other": float(other),
        "verdict": sign_verdict(float(claimed), float(other), alpha),
    }


def magnitude_test(mean: float, null: np.ndarray, claimed_sign: int, alpha: float = ALPHA) -> dict:
    """``magnitude_verdict`` and the noise rates (the shares of null draws that pass on the claimed
    side and on the other, each judged against the same null)."""
    null_above, null_below = side_p_values(null, null)
    null_claimed, null_other = (null_above, null_below) if claimed_sign > 0 else (null_below, null_above)
    return {
        **magnitude_verdict(mean, null, claimed_sign, alpha),
        "null_pass_probability": float(np.mean(null_claimed <= alpha)),
        "null_fail_probability": float(np.mean((null_claimed > alpha) & (null_other <= alpha))),
    }


def defined_cells(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells whose ρ is defined (at least three distinct sets, neither variable constant)."""
    return cells[np.isfinite(cells["rho"].to_numpy(dtype=float))]


def representatives_of(algorithms: Iterable[str]) -> list[str]:
    """Each distinct set's representative: the first algorithm that found it (``distinct_sets``
    joins them with '+')."""
    return [a.split("+")[0] for a in algorithms]


def weak_verdict(lo: float, hi: float, value: float, strong_rho: float) -> str:
    """The weak part of "negative or weak": holds when the interval lies inside (−strong, strong),
    does not hold when wholly outside it, else inconclusive; without an interval the value decides."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        if not np.isfinite(value):
            return UNSURE
        return HOLDS if abs(value) < strong_rho else FAILS
    if -strong_rho < lo and hi < strong_rho:
        return HOLDS
    if hi <= -strong_rho or lo >= strong_rho:
        return FAILS
    return UNSURE


def either_rule(rho: np.ndarray, replicates_by_seed: dict, null: np.ndarray, strong_rho: float, n_resamples: int):
    """(negative, weak, claim) of "negative or weak" across seeds: the mean of ``rho`` (every defined
    cell) on the negative side against ``null``, the pooled median's two-stage interval
    (``replicates_by_seed``: seed -> (cells' ρ, (B, cells) replicates)) inside (−strong, strong)."""
    from depthprune.reporting.statistics.two_stage import two_stage_pooled
    from depthprune.reporting.verdicts.alignment import either

    # The verdict alone: the null's own rates (a sort and two searches of every draw) are not needed here,
    # and either_noise_rates asks for this verdict once per null study.
    negative = magnitude_verdict(float(np.mean(rho)), null, -1)["verdict"]
    if replicates_by_seed:
        estimate, lo, hi = two_stage_pooled(replicates_by_seed, np.median, n_resamples)
    else:
        estimate, lo, hi = float(np.median(rho)), np.nan, np.nan
    weak = weak_verdict(lo, hi, estimate, strong_rho)
    return negative, weak, either(negative, weak)


def either_noise_rates(
    cells: pd.DataFrame,
    summaries: dict,
    samples: dict,
    strong_rho: float,
    tasks: dict | None = None,
    null: np.ndarray | None = None,
) -> tuple[float, float]:
    """(null pass, null fail) of the across-seeds "negative or weak" rule (``either_rule``) on
    simulated null studies of the multi-seed study (``noise_null.across_seeds_verdict_rates``): every
    perplexity-pruning cell's per-document accuracies shuffled among its runs, perplexities as
    observed, the seeds bootstrapped with the same document resamples; the mean ρ judged against the
    observed design's joint null (``null``: it depends on the accuracies only through their ties).
    ``tasks`` (model -> tasks) restricts the accuracy to those tasks. NaN without per-document results."""
    from depthprune.reporting.statistics.bootstrap import spearman_rows
    from depthprune.reporting.statistics.noise_null import (
        INNER_RESAMPLES,
        across_seeds_verdict_rates,
    )

    # Every seed's every cell enters the null studies (the seeds must match cell for cell), and each
    # null study averages over the cells the observed mean does: those defined in the observed data
    # (a cell with fewer than three distinct sets, in some seed only, has no ρ under any shuffle).
    seeds = sorted(cells["seed"].unique())
    if defined_cells(cells).empty or any(samples.get(s) is None for s in seeds):
        return float("nan"), float("nan")
    null = null_means(defined_cells(cells)) if null is None else null
    found = null_study_layout(cells, summaries, samples, tasks)
    if found is None:
        return float("nan"), float("nan")
    layouts, units = found

    def set_means(values: np.ndarray, member: np.ndarray) -> np.ndarray:
        """(B, runs) -> (B, sets): the mean over each distinct set's runs."""
        return np.stack([values[:, member == k].mean(axis=1) for k in range(member.max() + 1)], axis=1)

    def decide(observed, replicates):
        rho, by_seed = [], {}
        for seed, layout in layouts.items():
            seed_rho, seed_reps = [], []
            for (member, perplexity, defined), obs, rep in zip(layout, observed[seed], replicates[seed]):
                if not defined:
                    continue
                accuracy = set_means(obs, member)
                seed_rho.append(spearman_rows(perplexity[None], accuracy)[0])
                seed_reps.append(
                    spearman_rows(np.broadcast_to(perplexity, (len(rep), len(perplexity))), set_means(rep, member))
                )
            rho += seed_rho
            if seed_rho:
                by_seed[seed] = (np.array(seed_rho), np.stack(seed_reps, axis=1))
        rho = np.array(rho)
        if not np.isfinite(rho).all():
            return UNSURE
        return either_rule(rho, by_seed, null, strong_rho, INNER_RESAMPLES)[2]

    rates = across_seeds_verdict_rates(units, decide, "accuracy")
    return rates.get(HOLDS, 0.0), rates.get(FAILS, 0.0)


def null_study_layout(cells: pd.DataFrame, summaries: dict, samples: dict, tasks: dict | None):
    """Per seed, per cell (model and M order): the runs' distinct-set membership, the sets'
    perplexities and whether the observed cell has a ρ (``layouts``), and the runs' per-document accuracies (``units``,
    ``noise_null.UnitScores``); None when a cell's runs lack per-document results."""
    from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS
    from depthprune.reporting.statistics.noise_null import unit_scores

    layouts: dict[int, list[tuple]] = {}
    units: dict[int, list] = {}
    for seed in sorted(cells["seed"].unique()):
        for r in cells[cells["seed"] == seed].sort_values(["model", "budget"]).itertuples(index=False):
            runs = summaries[seed]
            runs = runs[
                (runs["model"] == r.model)
                & (runs["budget"] == r.budget)
                & (runs["calibration"] == r.calibration)
                & (runs["algorithm"] != "dense")
            ].dropna(subset=["avg_perplexity", "avg_accuracy"])
            scores = unit_scores(
                samples[seed], runs, tasks[r.model] if tasks is not None else list(ZERO_SHOT_BENCHMARKS)
            )
            if scores is None:
                return None
            set_of = {removed: k for k, removed in enumerate(dict.fromkeys(runs["removed"]))}
            member = np.array([set_of[x] for x in runs["removed"]])
            perplexity = runs.groupby("removed", sort=False)["avg_perplexity"].mean().to_numpy(dtype=float)
            layouts.setdefault(int(seed), []).append((member, perplexity, bool(np.isfinite(r.rho))))
            units.setdefault(int(seed), []).append(scores)
    return layouts, units


# --------------------------------------------------------------------------- which search carries the mean


def finders_of(row) -> list[tuple[str, ...]]:
    """Each distinct set's finders (every algorithm that found it); a cell without the column counts
    each set's representative as its only finder."""
    finders = getattr(row, "finders", None)
    if isinstance(finders, (list, tuple)) and len(finders) == len(row.representatives):
        return [tuple(f) for f in finders]
    return [(a,) for a in row.representatives]


def without_algorithm(cells: pd.DataFrame, algorithm: str) -> pd.DataFrame:
    """The cells as if ``algorithm`` had not run: a set that only it found leaves its cell, a set that
    others found too stays with the next finder as its representative, and ρ is recomputed over the
    sets left (``distinct.spearman_rho``: NaN below three)."""
    from depthprune.reporting.statistics.distinct import spearman_rho

    rows = []
    for r in cells.itertuples(index=False):
        finders = finders_of(r)
        keep = [i for i, f in enumerate(finders) if set(f) - {algorithm}]
        perplexity, accuracy = np.asarray(r.perplexity)[keep], np.asarray(r.accuracy)[keep]
        rest = [tuple(a for a in finders[i] if a != algorithm) for i in keep]
        rows.append(
            {
                **r._asdict(),
                "rho": spearman_rho(perplexity, accuracy),
                "replicates": None,
                "perplexity": perplexity,
                "accuracy": accuracy,
                "representatives": [f[0] for f in rest],
                "finders": rest,
            }
        )
    return pd.DataFrame(rows, columns=cells.columns.union(["finders"], sort=False))


def most_influential(cells: pd.DataFrame, claimed_sign: int) -> dict | None:
    """The search whose removal moves the mean ρ over the defined cells the most: its name, the mean
    without it and that mean's magnitude verdict against its own joint null (``null_means`` of the
    reduced design). None with fewer than three searches."""
    algorithms = sorted({a for r in cells.itertuples(index=False) for f in finders_of(r) for a in f})
    if len(algorithms) < 3 or defined_cells(cells).empty:
        return None
    mean = float(np.mean(defined_cells(cells)["rho"]))
    best = None
    for algorithm in algorithms:
        reduced = defined_cells(without_algorithm(cells, algorithm))
        if reduced.empty:
            continue
        moved = abs(float(np.mean(reduced["rho"])) - mean)
        if best is None or moved > best[0]:
            best = (moved, algorithm, reduced)
    if best is None:
        return None
    _, algorithm, reduced = best
    reduced_mean = float(np.mean(reduced["rho"]))
    return {
        "algorithm": algorithm,
        "mean": reduced_mean,
        "cells": len(reduced),
        **magnitude_verdict(reduced_mean, null_means(reduced), claimed_sign),
    }


# --------------------------------------------------------------------------- a null where "weak" is wrong

BOUNDARY_STUDIES = 400  # simulated studies per boundary: MC SE ≤ 2.5 points at 20 %, as noise_null's
BOUNDARY_SEED = 20_261_208


def boundary_rates(
    by_seed: dict[int, tuple[np.ndarray, np.ndarray]],
    null: np.ndarray,
    strong_rho: float,
    studies: int = BOUNDARY_STUDIES,
    inner: int | None = None,
    seed: int = BOUNDARY_SEED,
) -> tuple[float, float]:
    """(weak pass, "negative or weak" pass) in studies where alignment is strong: the rates at which
    the weak part, and the whole "or", hold when they are false (docs/method.md §10, amended by issue
    66 item 5). ``by_seed``: seed -> (its cells' ρ, (B, cells) document replicates), B shared.

    A study is drawn as the data were sampled: S seeds with replacement and one document replicate b
    shared by them (the cells' ρ at b), every value shifted so that the median ρ of the pool sits at
    the boundary (−strong or +strong; clipped to [−1, 1]) and judged by the rule itself
    (``either_rule``: the drawn seeds' shifted replicates give the median's interval; the mean ρ
    against ``null``). Weak is false at either boundary: its rate is the larger of the two. The "or"
    is false only at +strong (a strong negative ρ is negative): its rate is that one."""
    from depthprune.reporting.statistics.noise_null import INNER_RESAMPLES

    inner = INNER_RESAMPLES if inner is None else inner
    seeds = sorted(by_seed)
    if not seeds:
        return float("nan"), float("nan")
    observed = float(np.median(np.concatenate([np.asarray(by_seed[s][0], dtype=float) for s in seeds])))
    n_documents = np.asarray(by_seed[seeds[0]][1]).shape[0]
    rng = np.random.default_rng([seed, len(seeds), studies, inner])
    weak_rates, either_rate = [], float("nan")
    for target in (-strong_rho, strong_rho):
        shift = target - observed
        shifted = {s: np.clip(np.asarray(by_seed[s][1], dtype=float) + shift, -1.0, 1.0) for s in seeds}
        weak_hits = either_hits = 0
        for _ in range(studies):
            drawn = rng.integers(len(seeds), size=len(seeds))
            document = int(rng.integers(n_documents))
            study = {i: (shifted[seeds[k]][document], shifted[seeds[k]]) for i, k in enumerate(drawn)}
            rho = np.concatenate([values for values, _ in study.values()])
            rho = rho[np.isfinite(rho)]  # a replicate whose ρ is undefined enters neither part
            _, weak, claim = either_rule(rho, study, null, strong_rho, inner)
            weak_hits += weak == HOLDS
            either_hits += claim == HOLDS
        weak_rates.append(weak_hits / studies)
        if target > 0:
            either_rate = either_hits / studies
    return max(weak_rates), either_rate

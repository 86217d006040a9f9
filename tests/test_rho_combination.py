"""§5.3 across seeds by magnitude (docs/method.md §10): the mean ρ over (seed, M) cells against a
null that permutes a seed's cells jointly, and the "negative or weak" disjunction (§7)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from depthprune.reporting.statistics.distinct import null_distribution
from depthprune.reporting.verdicts.alignment import either, either_noise_rates
from depthprune.reporting.verdicts.rho_combination import (
    cell_permuted_rho,
    magnitude_test,
    null_means,
    side_p_values,
    weak_verdict,
)
from depthprune.reporting.verdicts.rules import FAILS, HOLDS, UNSURE

ALGORITHMS = ["one_shot", "greedy", "beam", "ga", "bo", "cbo", "fast_block_select"]


def spearman(x, y) -> float:
    return float(pd.Series(x).rank().corr(pd.Series(y).rank()))


def linked_study(rng, n_seeds: int = 4) -> pd.DataFrame:
    """No association in any cell, but a seed's two M cells are the same algorithms' sets with the
    same perplexities and accuracies (the extreme of an algorithm keeping its standing across M)."""
    rows = []
    for seed in range(n_seeds):
        x, y = rng.permutation(7) + 1.0, rng.random(7)
        for budget in (7, 9):
            rows.append(
                {
                    "seed": seed,
                    "budget": budget,
                    "rho": spearman(x, y),
                    "perplexity": x,
                    "accuracy": y,
                    "representatives": ALGORITHMS,
                }
            )
    return pd.DataFrame(rows)


def test_a_seeds_two_cells_share_the_permutation_and_each_cell_keeps_its_exact_null():
    """Joint draws: two identical cells of a seed get the same ρ in every draw; a cell whose sets are
    represented by a subset of the algorithms still has its exact n! null (same distribution)."""
    rng = np.random.default_rng(3)
    keys = {a: rng.random(50_000) for a in ALGORITHMS}
    x, y = np.arange(7.0), rng.random(7)
    first = cell_permuted_rho(x, y, ALGORITHMS, keys)
    second = cell_permuted_rho(x, y, ALGORITHMS, keys)
    assert np.array_equal(first, second)
    subset = ["greedy", "ga", "cbo", "one_shot", "bo"]
    sub = cell_permuted_rho(x[:5], y[:5], subset, keys)
    exact = null_distribution(x[:5], y[:5])
    values, counts = np.unique(np.round(sub, 9), return_counts=True)
    exact_values, exact_counts = np.unique(np.round(exact, 9), return_counts=True)
    assert np.array_equal(values, exact_values)
    assert counts / counts.sum() == pytest.approx(exact_counts / exact_counts.sum(), abs=0.01)


def test_independent_cells_are_anti_conservative_when_a_seeds_cells_are_linked_and_the_joint_null_is_not():
    """Under no association, with each seed's two cells linked, 4,000 simulated studies' mean ρ
    exceeds the independent-cells null's one-sided 5 % critical value far more than 5 % of the time,
    and the joint null's about 5 % of the time (its critical value: the study's own design)."""
    rng = np.random.default_rng(11)
    design = linked_study(rng)
    critical = {
        joint: np.quantile(null_means(design, draws=40_000, seed=1, joint=joint), 0.95) for joint in (True, False)
    }
    # a study's mean: each seed's ρ between 1..7 and a random ranking, counted twice (its two cells)
    ranks = rng.random((4000, 4, 7)).argsort(axis=2).argsort(axis=2)
    rho = 1 - 6 * ((ranks - np.arange(7)) ** 2).sum(axis=2) / (7 * 48)
    studies = rho.mean(axis=1)
    rate = {joint: float(np.mean(studies > critical[joint] + 1e-12)) for joint in (True, False)}
    assert rate[True] <= 0.06
    assert rate[False] >= 0.09


def test_magnitude_verdicts_and_their_noise_rates():
    null = np.linspace(-1, 1, 2001)
    assert magnitude_test(0.99, null, 1)["verdict"] == HOLDS
    assert magnitude_test(0.99, null, -1)["verdict"] == FAILS
    assert magnitude_test(0.2, null, 1)["verdict"] == UNSURE
    test = magnitude_test(0.2, null, 1)
    assert test["null_pass_probability"] == pytest.approx(0.05, abs=0.002)
    assert test["null_fail_probability"] == pytest.approx(0.05, abs=0.002)
    above, below = side_p_values(1.0, null)
    assert above == pytest.approx(2 / 2002) and below == 1.0


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (HOLDS, HOLDS, HOLDS),
        (HOLDS, FAILS, HOLDS),
        (FAILS, HOLDS, HOLDS),
        (HOLDS, UNSURE, HOLDS),
        (UNSURE, HOLDS, HOLDS),
        (FAILS, FAILS, FAILS),
        (FAILS, UNSURE, UNSURE),
        (UNSURE, FAILS, UNSURE),
        (UNSURE, UNSURE, UNSURE),
    ],
)
def test_the_or_truth_table(first, second, expected):
    assert either(first, second) == expected


def test_weak_part_is_symmetric_and_needs_the_whole_interval():
    assert weak_verdict(-0.3, 0.4, 0.05, 0.5) == HOLDS
    assert weak_verdict(0.55, 0.9, 0.7, 0.5) == FAILS
    assert weak_verdict(-0.9, -0.6, -0.7, 0.5) == FAILS
    assert weak_verdict(-0.6, 0.2, -0.2, 0.5) == UNSURE
    assert weak_verdict(np.nan, np.nan, 0.11, 0.5) == HOLDS  # the paper's +0.11 is weak


def test_single_seed_or_is_what_noise_passes_almost_always():
    """Under no association the median of two cells is near zero, so "negative or weak" passes almost
    every null draw: the disjunction's own null rate (not its parts') makes the verdict uninformative."""
    nulls = [null_distribution(np.arange(6.0), np.arange(6.0)) for _ in range(2)]
    passed, failed = either_noise_rates(nulls, 0.5)
    assert passed > 0.5 and passed + failed == pytest.approx(1.0)
    tight, _ = either_noise_rates(nulls, 0.05)
    assert tight < passed


def synthetic_study(rng, n_docs: int = 20):
    """Two seeds × M ∈ {7, 9} under ppl_c4, five algorithms with distinct sets: summaries and
    per-document samples (0/1 on the six zero-shot tasks, the same documents in every run)."""
    from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS

    summaries, samples = {}, {}
    for seed in (0, 1):
        runs, rows = [], []
        for budget in (7, 9):
            for k, algorithm in enumerate(ALGORITHMS[:5]):
                key = {"model": "m", "calibration": "ppl_c4", "budget": budget, "algorithm": algorithm}
                removed = f"{k} {budget}"
                scores = {task: (rng.random(n_docs) < 0.5).astype(float) for task in ZERO_SHOT_BENCHMARKS}
                runs.append(
                    key
                    | {"removed": removed, "seed": seed, "avg_perplexity": 10.0 + rng.random()}
                    | {"avg_accuracy": float(np.mean([v.mean() for v in scores.values()]))}
                )
                for task, values in scores.items():
                    rows += [
                        key
                        | {"removed": removed, "benchmark": task, "unit": i, "metric": "acc", "value": v}
                        | {"headline": True, "seed": seed}
                        for i, v in enumerate(values)
                    ]
        summaries[seed], samples[seed] = pd.DataFrame(runs), pd.DataFrame(rows)
    return summaries, samples


def test_the_across_seeds_or_noise_rate_is_that_of_the_whole_rule(monkeypatch):
    """Null studies of the whole "or" rule: a weak band that holds every null median's interval (two
    seeds: t with one degree of freedom, so wide) makes noise pass nearly always through the weak
    part; a band none fits leaves only the negative part's ≤ 5 %."""
    from functools import partial

    from depthprune.reporting.statistics import noise_null
    from depthprune.reporting.verdicts import rho_combination
    from depthprune.reporting.verdicts.across_seeds import rho_cells

    fast = partial(noise_null.across_seeds_verdict_rates, n_null=40, n_inner=60)
    monkeypatch.setattr(noise_null, "across_seeds_verdict_rates", fast)
    monkeypatch.setattr(noise_null, "INNER_RESAMPLES", 60)
    summaries, samples = synthetic_study(np.random.default_rng(2))
    cells = rho_cells(summaries, {})
    assert len(cells) == 4 and cells["rho"].notna().all()
    wide = rho_combination.either_noise_rates(cells, summaries, samples, strong_rho=1e3)
    narrow = rho_combination.either_noise_rates(cells, summaries, samples, strong_rho=0.001)
    assert wide[0] >= 0.9 and narrow[0] <= 0.15


def test_a_cell_without_rho_in_one_seed_only_leaves_the_null_studies_whole(monkeypatch):
    """A cell whose searches found fewer than three distinct sets in one seed has no ρ there (as
    seed 3's M = 9 cell of the four-seed study without CBO): the null studies still pair the seeds
    cell for cell (they used to refuse: "seed 1's cells differ"), and average over the observed
    defined cells only, as the observed mean does."""
    from functools import partial

    from depthprune.reporting.statistics import noise_null
    from depthprune.reporting.verdicts import rho_combination
    from depthprune.reporting.verdicts.across_seeds import rho_cells

    fast = partial(noise_null.across_seeds_verdict_rates, n_null=40, n_inner=60)
    monkeypatch.setattr(noise_null, "across_seeds_verdict_rates", fast)
    monkeypatch.setattr(noise_null, "INNER_RESAMPLES", 60)
    summaries, samples = synthetic_study(np.random.default_rng(3))
    for frame in (summaries[1], samples[1]):  # seed 1, M = 9: every search finds the same two sets
        cell = (frame["budget"] == 9) & frame["algorithm"].isin(ALGORITHMS[:5])
        frame.loc[cell, "removed"] = np.where(frame.loc[cell, "algorithm"].isin(ALGORITHMS[:2]), "1 9", "2 9")
    one = summaries[1]
    for removed in ("1 9", "2 9"):  # one set, one score: its runs' averages agree
        same = one["removed"] == removed
        one.loc[same, ["avg_perplexity", "avg_accuracy"]] = (
            one.loc[same, ["avg_perplexity", "avg_accuracy"]].iloc[0].to_numpy()
        )
    cells = rho_cells(summaries, {})
    assert cells["rho"].isna().sum() == 1 and len(cells) == 4
    passed, failed = rho_combination.either_noise_rates(cells, summaries, samples, strong_rho=0.5)
    assert 0.0 <= passed <= 1.0 and 0.0 <= failed <= 1.0 and np.isfinite(passed + failed)

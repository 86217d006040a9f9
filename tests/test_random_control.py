"""Searches against random sets (docs/method.md §11; reporting/analysis/random_control.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from depthprune.reporting.analysis import random_control
from depthprune.reporting.statistics.bootstrap import document_replicates
from depthprune.reporting.style import PAPER_ALGORITHMS

TASKS = ("hellaswag", "arc_easy", "piqa")


def _study(search_p: float, random_p, n_docs: int, seed: int, rng_seed: int = 0):
    """Samples and summary of one seed: the seven searches under TLM at accuracy ``search_p`` and
    random sets at ``random_p`` (one value per set), 0/1 correctness per document."""
    rng = np.random.default_rng(rng_seed)
    runs = [("tlm_cs170k", a, search_p) for a in PAPER_ALGORITHMS]
    runs += [("none", f"random_set_{i:02d}", p) for i, p in enumerate(random_p)]
    rows, summary = [], []
    for j, (calibration, algorithm, p) in enumerate(runs):
        removed = " ".join(str(b) for b in sorted(rng.choice(28, 7, replace=False) + 1)) + f" #{j}"
        accuracies = []
        for task in TASKS:
            correct = (rng.random(n_docs) < p).astype(float)
            accuracies.append(correct.mean())
            rows.append(
                pd.DataFrame(
                    {
                        "model": "m",
                        "calibration": calibration,
                        "budget": 7,
                        "algorithm": algorithm,
                        "removed": removed,
                        "benchmark": task,
                        "unit": np.arange(n_docs),
                        "metric": "acc_norm",
                        "value": correct,
                        "headline": True,
                        "seed": seed,
                    }
                )
            )
        summary.append(
            {
                "model": "m",
                "calibration": calibration,
                "budget": 7,
                "algorithm": algorithm,
                "removed": removed,
                "seed": seed,
                "avg_accuracy": float(np.mean(accuracies)),
            }
        )
    return pd.concat(rows, ignore_index=True), pd.DataFrame(summary)


def _contrast(samples, summary, seed: int = 0):
    reps = document_replicates(samples, n_resamples=1000)
    return random_control.random_contrast(summary, reps, seed)


def test_searches_far_above_random_sets_are_above():
    samples, summary = _study(0.7, [0.4] * 8, 300, seed=0)
    table, _cells = _contrast(samples, summary)
    mean_row = table[table["comparison"] == random_control.SEARCH_MEAN].iloc[0]
    assert mean_row["verdict"] == random_control.ABOVE
    assert len(table) == 1 + len(PAPER_ALGORITHMS)
    assert mean_row["diff"] == pytest.approx(mean_row["acc_searches"] - mean_row["acc_random_sets"])
    samples, summary = _study(0.3, [0.6] * 8, 300, seed=0)
    table, _ = _contrast(samples, summary)
    assert table.iloc[0]["verdict"] == random_control.BELOW


def test_random_sets_are_resampled_as_sampled():
    """Random sets that differ among themselves widen the interval beyond the documents' share: the
    same difference is 'above' when the sets are alike and 'level' when they scatter widely."""
    spread = [0.2, 0.8, 0.2, 0.8, 0.25, 0.75, 0.3, 0.7]  # mean 0.5, a wide spread between sets
    samples, summary = _study(0.56, spread, 600, seed=0)
    table, _ = _contrast(samples, summary)
    wide = table.iloc[0]
    samples, summary = _study(0.56, [0.5] * 8, 600, seed=0)
    table, _ = _contrast(samples, summary)
    narrow = table.iloc[0]
    assert wide["se"] > 2 * narrow["se"]
    assert narrow["verdict"] == random_control.ABOVE
    assert wide["verdict"] == random_control.LEVEL


def test_noise_rates_of_the_rule_applied_are_near_nominal():
    """Under the exchange null each one-sided verdict is reached about 2.5 % of the time, one seed or
    two (the two-stage rule); the rates are those of the rule actually applied (both sum to 1)."""
    cells = {}
    for seed in (0, 1):
        samples, summary = _study(0.5, [0.5] * 8, 80, seed=seed, rng_seed=seed)
        ((runs, random_runs),) = random_control.cell_runs(summary).values()
        cells[seed] = random_control.null_cell(samples, runs, random_runs)
    one = random_control.noise_rates({0: cells[0]}, len(PAPER_ALGORITHMS), n_null=100)
    two = random_control.noise_rates(cells, len(PAPER_ALGORITHMS), n_null=100)
    for rates in (one, two):
        assert sum(rates.values()) == pytest.approx(1.0)
        assert rates.get(random_control.ABOVE, 0) + rates.get(random_control.BELOW, 0) < 0.15
        assert rates.get(random_control.LEVEL, 0) > 0.85


def test_each_seed_resamples_its_own_random_sets():
    """Issue 66: every seed drew its own random sets, so each resamples them independently; the
    documents, shared by the seeds, are resampled alike (the same bootstrap replicates)."""
    assert not np.array_equal(random_control.set_draws(8, 500, (7, 0)), random_control.set_draws(8, 500, (7, 1)))
    samples, summary = _study(0.56, [0.2, 0.8, 0.2, 0.8, 0.25, 0.75, 0.3, 0.7], 200, seed=0)
    reps = document_replicates(samples, n_resamples=1000)
    _, first = random_control.random_contrast(summary, reps, 0)
    _, second = random_control.random_contrast(summary, reps, 1)
    ((observed_0, replicates_0),) = first.values()
    ((observed_1, replicates_1),) = second.values()
    assert observed_0 == observed_1  # the same runs: the observed difference does not depend on the seed
    assert np.corrcoef(replicates_0, replicates_1)[0, 1] < 0.9  # the random-set resample does


def test_across_seeds_reads_every_seed():
    per_seed = {}
    for seed in (0, 1, 2):
        samples, summary = _study(0.65, [0.45] * 8, 300, seed=seed, rng_seed=seed)
        per_seed[seed] = _contrast(samples, summary, seed)[1]
    table = random_control.across_seeds(per_seed)
    row = table.iloc[0]
    assert row["n_seeds"] == 3 and row["calibration"] == "tlm_cs170k"
    assert row["verdict"] == random_control.ABOVE
    assert row["ci_low"] < row["diff"] < row["ci_high"]


def test_average_accuracy_is_over_the_tasks_the_study_evaluated():
    """An evaluation-only study of three tasks (§11) has an average accuracy, in the summary's rule
    and in the bootstrap's replicates alike; a run missing one of the study's tasks has none."""
    from depthprune.reporting.aggregate import evaluated_accuracy_tasks

    samples, summary = _study(0.6, [0.4] * 2, 50, seed=0)
    wide = summary.assign(**{f"acc_{t}": 0.5 for t in TASKS}, acc_boolq=np.nan)
    assert evaluated_accuracy_tasks(wide) == ("hellaswag", "arc_easy", "piqa")
    reps = document_replicates(samples, n_resamples=50)
    assert np.isfinite(reps.avg_accuracy).all()
    missing = samples[~((samples["algorithm"] == "random_set_00") & (samples["benchmark"] == "piqa"))]
    reps = document_replicates(missing, n_resamples=50)
    column = reps.column({"model": "m", "calibration": "none", "budget": 7, "algorithm": "random_set_00"})
    assert np.isnan(reps.avg_accuracy[:, column]).all()


def test_a_verdict_no_null_study_reached_has_rate_zero():
    table = pd.DataFrame(
        [
            {"model": "m", "budget": 7, "calibration": "tlm_cs170k", "verdict": random_control.BELOW},
            {"model": "m", "budget": 7, "calibration": "ppl_c4", "verdict": random_control.ABOVE},
        ]
    )
    rates = {("m", 7, "tlm_cs170k"): {random_control.LEVEL: 0.7, random_control.BELOW: 0.3}}
    out = random_control.with_noise(table, rates).set_index("calibration")
    assert out.loc["tlm_cs170k", "null_above"] == 0.0 and out.loc["tlm_cs170k", "verdict"] == "uninformative"
    assert np.isnan(out.loc["ppl_c4", "null_above"]) and out.loc["ppl_c4", "verdict"] == "holds"
    assert out.loc["ppl_c4", "side"] == random_control.ABOVE and out.loc["tlm_cs170k", "side"] == random_control.BELOW
    level = table.assign(verdict=random_control.LEVEL)
    assert set(random_control.with_noise(level, {})["verdict"]) == {"inconclusive"}


def test_noise_nulls_read_the_tasks_the_study_scored():
    """A study of three tasks (the rescore study) gets noise rates on all its rows: a task no run was
    scored on is left out of the null's scores, as of avg_accuracy; a run that lacks a scored task
    still has none."""
    from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS
    from depthprune.reporting.statistics.noise_null import unit_scores

    samples, summary = _study(0.6, [0.4] * 2, 20, seed=0)
    scores = unit_scores(samples, summary, list(ZERO_SHOT_BENCHMARKS))
    assert scores is not None and sorted(scores.values) == sorted(TASKS)
    lacking = samples[~((samples["algorithm"] == "random_set_00") & (samples["benchmark"] == "piqa"))]
    assert unit_scores(lacking, summary, list(ZERO_SHOT_BENCHMARKS)) is None
    assert unit_scores(samples, summary, ["boolq"]) is None

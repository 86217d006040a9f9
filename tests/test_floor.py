"""Floor tests per run (docs/method.md §7): each run's accuracy on a task against max(chance, majority)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from depthprune.reporting.statistics.floor import (
    ABOVE,
    AT_OR_BELOW,
    floor_counts,
    floor_markdown,
    floor_p_value,
    floor_tests,
)


def run_rows(algorithm: str, task: str, correct: np.ndarray, seed: int = 0, targets: np.ndarray | None = None):
    rows = [
        {
            "model": "m",
            "calibration": "none" if algorithm == "dense" else "ppl_c4",
            "budget": 0 if algorithm == "dense" else 7,
            "algorithm": algorithm,
            "removed": "",
            "benchmark": task,
            "unit": i,
            "metric": "acc",
            "value": float(v),
            "headline": True,
            "seed": seed,
        }
        for i, v in enumerate(correct)
    ]
    if targets is not None:
        rows += [{**r, "metric": "target", "value": float(t), "headline": False} for r, t in zip(rows, targets)]
    return rows


def test_floor_p_value_is_the_exact_one_sided_binomial():
    assert floor_p_value(60, 100, 0.5) == pytest.approx(binomtest(60, 100, 0.5, alternative="greater").pvalue)


def test_a_run_above_the_floor_and_one_at_it():
    """PIQA's floor is chance, 1/2: 80 of 100 is above it, 52 of 100 is not. BoolQ's floor is its
    majority answer: a run that answers "yes" to every document (70 % of them) scores exactly the floor."""
    yes = np.r_[np.ones(70), np.zeros(30)]
    rows = (
        run_rows("greedy", "piqa", np.r_[np.ones(80), np.zeros(20)])
        + run_rows("one_shot", "piqa", np.r_[np.ones(52), np.zeros(48)])
        + run_rows("greedy", "boolq", yes, targets=yes)
        + run_rows("one_shot", "boolq", yes, targets=yes)
    )
    table = floor_tests(pd.DataFrame(rows)).set_index(["algorithm", "task"])
    assert table.loc[("greedy", "piqa"), "verdict"] == ABOVE
    assert table.loc[("one_shot", "piqa"), "verdict"] == AT_OR_BELOW
    boolq = table.loc[("greedy", "boolq")]
    assert boolq["baseline"] == pytest.approx(0.7) and boolq["accuracy"] == pytest.approx(0.7)
    assert boolq["verdict"] == AT_OR_BELOW and boolq["n"] == 100


def test_counts_per_configuration_count_the_dense_model_once():
    rows = []
    for seed in (0, 1):
        rows += run_rows("dense", "piqa", np.r_[np.ones(90), np.zeros(10)], seed=seed)
        rows += run_rows("greedy", "piqa", np.r_[np.ones(90 - 40 * seed), np.zeros(10 + 40 * seed)], seed=seed)
    counts = floor_counts(floor_tests(pd.DataFrame(rows))).set_index("calibration")
    assert (counts.loc["none", "runs"], counts.loc["none", "above"]) == (1, 1)
    assert (counts.loc["ppl_c4", "runs"], counts.loc["ppl_c4", "above"]) == (2, 1)
    assert "| m | ppl_c4 | 7 | 1 of 2 |" in floor_markdown(floor_tests(pd.DataFrame(rows)))


def test_the_render_tests_every_run_of_every_seed(tmp_path):
    """Issue 66: floor_tests.csv held the first seed's runs only, while §7 tests each run."""
    from pathlib import Path

    from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS
    from depthprune.reporting.aggregate import KEY
    from depthprune.reporting.render import render

    aggregate = Path(__file__).resolve().parents[1] / "results" / "calibration_size" / "aggregate"
    render(aggregate, tmp_path, only={"analyses"}, bootstrap_resamples=200)
    tested = pd.read_csv(tmp_path / "tables" / "floor_tests.csv")
    samples = pd.read_parquet(aggregate / "samples.parquet")
    runs = samples[samples["headline"].astype(bool) & samples["benchmark"].isin(ZERO_SHOT_BENCHMARKS)]
    expected = runs[KEY].drop_duplicates()
    assert sorted(tested["seed"].unique()) == sorted(samples["seed"].unique()) and len(samples["seed"].unique()) > 1
    assert len(tested[KEY].drop_duplicates()) == len(expected)

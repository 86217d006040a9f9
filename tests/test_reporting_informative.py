"""Issue 46 item 5: the informative tasks (the dense model above its baseline with an interval that
excludes it) and the informative-task average, on a toy study with hand-computed answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from depthprune.reporting.analysis.contrast import calibration_contrast
from depthprune.reporting.statistics.baselines import task_baselines
from depthprune.reporting.statistics.bootstrap import document_replicates
from depthprune.reporting.statistics.informative import (
    INFORMATIVE_COLUMN,
    find_informative_tasks,
    informative_view,
    with_informative_average,
)
from depthprune.reporting.verdicts.decomposition import MEAN_OVER_ALGORITHMS, decomposition_table
from test_reporting_statistics import TASKS

N_DOCS = 40


def correct(k: int) -> np.ndarray:
    """0/1 scores of N_DOCS documents, the first k right."""
    return (np.arange(N_DOCS) < k).astype(float)


# The dense model: far above chance on HellaSwag (30/40 vs 1/4) and PIQA (36/40 vs 1/2); at chance on
# WinoGrande (20/40) and ARC-Easy (10/40); ARC-Challenge 12/40 = 0.30 is above 1/4 but its interval
# (about ±0.14) includes it; BoolQ 32/40 = 0.80 against its majority baseline 30/40 = 0.75 (yes on
# 30 documents): above, but not with an interval that excludes it.
DENSE = {"hellaswag": 30, "winogrande": 20, "arc_easy": 10, "arc_challenge": 12, "piqa": 36, "boolq": 32}
# Pruned runs: (calibration, algorithm) -> correct counts per task
RUNS = {
    ("ppl_c4", "greedy"): {
        "hellaswag": 20,
        "winogrande": 22,
        "arc_easy": 12,
        "arc_challenge": 9,
        "piqa": 24,
        "boolq": 30,
    },
    ("ppl_cs170k", "greedy"): {
        "hellaswag": 18,
        "winogrande": 21,
        "arc_easy": 11,
        "arc_challenge": 10,
        "piqa": 26,
        "boolq": 28,
    },
    ("tlm_cs170k", "greedy"): {
        "hellaswag": 10,
        "winogrande": 19,
        "arc_easy": 10,
        "arc_challenge": 11,
        "piqa": 20,
        "boolq": 30,
    },
    ("ppl_c4", "beam"): {
        "hellaswag": 22,
        "winogrande": 20,
        "arc_easy": 13,
        "arc_challenge": 10,
        "piqa": 28,
        "boolq": 29,
    },
    ("ppl_cs170k", "beam"): {
        "hellaswag": 21,
        "winogrande": 20,
        "arc_easy": 12,
        "arc_challenge": 10,
        "piqa": 27,
        "boolq": 30,
    },
    ("tlm_cs170k", "beam"): {
        "hellaswag": 12,
        "winogrande": 20,
        "arc_easy": 10,
        "arc_challenge": 10,
        "piqa": 22,
        "boolq": 30,
    },
}
BUDGET = 2


def _block(key, benchmark, metric, values) -> pd.DataFrame:
    model, calibration, budget, algorithm = key
    return pd.DataFrame(
        {
            "model": model,
            "calibration": calibration,
            "budget": budget,
            "algorithm": algorithm,
            "removed": "",
            "benchmark": benchmark,
            "unit": np.arange(len(values)),
            "metric": metric,
            "value": np.asarray(values, dtype=float),
            "headline": metric != "target",
            "seed": 0,
        }
    )


def toy_study():
    runs = {("m", "none", 0, "dense"): DENSE}
    runs.update({("m", cal, BUDGET, alg): counts for (cal, alg), counts in RUNS.items()})
    parts, rows = [], []
    for key, counts in runs.items():
        for task in TASKS:
            parts.append(_block(key, task, "acc", correct(counts[task])))
        # BoolQ's labels: "yes" (1) on 30 of the 40 documents
        parts.append(_block(key, "boolq", "target", correct(30)))
        model, calibration, budget, algorithm = key
        rows.append(
            {
                "model": model,
                "calibration": calibration,
                "budget": budget,
                "algorithm": algorithm,
                "seed": 0,
                "removed": "" if algorithm == "dense" else f"{algorithm} {calibration}",
                "avg_perplexity": 10.0,
                **{f"acc_{t}": counts[t] / N_DOCS for t in TASKS},
                "avg_accuracy": np.mean([counts[t] / N_DOCS for t in TASKS]),
            }
        )
    return pd.DataFrame(rows), pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def toy():
    summary, samples = toy_study()
    reps = document_replicates(samples, 2000, 0)
    baselines = task_baselines(samples)
    return summary, samples, reps, baselines, find_informative_tasks(summary, reps, baselines)


def test_informative_tasks_are_the_dense_models_tasks_above_their_baseline(toy):
    _, _, _, baselines, found = toy
    assert baselines.set_index("benchmark").loc["boolq", "baseline"] == pytest.approx(0.75)
    assert found.tasks == {"m": ["hellaswag", "piqa"]}
    assert found.label() == "hellaswag, piqa"
    table = found.table.set_index("benchmark")
    assert table.loc["piqa", "dense_accuracy"] == pytest.approx(0.9)
    # ARC-Challenge and BoolQ lie above their baselines, but their intervals include them
    assert table.loc["arc_challenge", "dense_accuracy"] > table.loc["arc_challenge", "baseline"]
    assert table.loc["arc_challenge", "dense_ci_low"] <= 0.25 and not table.loc["arc_challenge", "informative"]
    assert table.loc["boolq", "dense_ci_low"] <= 0.75 and not table.loc["boolq", "informative"]


def test_informative_average_is_the_hand_mean_in_the_summary_and_every_replicate(toy):
    summary, _, reps, _, found = toy
    view, view_reps = informative_view(summary, reps, found)
    run = (view["calibration"] == "ppl_c4") & (view["algorithm"] == "greedy")
    # (20 + 24) / 2 / 40 = 0.55, against the six-task average 117 / 240
    assert view.loc[run, "avg_accuracy"].item() == pytest.approx(0.55)
    assert summary.loc[run, "avg_accuracy"].item() == pytest.approx(117 / 240)
    dense = view["algorithm"] == "dense"
    assert view.loc[dense, "avg_accuracy"].item() == pytest.approx((30 + 36) / 80)
    column = reps.column(summary[run].iloc[0])
    hand = (reps.per_benchmark["hellaswag"][:, column] + reps.per_benchmark["piqa"][:, column]) / 2
    np.testing.assert_allclose(view_reps.avg_accuracy[:, column], hand, atol=1e-9)
    # the six-task replicates are untouched
    assert not np.allclose(reps.avg_accuracy[:, column], hand)
    extended, extended_reps = with_informative_average(summary, reps, found)
    assert extended.loc[run, INFORMATIVE_COLUMN].item() == pytest.approx(0.55)
    np.testing.assert_allclose(extended_reps.informative_avg_accuracy, view_reps.avg_accuracy)


def test_contrast_and_decomposition_on_the_informative_average(toy):
    summary, _, reps, baselines, found = toy
    view, view_reps = informative_view(summary, reps, found)
    # chance and baseline of the informative average: (1/4 + 1/2) / 2
    contrast = calibration_contrast(view, view_reps, found.baseline(baselines, "m"), found.chance("m"))
    mean = contrast[contrast["algorithm"] == MEAN_OVER_ALGORITHMS].iloc[0]
    assert mean["chance"] == pytest.approx(0.375) and mean["baseline"] == pytest.approx(0.375)
    # TLM (greedy (10+20)/80, beam (12+22)/80) against ppl_c4 ((20+24)/80, (22+28)/80)
    assert mean["diff_tlm_minus_ppl"] == pytest.approx(((30 - 44) + (34 - 50)) / 80 / 2)
    table = decomposition_table(*with_informative_average(summary, reps, found))
    rows = table[(table["algorithm"] == MEAN_OVER_ALGORITHMS) & (table["response"] == "informative_avg_accuracy")]
    steps = rows.set_index("effect")["estimate"]
    # objective step: tlm_cs170k − ppl_cs170k, greedy (30 − 44)/80, beam (34 − 48)/80, in points
    assert steps["objective"] == pytest.approx(100 * ((30 - 44) + (34 - 48)) / 80 / 2)
    # data step: ppl_cs170k − ppl_c4, greedy (44 − 44)/80, beam (48 − 50)/80
    assert steps["data"] == pytest.approx(100 * (0 - 2) / 80 / 2)
    # without the column, the decomposition has the six-task and perplexity responses only
    assert set(decomposition_table(summary, reps)["response"]) == {"avg_accuracy", "log10_avg_perplexity"}

"""Floor tests per run (docs/method.md §7, "Floor tests per run"): is each run's accuracy on a
zero-shot task above what a model that knows nothing scores there?

The floor of a task is its baseline max(chance, majority) (``baselines.task_baselines``). A run
with k correct answers among the n evaluated documents is tested with an exact one-sided binomial
test, H0: accuracy ≤ baseline, p = P(Binomial(n, baseline) ≥ k). The verdict is ``above`` when
p ≤ ALPHA, else ``at or below`` (the data do not place the run above the floor). Every run is
tested, the dense model included; the table describes the data and enters no claim's verdict.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import binom

from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS
from depthprune.reporting.aggregate import DENSE_ALGORITHM, KEY
from depthprune.reporting.statistics.baselines import task_baselines

ALPHA = 0.05
ABOVE, AT_OR_BELOW = "above", "at or below"
FLOOR_COLUMNS = [
    "model",
    "calibration",
    "seed",
    "budget",
    "algorithm",
    "task",
    "n",
    "accuracy",
    "baseline",
    "p_value",
    "verdict",
]
COUNT_COLUMNS = ["model", "calibration", "budget", "task", "runs", "above", "baseline"]


def floor_p_value(correct: int, n: int, baseline: float) -> float:
    """P(Binomial(n, baseline) ≥ correct): the exact one-sided p of "accuracy above baseline"."""
    return float(binom.sf(correct - 1, n, baseline))


def floor_tests(samples: pd.DataFrame | None) -> pd.DataFrame:
    """``tables/floor_tests.csv``: one row per (run, seed, zero-shot task) with its headline
    per-document results: n, accuracy, the task's baseline on that seed's documents, p and verdict."""
    if samples is None or samples.empty:
        return pd.DataFrame(columns=FLOOR_COLUMNS)
    head = samples[samples["headline"].astype(bool) & samples["benchmark"].isin(ZERO_SHOT_BENCHMARKS)]
    rows = []
    for seed, seed_rows in head.groupby("seed", sort=True):
        baselines = task_baselines(samples[samples["seed"] == seed]).set_index("benchmark")["baseline"]
        scores = seed_rows.groupby([*KEY, "benchmark"], sort=True)["value"].agg(["size", "sum"]).reset_index()
        for r in scores.itertuples(index=False):
            n, correct = int(r.size), int(np.rint(r.sum))
            baseline = float(baselines[r.benchmark])
            p = floor_p_value(correct, n, baseline)
            rows.append(
                {
                    "model": r.model,
                    "calibration": r.calibration,
                    "seed": int(seed),
                    "budget": int(r.budget),
                    "algorithm": r.algorithm,
                    "task": r.benchmark,
                    "n": n,
                    "accuracy": correct / n,
                    "baseline": baseline,
                    "p_value": p,
                    "verdict": ABOVE if p <= ALPHA else AT_OR_BELOW,
                }
            )
    return pd.DataFrame(rows, columns=FLOOR_COLUMNS)


def floor_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Per (model, calibration, M) configuration and task: the runs tested (over seeds and
    algorithms; the dense model once), how many lie above the floor, and the floor (its mean over
    seeds)."""
    if table.empty:
        return pd.DataFrame(columns=COUNT_COLUMNS)
    # The dense model is one run, repeated in every seed's slice of the aggregate: count it once.
    dense = table["algorithm"] == DENSE_ALGORITHM
    table = pd.concat([table[~dense], table[dense].drop_duplicates(["model", "task"])])
    grouped = table.assign(is_above=table["verdict"] == ABOVE).groupby(
        ["model", "calibration", "budget", "task"], sort=True
    )
    out = grouped.agg(runs=("verdict", "size"), above=("is_above", "sum"), baseline=("baseline", "mean"))
    return out.reset_index()[COUNT_COLUMNS]


def floor_markdown(table: pd.DataFrame) -> str:
    """The "Floor tests" section of observations.md: per configuration and task, the runs above the
    floor out of the runs tested."""
    counts = floor_counts(table)
    if counts.empty:
        return ""
    tasks = [t for t in ZERO_SHOT_BENCHMARKS if t in set(counts["task"])]
    lines = [
        "",
        "## Floor tests per run (docs/method.md §7)",
        "",
        "Runs whose accuracy on a task lies above its floor max(chance, majority) (exact one-sided binomial "
        f"test at the run's documents, p ≤ {ALPHA:g}), out of the runs tested (every seed and algorithm); "
        "per run: tables/floor_tests.csv. Description: no claim's verdict reads it.",
        "",
        "| model | calibration | M | " + " | ".join(tasks) + " |",
        "| --- | --- | --- | " + " | ".join("---" for _ in tasks) + " |",
    ]
    for (model, calibration, budget), group in counts.groupby(["model", "calibration", "budget"], sort=True):
        by_task = group.set_index("task")
        cells = [
            f"{int(by_task.loc[t, 'above'])} of {int(by_task.loc[t, 'runs'])}" if t in by_task.index else ""
            for t in tasks
        ]
        lines.append(f"| {model} | {calibration} | {budget if budget else '–'} | " + " | ".join(cells) + " |")
    floors = counts.groupby("task")["baseline"].mean()
    lines += ["", "Floors: " + ", ".join(f"{t} {100 * floors[t]:.1f} %" for t in tasks) + "."]
    return "\n".join(lines) + "\n"


def above_share(table: pd.DataFrame) -> float:
    """Share of pruned runs above the floor over all their tasks (NaN without runs)."""
    pruned = table[table["algorithm"] != DENSE_ALGORITHM]
    return float(np.mean(pruned["verdict"] == ABOVE)) if len(pruned) else float("nan")

"""Informative-task sensitivity (issue 46, docs/method.md §7 "Informative tasks").

A task on which the dense model itself does not beat the task's baseline (max(chance, majority),
``reporting/statistics/baselines.py``) carries no signal about what pruning removes: a pruned model can only
lose what the dense model had. The *informative tasks* of a model are those on which its dense
accuracy lies above the baseline with a 95 % document-bootstrap interval that excludes it
(``baselines.informative_tasks``; the dense model's replicates are ``Replicates.per_benchmark``, the
same resampled documents as every other run). The *informative average* of a run is the mean of
its accuracies over its model's informative tasks, in the summary and in every bootstrap replicate
(rounded to ``aggregate.TIE_DECIMALS`` as the six-task average).

``informative_view`` returns the summary and replicates with ``avg_accuracy`` replaced by the
informative average, so that every accuracy statistic and verdict can be recomputed on it unchanged
(sensitivity rows: they never enter a claim's own verdict).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS
from depthprune.reporting.aggregate import DENSE_ALGORITHM, TIE_DECIMALS
from depthprune.reporting.statistics.baselines import average_baseline, average_chance, informative_tasks

INFORMATIVE_COLUMN = "informative_avg_accuracy"
TASK_COLUMNS = [
    "model",
    "benchmark",
    "dense_accuracy",
    "dense_ci_low",
    "dense_ci_high",
    "baseline",
    "informative",
]


@dataclass
class InformativeTasks:
    """model -> its informative tasks (ZERO_SHOT_BENCHMARKS order), and the per-task table."""

    tasks: dict[str, list[str]]
    table: pd.DataFrame  # TASK_COLUMNS

    def label(self) -> str:
        """The task lists as one phrase, e.g. ``arc_easy, hellaswag, piqa`` (per model when they differ)."""
        lists = {model: ", ".join(tasks) if tasks else "none" for model, tasks in self.tasks.items()}
        if len(set(lists.values())) <= 1:
            return next(iter(lists.values()), "none")
        return "; ".join(f"{model}: {text}" for model, text in lists.items())

    def baseline(self, baselines: pd.DataFrame, model: str) -> float:
        """Baseline of ``model``'s informative average: the mean of its tasks' baselines (NaN if none)."""
        tasks = self.tasks.get(model, [])
        return average_baseline(baselines, tasks) if tasks else float("nan")

    def chance(self, model: str) -> float:
        """Chance level of ``model``'s informative average (NaN without an informative task)."""
        tasks = self.tasks.get(model, [])
        return average_chance(tasks) if tasks else float("nan")


def find_informative_tasks(summary: pd.DataFrame, reps, baselines: pd.DataFrame) -> InformativeTasks:
    """Each model's informative tasks, from its dense row of ``summary`` (observed accuracies) and
    its column of ``reps.per_benchmark`` (replicates). Without replicates no interval exists and no
    task is informative."""
    rows, tasks = [], {}
    dense_rows = summary[summary["algorithm"] == DENSE_ALGORITHM].drop_duplicates("model")
    for _, dense_row in dense_rows.iterrows():
        observed = {b: float(dense_row[f"acc_{b}"]) for b in ZERO_SHOT_BENCHMARKS if f"acc_{b}" in dense_row}
        column = reps.column(dense_row) if reps is not None and reps.per_benchmark else None
        replicates = (
            {b: reps.per_benchmark[b][:, column] for b in ZERO_SHOT_BENCHMARKS if b in reps.per_benchmark}
            if column is not None
            else {}
        )
        names, frame = informative_tasks(baselines, replicates, observed)
        tasks[dense_row["model"]] = names
        rows.append(frame.assign(model=dense_row["model"]))
    table = pd.concat(rows, ignore_index=True)[TASK_COLUMNS] if rows else pd.DataFrame(columns=TASK_COLUMNS)
    return InformativeTasks(tasks=tasks, table=table)


def informative_average(summary: pd.DataFrame, found: InformativeTasks) -> pd.Series:
    """Each row's mean accuracy over its model's informative tasks (NaN when the model has none)."""
    values = np.full(len(summary), np.nan)
    for j, (model, row) in enumerate(zip(summary["model"], summary.itertuples(index=False))):
        tasks = found.tasks.get(model, [])
        if tasks:
            values[j] = np.mean([getattr(row, f"acc_{t}") for t in tasks])
    return pd.Series(np.round(values, TIE_DECIMALS), index=summary.index, name=INFORMATIVE_COLUMN)


def informative_replicates(reps, found: InformativeTasks) -> np.ndarray | None:
    """(B, runs) replicates of the informative average, column for column with ``reps.keys``."""
    if reps is None or not reps.per_benchmark:
        return None
    out = np.full((reps.n_resamples, len(reps.keys)), np.nan)
    for j, model in enumerate(reps.keys["model"]):
        tasks = found.tasks.get(model, [])
        if tasks and all(t in reps.per_benchmark for t in tasks):
            out[:, j] = np.mean([reps.per_benchmark[t][:, j] for t in tasks], axis=0)
    return np.round(out, TIE_DECIMALS)


def with_informative_average(summary: pd.DataFrame, reps, found: InformativeTasks):
    """(summary with the INFORMATIVE_COLUMN, replicates with ``informative_avg_accuracy``)."""
    out = summary.assign(**{INFORMATIVE_COLUMN: informative_average(summary, found)})
    if reps is None:
        return out, None
    return out, dataclasses.replace(reps, informative_avg_accuracy=informative_replicates(reps, found))


def informative_view(summary: pd.DataFrame, reps, found: InformativeTasks):
    """(summary, replicates) whose ``avg_accuracy`` is the informative average: every accuracy
    statistic computed on them is its informative-task sensitivity."""
    out = summary.assign(avg_accuracy=informative_average(summary, found))
    if reps is None:
        return out, None
    return out, dataclasses.replace(reps, avg_accuracy=informative_replicates(reps, found))


def informative_tasks_markdown(found: InformativeTasks) -> list[str]:
    """Lines of observations.md: the per-task table behind the informative task list."""
    lines = [
        "| model | task | dense accuracy | 95% interval | baseline | informative |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in found.table.itertuples(index=False):
        ci = "–" if pd.isna(r.dense_ci_low) else f"[{100 * r.dense_ci_low:.1f}, {100 * r.dense_ci_high:.1f}]"
        lines.append(
            f"| {r.model} | {r.benchmark} | {100 * r.dense_accuracy:.1f} | {ci} | {100 * r.baseline:.1f} | "
            f"{'yes' if r.informative else 'no'} |"
        )
    return lines


def contrast_pairs(contrast: pd.DataFrame, informative_contrast: pd.DataFrame) -> list[tuple[str, str, str]]:
    """calibration_contrast's verdicts for the mean over the algorithms (TLM against perplexity
    pruning, TLM-pruned against the baseline), on all six tasks beside the informative tasks."""
    from depthprune.reporting.analysis.contrast import MEAN_OVER_ALGORITHMS

    if contrast is None or informative_contrast is None or informative_contrast.empty:
        return []
    key = ["model", "budget"]
    main = contrast[contrast["algorithm"] == MEAN_OVER_ALGORITHMS].set_index(key)
    sens = informative_contrast[informative_contrast["algorithm"] == MEAN_OVER_ALGORITHMS].set_index(key)
    several = main.index.get_level_values("model").nunique() > 1
    pairs = []
    for (model, budget), row in main.iterrows():
        if (model, budget) not in sens.index:
            continue
        where = f"{model} M={budget}" if several else f"M={budget}"
        other = sens.loc[(model, budget)]
        pairs.append(
            (f"TLM − perplexity pruning, {where}, mean of the algorithms", row["tlm_vs_ppl"], other["tlm_vs_ppl"])
        )
        pairs.append(
            (
                f"TLM-pruned vs baseline, {where}, mean of the algorithms",
                row["tlm_vs_baseline"],
                other["tlm_vs_baseline"],
            )
        )
    return pairs

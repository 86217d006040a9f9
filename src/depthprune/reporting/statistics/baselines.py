"""What a model that knows nothing scores on each zero-shot task: chance and the majority baseline.

- ``chance`` of a task is one over its number of choices (``CHANCE_ACCURACY``).
- ``majority`` is the accuracy of the best constant answer on the evaluated documents. It is
  computed only for a task whose labels mean something (``LABELLED_TASKS``: BoolQ's no / yes, where
  always answering "yes" is a strategy a pruned model can fall into). For ARC, HellaSwag, PIQA and
  WinoGrande the answer's position is arbitrary: the most frequent position in a sample of documents
  reflects only sampling noise, and no model can exploit it, so chance stays 1/k there
  (docs/method.md §7, "Baselines").
- ``baseline`` = max(chance, majority): "above chance" in every table and sentence means above it.

The labels come from the per-document results (``samples.parquet``, metric ``target``: the index of
the correct choice, 0 = no and 1 = yes for BoolQ). Every function takes the aggregate's tidy
samples frame (columns model, calibration, budget, algorithm, removed, benchmark, unit, metric,
value, headline, seed).

Informative tasks (``informative_tasks``): the tasks on which the dense model's accuracy lies above
its task's baseline with a 95 % document-bootstrap interval that excludes the baseline; an average
over the others measures nothing the dense model could do.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS

# Tasks whose answer labels carry meaning (a constant answer is a strategy), so the majority
# baseline applies; elsewhere the answer positions are arbitrary and chance is 1/k.
LABELLED_TASKS = ("boolq",)
TARGET_METRIC = "target"
BASELINE_COLUMNS = ["benchmark", "n_documents", "chance", "majority", "majority_answer", "baseline"]


# Chance accuracy of each zero-shot task: one over its number of choices (ARC-E and ARC-C have a few
# items with three or five choices; their nominal four is used). Their mean over the six tasks, 37.5 %,
# is the level below which a pruned model's average accuracy says nothing about the task.
CHANCE_ACCURACY = {
    "hellaswag": 1 / 4,
    "winogrande": 1 / 2,
    "arc_easy": 1 / 4,
    "arc_challenge": 1 / 4,
    "piqa": 1 / 2,
    "boolq": 1 / 2,
}


def chance_accuracy() -> float:
    """Chance level of the average accuracy over the six zero-shot tasks (Tables 2-3)."""
    return float(np.mean([CHANCE_ACCURACY[name] for name in ZERO_SHOT_BENCHMARKS]))


def majority_accuracy(labels: Iterable[int]) -> tuple[int, float]:
    """(the most frequent label, its share): the accuracy of always giving that answer. Ties go to
    the smaller label; an empty sequence gives (-1, NaN)."""
    values = np.asarray(list(labels), dtype=float)
    if values.size == 0:
        return -1, float("nan")
    # labels are stored as floats: round, so a last-digit difference cannot change an answer
    answers, counts = np.unique(np.rint(values).astype(int), return_counts=True)
    best = int(np.argmax(counts))  # first of the largest counts: the smallest label on a tie
    return int(answers[best]), float(counts[best] / values.size)


def document_labels(samples: pd.DataFrame, benchmark: str) -> pd.Series:
    """Each evaluated document's correct answer (index: unit) for ``benchmark``; every run scores the
    same documents, so the labels are read from the first run that has them."""
    rows = samples[(samples["benchmark"] == benchmark) & (samples["metric"] == TARGET_METRIC)]
    if rows.empty:
        return pd.Series(dtype=float)
    first = rows[["model", "calibration", "budget", "algorithm"]].iloc[0]
    mask = np.logical_and.reduce([rows[k].to_numpy() == first[k] for k in first.index])
    return rows[mask].set_index("unit")["value"].sort_index()


def task_baselines(samples: pd.DataFrame | None, tasks: Iterable[str] = ZERO_SHOT_BENCHMARKS) -> pd.DataFrame:
    """One row per zero-shot task: documents, chance, majority (labelled tasks with per-document
    labels; NaN elsewhere), the majority answer and the baseline max(chance, majority)."""
    rows = []
    for task in tasks:
        chance = CHANCE_ACCURACY[task]
        labels = document_labels(samples, task) if samples is not None and task in LABELLED_TASKS else pd.Series()
        answer, majority = majority_accuracy(labels) if len(labels) else (-1, float("nan"))
        n_docs = len(labels)
        if samples is not None and not n_docs:
            n_docs = int(samples.loc[samples["benchmark"] == task, "unit"].nunique())
        baseline = max(chance, majority) if np.isfinite(majority) else chance
        rows.append(
            {
                "benchmark": task,
                "n_documents": n_docs,
                "chance": chance,
                "majority": majority,
                "majority_answer": answer if np.isfinite(majority) else "",
                "baseline": baseline,
            }
        )
    return pd.DataFrame(rows, columns=BASELINE_COLUMNS)


def average_baseline(baselines: pd.DataFrame, tasks: Iterable[str] = ZERO_SHOT_BENCHMARKS) -> float:
    """The baseline of the average accuracy over ``tasks``: the mean of their baselines."""
    table = baselines.set_index("benchmark")
    return float(np.mean([table.loc[t, "baseline"] for t in tasks]))


def average_chance(tasks: Iterable[str] = ZERO_SHOT_BENCHMARKS) -> float:
    """Chance level of the average accuracy over ``tasks``."""
    return float(np.mean([CHANCE_ACCURACY[t] for t in tasks]))


def informative_tasks(baselines: pd.DataFrame, dense_replicates: dict[str, np.ndarray], dense: dict[str, float]):
    """Tasks on which the dense model is above its baseline with a 95 % interval excluding it.

    ``dense``: benchmark -> the dense model's observed accuracy; ``dense_replicates``: benchmark ->
    its bootstrap replicates (1-D). Returns (informative task names in ``baselines``' order, a frame
    with benchmark, dense accuracy, interval, baseline and ``informative``)."""
    from depthprune.reporting.statistics.bootstrap import interval

    rows = []
    for r in baselines.itertuples(index=False):
        reps = dense_replicates.get(r.benchmark)
        lo, hi = interval(reps) if reps is not None else (float("nan"), float("nan"))
        accuracy = dense.get(r.benchmark, float("nan"))
        rows.append(
            {
                "benchmark": r.benchmark,
                "dense_accuracy": accuracy,
                "dense_ci_low": lo,
                "dense_ci_high": hi,
                "baseline": r.baseline,
                "informative": bool(np.isfinite(lo) and lo > r.baseline),
            }
        )
    frame = pd.DataFrame(
        rows, columns=["benchmark", "dense_accuracy", "dense_ci_low", "dense_ci_high", "baseline", "informative"]
    )
    return [b for b, ok in zip(frame["benchmark"], frame["informative"]) if ok], frame

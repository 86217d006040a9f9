"""The nine evaluation benchmarks (docs/method.md §6) and the settings that change their numbers.

``BENCHMARKS`` is the one table of what is evaluated: every other place (evaluation, aggregation,
tables, figures) reads it, so adding a benchmark is one row here plus its lm-eval task YAML in
``tasks/`` when lm-eval scores it. Two words are kept apart:

- ``kind`` says which average and table a benchmark enters: ``"perplexity"`` (WikiText-2, C4 and
  LAMBADA: Table 1, ``avg_perplexity``) or ``"zero_shot"`` (the six multiple-choice tasks: Tables 2-3,
  ``avg_accuracy``);
- ``lm_eval_task`` says who computes it: lm-evaluation-harness (LAMBADA and the six tasks) or, when
  None, this package (``depthprune.evaluation.perplexity``: WikiText-2 and C4).

This module imports neither torch nor pandas. ``EvalSettings`` holds every option that can change a
figure; it is what the evaluation cache keys on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from depthprune.errors import InputError

PERPLEXITY = "perplexity"
ZERO_SHOT = "zero_shot"


@dataclass(frozen=True)
class Benchmark:
    name: str  # the --tasks name, the metrics.csv `benchmark` value
    kind: str  # PERPLEXITY or ZERO_SHOT: the average and table it enters (docs/method.md §7)
    lm_eval_task: str | None  # the lm-eval task (tasks/<task>.yaml); None: depthprune.evaluation.perplexity
    metrics: tuple[str, ...]  # what it reports (lm-eval's metric names)
    header: str  # short column header of the tables
    title: str  # full name, for captions
    group: str  # the benchmark family named in captions and docs (docs/method.md §6)

    @property
    def headline(self) -> str:
        """The metric tables and figures use by default: perplexity for the perplexity benchmarks,
        acc_norm where the task has it and acc otherwise (docs/method.md §6, a configurable choice)."""
        if self.kind == PERPLEXITY:
            return "perplexity"
        return "acc_norm" if "acc_norm" in self.metrics else "acc"

    @property
    def column(self) -> str:
        """Its headline column in the aggregate summary: ``ppl_<name>`` or ``acc_<name>`` (a fraction)."""
        return f"{'ppl' if self.kind == PERPLEXITY else 'acc'}_{self.name}"


_ACC = ("acc", "acc_norm")
BENCHMARK_TABLE: tuple[Benchmark, ...] = (
    Benchmark("wikitext2", PERPLEXITY, None, ("perplexity",), "W2", "WikiText-2", "language modelling"),
    Benchmark("c4", PERPLEXITY, None, ("perplexity",), "C4", "C4", "language modelling"),
    Benchmark(
        "lambada_openai", PERPLEXITY, "lambada_openai", ("perplexity", "acc"), "LMB", "LAMBADA", "language modelling"
    ),
    Benchmark("hellaswag", ZERO_SHOT, "hellaswag", _ACC, "Hella", "HellaSwag", "commonsense reasoning"),
    Benchmark("winogrande", ZERO_SHOT, "winogrande", ("acc",), "Wino", "WinoGrande", "commonsense reasoning"),
    Benchmark("arc_easy", ZERO_SHOT, "arc_easy", _ACC, "ARC-E", "ARC-Easy", "commonsense reasoning"),
    Benchmark("arc_challenge", ZERO_SHOT, "arc_challenge", _ACC, "ARC-C", "ARC-Challenge", "commonsense reasoning"),
    Benchmark("piqa", ZERO_SHOT, "piqa", _ACC, "PIQA", "PIQA", "commonsense reasoning"),
    Benchmark("boolq", ZERO_SHOT, "boolq", ("acc",), "BoolQ", "BoolQ", "commonsense reasoning"),
)
BENCHMARK_SPECS: dict[str, Benchmark] = {b.name: b for b in BENCHMARK_TABLE}

BENCHMARKS = tuple(BENCHMARK_SPECS)  # canonical order
PERPLEXITY_BENCHMARKS = tuple(b.name for b in BENCHMARK_TABLE if b.kind == PERPLEXITY)  # Table 1
ZERO_SHOT_BENCHMARKS = tuple(b.name for b in BENCHMARK_TABLE if b.kind == ZERO_SHOT)  # Tables 2-3
CORPUS_PERPLEXITIES = tuple(b.name for b in BENCHMARK_TABLE if b.lm_eval_task is None)  # computed here
LM_EVAL_TASKS = tuple(b.name for b in BENCHMARK_TABLE if b.lm_eval_task is not None)
METRICS = {b.name: b.metrics for b in BENCHMARK_TABLE}
PERPLEXITY_COLUMNS = tuple(b.column for b in BENCHMARK_TABLE if b.kind == PERPLEXITY)  # summary: avg_perplexity
ACCURACY_COLUMNS = tuple(b.column for b in BENCHMARK_TABLE if b.kind == ZERO_SHOT)  # summary: avg_accuracy

# The columns of metrics.csv and samples.parquet (written by evaluation.run, read by reporting).
_ROW_LABELS = ["model", "calibration", "budget", "algorithm", "removed", "benchmark"]
METRICS_COLUMNS = [*_ROW_LABELS, "metric", "value", "stderr", "n", "headline"]
SAMPLES_COLUMNS = [*_ROW_LABELS, "unit", "metric", "value", "headline"]  # one row per document


def benchmarks_of(kind: str) -> tuple[Benchmark, ...]:
    return tuple(b for b in BENCHMARK_TABLE if b.kind == kind)


def default_headline(benchmark: str) -> str:
    return BENCHMARK_SPECS[benchmark].headline


def parse_benchmarks(text: str | None) -> tuple[str, ...]:
    """``"wikitext2,piqa"`` -> validated tuple in canonical order; None (option not given) -> all nine.

    An empty list (``--tasks ""``) is an error, not "all": it is almost always a bad variable.
    """
    if text is None:
        return BENCHMARKS
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise InputError(
            f"--tasks {text!r}: no benchmark named; choose from {', '.join(BENCHMARKS)} (omit --tasks for all)"
        )
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise InputError(f"--tasks: unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    return tuple(b for b in BENCHMARKS if b in names)


def parse_limit_per_task(items: list[str] | None) -> dict[str, int]:
    """``["hellaswag=1000", "piqa=1000"]`` -> {task: documents} (``--limit-per-task``), validated
    against the benchmark names; EvalSettings checks them against --tasks."""
    out: dict[str, int] = {}
    for item in items or ():
        for part in item.split(","):
            if not part.strip():
                continue
            task, sep, count = part.partition("=")
            task = task.strip()
            if not sep or task not in LM_EVAL_TASKS or not count.strip().isdigit():
                raise InputError(
                    f"--limit-per-task {part!r}: expected TASK=N, TASK one of {', '.join(LM_EVAL_TASKS)}, N documents"
                )
            out[task] = int(count)
    return out


def parse_headline_overrides(items: list[str] | None) -> dict[str, str]:
    """``["hellaswag=acc", "lambada_openai=acc"]`` -> {benchmark: metric}, validated."""
    out: dict[str, str] = {}
    for item in items or ():
        for part in item.split(","):
            if not part.strip():
                continue
            benchmark, sep, metric = part.partition("=")
            benchmark, metric = benchmark.strip(), metric.strip()
            if not sep or benchmark not in METRICS:
                raise InputError(
                    f"--headline-metric {part!r}: expected BENCHMARK=METRIC, BENCHMARK one of {', '.join(BENCHMARKS)}"
                )
            if metric not in METRICS[benchmark]:
                raise InputError(
                    f"--headline-metric {part!r}: {benchmark} reports {', '.join(METRICS[benchmark])}, not {metric!r}"
                )
            out[benchmark] = metric
    return out


@dataclass(frozen=True)
class EvalSettings:
    """Everything that changes an evaluation figure (besides the model and the removed set).

    ``limit``: first N documents of each lm-eval task (None = all); ``limit_per_task`` overrides it for
    the tasks it names (``{"hellaswag": 1000}``; empty: ``limit`` for all). ``ppl_max_tokens``: cap on the
    tokens per perplexity benchmark (None = the whole text), rounded down to whole windows.
    ``data_dir``: offline mirror (None = Hugging Face hub). ``headline`` overrides are labels only and
    do not enter the cache key.
    """

    benchmarks: tuple[str, ...] = BENCHMARKS
    limit: int | None = None
    limit_per_task: dict[str, int] = field(default_factory=dict)
    ppl_seq_len: int = 2048
    ppl_max_tokens: int | None = None
    batch_size: int = 8
    bootstrap_iters: int = 1000  # lm-eval's bootstrap for LAMBADA's perplexity stderr
    data_dir: Path | None = None
    headline: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.ppl_seq_len < 2:
            raise InputError(f"--ppl-seq-len must be at least 2, got {self.ppl_seq_len}")
        if self.ppl_max_tokens is not None and self.ppl_max_tokens < self.ppl_seq_len:
            raise InputError(
                f"--ppl-max-tokens ({self.ppl_max_tokens}) must be at least --ppl-seq-len ({self.ppl_seq_len})"
            )
        if self.limit is not None and self.limit < 1:
            raise InputError(f"--limit must be a positive number of documents, got {self.limit}")
        if self.batch_size < 1:
            raise InputError(f"--batch-size must be positive, got {self.batch_size}")
        unknown = [b for b in self.benchmarks if b not in METRICS]
        if unknown:
            raise InputError(f"unknown benchmark(s): {', '.join(unknown)}")
        for task, count in self.limit_per_task.items():
            if task not in self.benchmarks or task not in LM_EVAL_TASKS:
                raise InputError(
                    f"--limit-per-task {task}={count}: {task} is not an lm-eval task of --tasks "
                    f"({', '.join(b for b in self.benchmarks if b in LM_EVAL_TASKS) or 'none'})"
                )
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise InputError(f"--limit-per-task {task}={count}: must be a positive number of documents")

    def task_limit(self, task: str) -> int | None:
        """Documents of lm-eval task ``task``: its ``limit_per_task`` entry, else ``limit``."""
        return self.limit_per_task.get(task, self.limit)

    def headline_metric(self, benchmark: str) -> str:
        return self.headline.get(benchmark) or default_headline(benchmark)

    def replace(self, **changes) -> EvalSettings:
        return dataclasses.replace(self, **changes)

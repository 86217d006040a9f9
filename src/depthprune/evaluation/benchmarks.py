"""The nine evaluation benchmarks (docs/method.md §6) and the settings that change their numbers.

Three are perplexities (WikiText-2 and C4 computed in this package, LAMBADA through lm-eval), six are
zero-shot multiple-choice accuracies through lm-evaluation-harness. ``EvalSettings`` holds every
option that can change a figure; it is what the evaluation cache keys on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

PERPLEXITY_BENCHMARKS = ("wikitext2", "c4")  # computed by depthprune.evaluation.perplexity
LM_EVAL_TASKS = ("lambada_openai", "hellaswag", "winogrande", "arc_easy", "arc_challenge", "piqa", "boolq")
BENCHMARKS = PERPLEXITY_BENCHMARKS + LM_EVAL_TASKS
ZERO_SHOT_TASKS = LM_EVAL_TASKS[1:]

# Metrics each benchmark reports (lm-eval's metric names); winogrande and boolq have no acc_norm.
METRICS = {
    "wikitext2": ("perplexity",),
    "c4": ("perplexity",),
    "lambada_openai": ("perplexity", "acc"),
    "hellaswag": ("acc", "acc_norm"),
    "winogrande": ("acc",),
    "arc_easy": ("acc", "acc_norm"),
    "arc_challenge": ("acc", "acc_norm"),
    "piqa": ("acc", "acc_norm"),
    "boolq": ("acc",),
}


def default_headline(benchmark: str) -> str:
    """The metric tables and figures use: perplexity for the three perplexity benchmarks,
    acc_norm where the task has it and acc otherwise (docs/method.md §6, a configurable choice)."""
    metrics = METRICS[benchmark]
    if "perplexity" in metrics:
        return "perplexity"
    return "acc_norm" if "acc_norm" in metrics else "acc"


def parse_benchmarks(text: str | None) -> tuple[str, ...]:
    """``"wikitext2,piqa"`` -> validated tuple in canonical order; None (option not given) -> all nine.

    An empty list (``--tasks ""``) is an error, not "all": it is almost always a bad variable.
    """
    if text is None:
        return BENCHMARKS
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ValueError(
            f"--tasks {text!r}: no benchmark named; choose from {', '.join(BENCHMARKS)} (omit --tasks for all)"
        )
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise ValueError(f"--tasks: unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    return tuple(b for b in BENCHMARKS if b in names)


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
                raise ValueError(
                    f"--headline-metric {part!r}: expected BENCHMARK=METRIC, BENCHMARK one of {', '.join(BENCHMARKS)}"
                )
            if metric not in METRICS[benchmark]:
                raise ValueError(
                    f"--headline-metric {part!r}: {benchmark} reports {', '.join(METRICS[benchmark])}, not {metric!r}"
                )
            out[benchmark] = metric
    return out


@dataclass(frozen=True)
class EvalSettings:
    """Everything that changes an evaluation figure (besides the model and the removed set).

    ``limit``: first N documents of each lm-eval task (None = all). ``ppl_max_tokens``: cap on the
    tokens per perplexity benchmark (None = the whole text), rounded down to whole windows.
    ``data_dir``: offline mirror (None = Hugging Face hub). ``headline`` overrides are labels only and
    do not enter the cache key.
    """

    benchmarks: tuple[str, ...] = BENCHMARKS
    limit: int | None = None
    ppl_seq_len: int = 2048
    ppl_max_tokens: int | None = None
    batch_size: int = 8
    bootstrap_iters: int = 1000  # lm-eval's bootstrap for LAMBADA's perplexity stderr
    data_dir: Path | None = None
    headline: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.ppl_seq_len < 2:
            raise ValueError(f"--ppl-seq-len must be at least 2, got {self.ppl_seq_len}")
        if self.ppl_max_tokens is not None and self.ppl_max_tokens < self.ppl_seq_len:
            raise ValueError(
                f"--ppl-max-tokens ({self.ppl_max_tokens}) must be at least --ppl-seq-len ({self.ppl_seq_len})"
            )
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be a positive number of documents, got {self.limit}")
        if self.batch_size < 1:
            raise ValueError(f"--batch-size must be positive, got {self.batch_size}")
        unknown = [b for b in self.benchmarks if b not in METRICS]
        if unknown:
            raise ValueError(f"unknown benchmark(s): {', '.join(unknown)}")

    def headline_metric(self, benchmark: str) -> str:
        return self.headline.get(benchmark) or default_headline(benchmark)

    def replace(self, **changes) -> EvalSettings:
        return dataclasses.replace(self, **changes)

"""``depthprune timing <name>`` (alias ``bench``): timing scripts that print their figures.

Each module listed in ``TIMINGS`` exposes ``add_arguments`` and ``run`` (heavy imports inside ``run``).
"Timing", not "benchmark": benchmarks are what ``depthprune evaluate`` scores (docs/method.md §6).
"""

from __future__ import annotations

import importlib

TIMINGS = {
    "evaluator": ("depthprune.timing.evaluator", "subset evaluator: cached vs from-scratch on prior + greedy"),
    "search": (
        "depthprune.timing.search",
        "the searches (the paper's seven and the random-init controls) with one shared evaluator",
    ),
    "evaluate": ("depthprune.timing.evaluate", "dense-model evaluation with the default preset's settings"),
    "stages": ("depthprune.timing.stages", "per-stage job times of a pipeline run, from benchmarks/"),
    "allocator": (
        "depthprune.timing.allocator",
        "glibc's default memory allocator against keep_freed_memory, on calibration and evaluation",
    ),
    "normaliser": (
        "depthprune.timing.normaliser",
        "the LM head's logsumexp in one call against a few rows at a time, alone and on calibration",
    ),
}


def register(subparsers) -> None:
    timing = subparsers.add_parser("timing", aliases=["bench"], help="timing scripts that print their figures")
    inner = timing.add_subparsers(dest="timing", metavar="TIMING", required=True)
    for name, (module_name, help_text) in TIMINGS.items():
        parser = inner.add_parser(name, help=help_text)
        module = importlib.import_module(module_name)  # light at import: heavy imports live in run()
        module.add_arguments(parser)
        parser.set_defaults(func=module.run)

"""``depthprune bench <name>``: each benchmark module exposes ``add_arguments`` and ``run``."""

from __future__ import annotations

import importlib

BENCHMARKS = {
    "evaluator": ("depthprune.bench.evaluator", "subset evaluator: cached vs from-scratch on prior + greedy"),
    "search": (
        "depthprune.bench.search",
        "the searches (the paper's seven and the random-init controls) with one shared evaluator",
    ),
    "evaluate": ("depthprune.bench.evaluate", "dense-model evaluation with the default profile's settings"),
    "stages": ("depthprune.bench.stages", "per-stage job times of a pipeline run, from benchmarks/"),
}


def register(subparsers) -> None:
    bench = subparsers.add_parser("bench", help="benchmarks that print their figures")
    inner = bench.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name, (module_name, help_text) in BENCHMARKS.items():
        parser = inner.add_parser(name, help=help_text)
        module = importlib.import_module(module_name)  # light at import: heavy imports live in run()
        module.add_arguments(parser)
        parser.set_defaults(func=module.run)

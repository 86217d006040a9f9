"""``depthprune timing <name>`` (alias ``bench``): timing scripts that print their figures.

Each module listed in ``TIMINGS`` exposes ``add_arguments`` and ``run`` (heavy imports inside ``run``).
This module is the timings' CLI edge: ``run`` takes keyword arguments, not the namespace; each is
the option of its name, except ``model_setup`` (the model options as a ``ModelSetup``) and
``eval_settings`` (the evaluation options as ``EvalSettings``), built here (``run_options``).
"Timing", not "benchmark": benchmarks are what ``depthprune evaluate`` scores (docs/method.md §6).
"""

from __future__ import annotations

import functools
import importlib
import inspect

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
        parser.set_defaults(func=functools.partial(run_timing, module.run))


def model_setup_of(args):
    from depthprune.cli_common import model_setup

    return model_setup(args)


def eval_settings_of(args):
    from depthprune.evaluation.cli import settings_from_args

    return settings_from_args(args)


# The setups a timing's ``run`` may ask for by parameter name, built from the namespace.
SETUPS = {"model_setup": model_setup_of, "eval_settings": eval_settings_of}


def run_options(run, args) -> dict:
    """The keyword arguments of a timing's ``run``: a setup of ``SETUPS`` by its name, else the option
    of the parameter's name."""
    return {
        name: SETUPS[name](args) if name in SETUPS else getattr(args, name)
        for name in inspect.signature(run).parameters
    }


def run_timing(run, args) -> int:
    return run(**run_options(run, args))

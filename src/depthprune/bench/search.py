"""``python -m depthprune bench search``: all seven searches, two budgets, one shared evaluator.

Prints, per (budget, algorithm), the distinct evaluations, memo hits, blocks run, seconds, removed
set and loss, and last ``search: blocks_ratio=R``: the decoder blocks actually run (dense capture,
prior, every search, CBO's gated pass) divided by what a naive implementation would run — every
evaluation request from scratch, no memo, nothing shared between algorithms or budgets, a set S
costing N − |S| blocks, repeats included.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from depthprune.cli_common import add_calibration_args, add_evaluator_args, add_model_args, build_evaluator
from depthprune.io import format_layers
from depthprune.prior import compute_prior
from depthprune.search import ALGORITHMS
from depthprune.search.cli import parse_params
from depthprune.search.runner import run_search

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="embedded:smollm2-135m", help="model spec (default: the embedded SmolLM2-135M)")
    parser.add_argument("--calibration", default="ppl_c4")
    parser.add_argument("--data-dir", help="offline data mirror (default: Hugging Face hub)")
    parser.add_argument("--n-samples", type=int, default=8, help="calibration samples (small: a CPU benchmark)")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per calibration sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budgets", type=int, nargs="+", default=[7, 9], metavar="M")
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=list(ALGORITHMS), metavar="ALGORITHM")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="ALGORITHM.KEY=VALUE",
        help="hyper-parameter override for one algorithm, e.g. bo.n_trials=50 (repeatable)",
    )
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--model-cache-dir", default=None, help="converted checkpoints (default: cli_common's)")
    parser.add_argument("--workdir", help="BO studies (default: a fresh temporary folder, so nothing is resumed)")


def evaluator_arguments(args: argparse.Namespace) -> argparse.Namespace:
    """The shared model/calibration/evaluator arguments, with cli_common's defaults for the rest."""
    parser = argparse.ArgumentParser()
    add_model_args(parser)
    add_calibration_args(parser)
    add_evaluator_args(parser)
    argv = [
        "--model", args.model, "--calibration", args.calibration, "--n-samples", str(args.n_samples),
        "--seq-len", str(args.seq_len), "--seed", str(args.seed), "--device", args.device, "--dtype", args.dtype,
    ]  # fmt: skip
    if args.data_dir:
        argv += ["--data-dir", args.data_dir]
    if args.model_cache_dir:
        argv += ["--model-cache-dir", args.model_cache_dir]
    return parser.parse_args(argv)


def algorithm_params(items: list[str]) -> dict[str, dict]:
    """``["bo.n_trials=50"]`` → {"bo": {"n_trials": 50}}."""
    per_algorithm: dict[str, list[str]] = defaultdict(list)
    for item in items:
        name, dot, rest = item.partition(".")
        if not dot or name not in ALGORITHMS:
            raise ValueError(f"--param {item!r}: expected ALGORITHM.KEY=VALUE with ALGORITHM one of {', '.join(ALGORITHMS)}")
        per_algorithm[name].append(rest)
    return {name: parse_params(values) for name, values in per_algorithm.items()}


def run(args: argparse.Namespace) -> int:
    params = algorithm_params(args.param)
    started = time.perf_counter()
    evaluator = build_evaluator(evaluator_arguments(args))
    n = evaluator.n_layers
    # The evaluator's capture pass computed L(∅): one request a naive implementation makes too.
    naive_blocks = n
    prior = compute_prior(evaluator)
    naive_blocks += sum(n - 1 for s in prior["scores"] if s is not None)
    print(
        f"model={args.model} calibration={args.calibration} N={n} samples={args.n_samples}x{args.seq_len} "
        f"prior: {prior['cost']['blocks_run']} blocks, {prior['cost']['seconds']:.1f} s"
    )
    header = f"{'M':>2} {'algorithm':<18} {'distinct':>8} {'memo':>6} {'blocks':>7} {'seconds':>8}  {'loss':>9}  removed"
    print(header)
    with tempfile.TemporaryDirectory(prefix="bench-search-") as scratch:
        workdir = Path(args.workdir or scratch)
        for budget in args.budgets:
            for name in args.algorithms:
                result = run_search(
                    evaluator,
                    name,
                    budget,
                    prior["scores"],
                    seed=args.seed,
                    workdir=workdir / f"M{budget}" / name,
                    params=params.get(name),
                    prior_seconds=prior["cost"]["seconds"],
                )
                naive_blocks += result.naive_blocks
                print(
                    f"{budget:>2} {name:<18} {result.distinct_evaluations:>8} {result.memo_hits:>6} "
                    f"{result.blocks_run:>7} {result.search_seconds:>8.1f}  {result.loss:>9.5f}  [{format_layers(result.removed)}]",
                    flush=True,
                )
    blocks_run = evaluator.stats.blocks_run  # cumulative since the evaluator was built
    print(f"total: blocks_run={blocks_run} naive_blocks={naive_blocks} seconds={time.perf_counter() - started:.1f}")
    print(f"search: blocks_ratio={blocks_run / naive_blocks:.4f}")
    return 0

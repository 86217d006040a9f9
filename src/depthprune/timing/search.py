"""``python -m depthprune timing search``: every search of the study (the paper's seven and the
random-initialisation controls), two budgets, one shared evaluator.

Prints, per (budget, algorithm), the distinct evaluations, memo hits, blocks run, seconds, removed
set and loss; then ``search: blocks_ratio=R``: the decoder blocks actually run (dense capture,
prior, every search, CBO's gated pass and diagnostic sets) divided by what a naive implementation
would run — every evaluation request from scratch, no memo, nothing shared between algorithms or
budgets, a set S costing N − |S| blocks, repeats included; then
``search-quality: bo_distinct_min=D fbs_differs=K/C``: the fewest distinct sets any BO run
(bo, bo_random) evaluated, and in how many of the C budgets fast_block_select's set differs from
one-shot's.

``--exhaustive M ...`` also enumerates every M-subset (the true optimum) and prints
``optimality: M=<M> optimum=<L>``, then each algorithm's gap (its loss minus the optimum) and the
rank of its set among all C(N, M) subsets (1 = the optimum; ties share the better rank).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from depthprune.calibration.setup import CalibrationSetup
from depthprune.cli_common import device_option
from depthprune.engine.setup import EvaluatorSetup
from depthprune.errors import InputError
from depthprune.io import format_layers
from depthprune.models import DTYPE_CHOICES
from depthprune.models.setup import ModelSetup
from depthprune.paths import MODEL_CACHE_DIR
from depthprune.prior import compute_prior
from depthprune.search import ALGORITHMS, STUDY_ALGORITHMS
from depthprune.search.cli import parse_params
from depthprune.seeding import seed_option

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", default="embedded:smollm2-135m", help="model spec (default: the embedded SmolLM2-135M)"
    )
    parser.add_argument("--calibration", default="ppl_c4")
    parser.add_argument("--data-dir", help="offline data mirror (default: Hugging Face hub)")
    parser.add_argument("--n-samples", type=int, default=8, help="calibration samples (small: a CPU benchmark)")
    parser.add_argument("--seq-len", type=int, default=128, help="tokens per calibration sample")
    parser.add_argument("--seed", type=seed_option, default=0)
    parser.add_argument(
        "--budgets",
        type=int,
        nargs="+",
        default=None,
        metavar="M",
        help="budgets of the main table (default: 7 9; with --exhaustive: its budgets)",
    )
    parser.add_argument(
        "--algorithms", nargs="+", default=list(STUDY_ALGORITHMS), choices=list(STUDY_ALGORITHMS), metavar="ALGORITHM"
    )
    parser.add_argument(
        "--exhaustive",
        type=int,
        nargs="+",
        default=[],
        metavar="M",
        help="also enumerate every M-subset and report each algorithm's optimality gap and rank",
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="ALGORITHM.KEY=VALUE",
        help="hyper-parameter override for one algorithm, e.g. bo.n_trials=50 (repeatable)",
    )
    parser.add_argument("--device", type=device_option, default="auto")
    parser.add_argument("--dtype", default="auto", choices=list(DTYPE_CHOICES))
    parser.add_argument("--model-cache-dir", default=None, help="converted checkpoints (default: cli_common's)")
    parser.add_argument("--workdir", help="BO studies (default: a fresh temporary folder, so nothing is resumed)")


def algorithm_params(items: list[str]) -> dict[str, dict]:
    """``["bo.n_trials=50"]`` → {"bo": {"n_trials": 50}}."""
    per_algorithm: dict[str, list[str]] = defaultdict(list)
    for item in items:
        name, dot, rest = item.partition(".")
        if not dot or name not in ALGORITHMS:
            raise InputError(
                f"--param {item!r}: expected ALGORITHM.KEY=VALUE with ALGORITHM one of {', '.join(ALGORITHMS)}"
            )
        per_algorithm[name].append(rest)
    return {name: parse_params(values) for name, values in per_algorithm.items()}


def run(
    model: str,
    calibration: str,
    data_dir: str | None,
    n_samples: int,
    seq_len: int,
    seed: int,
    budgets: list[int] | None,
    algorithms: list[str],
    exhaustive: list[int],
    param: list[str],
    device: str,
    dtype: str,
    model_cache_dir: str | None,
    workdir: str | None,
) -> int:
    from depthprune.search.runner import run_search  # pandas: imported when the timing runs

    params = algorithm_params(param)
    budgets = budgets or (sorted(set(exhaustive)) if exhaustive else [7, 9])
    started = time.perf_counter()
    # The evaluator as `depthprune prior/search` build it, every other option at its default.
    model_setup = ModelSetup(model, dtype=dtype, device=device, cache_dir=model_cache_dir or MODEL_CACHE_DIR)
    calibration_setup = CalibrationSetup(
        calibration, n_samples=n_samples, seq_len=seq_len, seed=seed, data_dir=data_dir or None
    )
    evaluator = EvaluatorSetup().build(model_setup, calibration_setup)
    n = evaluator.n_layers
    # The evaluator's capture pass computed L(∅): one request a naive implementation makes too.
    naive_blocks = n
    prior = compute_prior(evaluator)
    naive_blocks += sum(n - 1 for s in prior["scores"] if s is not None)
    print(
        f"model={model} calibration={calibration} N={n} samples={n_samples}x{seq_len} "
        f"prior: {prior['cost']['blocks_run']} blocks, {prior['cost']['seconds']:.1f} s"
    )
    header = (
        f"{'M':>2} {'algorithm':<18} {'distinct':>8} {'memo':>6} {'blocks':>7} {'seconds':>8}  {'loss':>9}  removed"
    )
    print(header)
    results = {}
    with tempfile.TemporaryDirectory(prefix="timing-search-") as scratch:
        folder = Path(workdir or scratch)

        def search(name: str, budget: int):
            result = run_search(
                evaluator,
                name,
                budget,
                prior["scores"],
                seed=seed,
                workdir=folder / f"M{budget}" / name,
                params=params.get(name),
                prior_seconds=prior["cost"]["seconds"],
            )
            nonlocal naive_blocks
            naive_blocks += result.naive_blocks + int(result.diagnostics.get("diagnostic_naive_blocks", 0))
            print_search(name, budget, result)
            results[budget, name] = result
            return result

        for budget in budgets:
            for name in algorithms:
                search(name, budget)
        optimality_lines = []
        for budget in exhaustive:
            truth = search("exhaustive", budget)
            losses = sorted(e.loss for e in truth.trace)
            optimality_lines.append(f"optimality: M={budget} optimum={truth.loss:.5f} subsets={len(losses)}")
            for name in algorithms:
                result = results.get((budget, name)) or search(name, budget)
                rank = 1 + sum(loss < result.loss for loss in losses)
                optimality_lines.append(f"  {name:<18} gap={result.loss - truth.loss:.5f} rank={rank}/{len(losses)}")
    blocks_run = evaluator.stats.blocks_run  # cumulative since the evaluator was built
    print(f"total: blocks_run={blocks_run} naive_blocks={naive_blocks} seconds={time.perf_counter() - started:.1f}")
    print(f"search: blocks_ratio={blocks_run / naive_blocks:.4f}")
    print_quality(results, budgets)
    for line in optimality_lines:
        print(line)
    return 0


def print_search(name: str, budget: int, result) -> None:
    """One search's line (and CBO's energy-loss correlations)."""
    print(
        f"{budget:>2} {name:<18} {result.distinct_evaluations:>8} {result.memo_hits:>6} "
        f"{result.blocks_run:>7} {result.search_seconds:>8.1f}  {result.loss:>9.5f}  [{format_layers(result.removed)}]",
        flush=True,
    )
    d = result.diagnostics
    if "energy_loss_spearman_reranked" in d:  # cbo and its exact-pairs control
        print(
            f"   {name} energy-loss spearman: reranked={_fmt(d.get('energy_loss_spearman_reranked'))} "
            f"random{d.get('n_random', 0)}={_fmt(d.get('energy_loss_spearman_random'))}",
            flush=True,
        )


def print_quality(results: dict, budgets) -> None:
    """The search-quality line: the fewest distinct sets of a BO run, and where fast_block_select's set
    differs from one-shot's, over the main table's budgets."""
    bo_distinct = [
        r.distinct_evaluations for (m, name), r in results.items() if name in ("bo", "bo_random") and m in budgets
    ]
    fbs_cells = [m for m in budgets if (m, "fast_block_select") in results and (m, "one_shot") in results]
    differs = sum(results[m, "fast_block_select"].removed != results[m, "one_shot"].removed for m in fbs_cells)
    print(
        f"search-quality: bo_distinct_min={min(bo_distinct) if bo_distinct else 'NA'} fbs_differs={differs}/{len(fbs_cells)}"
    )


def _fmt(value) -> str:
    return "NA" if value is None else f"{value:.3f}"

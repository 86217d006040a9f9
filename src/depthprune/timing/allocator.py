"""Timing of the memory-allocator setting (depthprune/allocator.py): glibc's default against
``keep_freed_memory``, on the same workloads, results compared bit for bit.

The setting is process-wide and glibc cannot be put back exactly as it started (any ``mallopt`` of
the trim or mmap threshold switches off its adaptive mmap threshold for good), so each run is a fresh
child process (``python -m depthprune timing allocator --child``) with ``DEPTHPRUNE_MALLOC`` set to
``system`` or ``keep``; the two settings alternate, ``--rounds`` times each, so that a drifting
machine speed falls on both. Each child loads the model and times two workloads:

- calibration: the single-layer prior plus a greedy pass to M = ``--budget`` under ``ppl_c4`` at
  the default study's size (8 x 64 tokens), as ``depthprune prior`` and ``search`` evaluate sets;
- evaluation: WikiText-2 perplexity (4 windows of ``--ppl-seq-len`` = 2048 tokens) and HellaSwag
  (``--limit`` documents) for the dense model and ``--sets`` (default: the three of ``timing
  evaluate --compare``) in one pass, as ``depthprune evaluate`` runs them.

The last line is ``allocator: calibration_ratio=R1 evaluation_ratio=R2 results_equal=yes|no``
(keep's median wall time over system's, per workload) with the median seconds and the children's
peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from depthprune import allocator
from depthprune.models import DTYPE_CHOICES
from depthprune.timing.evaluate import COMPARE_SETS

MODES = ("system", "keep")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="embedded:smollm2-135m")
    parser.add_argument("--dtype", default="auto", choices=list(DTYPE_CHOICES))
    parser.add_argument("--data-dir", help="offline mirror (default: hub)")
    parser.add_argument("--budget", type=int, default=9, help="greedy pass length M")
    parser.add_argument("--limit", type=int, default=25, help="HellaSwag documents of the evaluation workload")
    parser.add_argument(
        "--sets", nargs="*", default=list(COMPARE_SETS), help="removed sets evaluated beside the dense model"
    )
    parser.add_argument("--ppl-seq-len", type=int, default=2048, help="WikiText-2 window (4 windows are scored)")
    parser.add_argument("--rounds", type=int, default=2, help="child runs per setting")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def run(
    model: str,
    dtype: str,
    data_dir: str | None,
    budget: int,
    limit: int,
    sets: list[str],
    ppl_seq_len: int,
    rounds: int,
    child: bool,
) -> int:
    if child:
        return _child(model, dtype, data_dir, budget, limit, sets, ppl_seq_len)
    return _parent(model, dtype, data_dir, budget, limit, sets, ppl_seq_len, rounds)


def _parent(
    model: str,
    dtype: str,
    data_dir: str | None,
    budget: int,
    limit: int,
    sets: list[str],
    ppl_seq_len: int,
    rounds: int,
) -> int:
    command = [sys.executable, "-m", "depthprune", "timing", "allocator", "--child"]
    options = {
        "model": model,
        "dtype": dtype,
        "data_dir": data_dir,
        "budget": budget,
        "limit": limit,
        "ppl_seq_len": ppl_seq_len,
    }
    for flag, value in options.items():
        if value is not None:
            command += ["--" + flag.replace("_", "-"), str(value)]
    command += ["--sets", *sets]
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    for round_index in range(rounds):
        for mode in MODES:
            env = {**os.environ, allocator.ENV_VAR: mode}
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                sys.stderr.write(done.stderr[-4000:])
                raise RuntimeError(f"the {mode} child exited with {done.returncode}")
            result = json.loads(done.stdout.strip().splitlines()[-1])
            runs[mode].append(result)
            print(
                f"round {round_index + 1} {mode:<6}: calibration {result['calibration_seconds']:.1f}s "
                f"evaluation {result['evaluation_seconds']:.1f}s peak RSS {result['max_rss_mb']:.0f} MB "
                f"(dtype {result['dtype']}, allocator setting in force: {result['kept']})",
                flush=True,
            )
    first = runs["system"][0]
    equal = all(r["losses"] == first["losses"] and r["scores"] == first["scores"] for mode in MODES for r in runs[mode])
    median = {
        (mode, part): statistics.median(r[f"{part}_seconds"] for r in runs[mode])
        for mode in MODES
        for part in ("calibration", "evaluation")
    }
    rss = {mode: max(r["max_rss_mb"] for r in runs[mode]) for mode in MODES}
    print(
        "median seconds: "
        + " ".join(f"{mode}/{part}={seconds:.1f}" for (mode, part), seconds in median.items())
        + f"; peak RSS MB system={rss['system']:.0f} keep={rss['keep']:.0f}"
    )
    print(
        f"allocator: calibration_ratio={median[('keep', 'calibration')] / median[('system', 'calibration')]:.3f} "
        f"evaluation_ratio={median[('keep', 'evaluation')] / median[('system', 'evaluation')]:.3f} "
        f"results_equal={'yes' if equal else 'no'}"
    )
    return 0


def _child(
    model: str, dtype: str, data_dir: str | None, budget: int, limit: int, sets: list[str], ppl_seq_len: int
) -> int:
    import dataclasses
    import resource
    from pathlib import Path

    from depthprune.evaluation.run import EvalSettings, evaluate_sets
    from depthprune.io import parse_layers
    from depthprune.models.loading import dtype_name, load_model
    from depthprune.timing.evaluator import calibration_workload, workload_setups

    loaded = load_model(model, dtype=dtype, device="cpu")
    setups = workload_setups(model, "ppl_c4", n_samples=8, seq_len=64, seed=0, data_dir=data_dir or None, dtype=dtype)
    evaluator, calibration_seconds, losses, _ = calibration_workload(setups, budget, loaded)
    del evaluator

    settings = EvalSettings(
        benchmarks=("wikitext2", "hellaswag"),
        limit=limit,
        ppl_seq_len=ppl_seq_len,
        ppl_max_tokens=4 * ppl_seq_len,
        batch_size=8,
        bootstrap_iters=0,
        data_dir=Path(data_dir).resolve() if data_dir else None,
        headline={},
    )
    removed_sets = [(), *(parse_layers(text) for text in sets)]
    evaluate_sets(loaded.model, loaded.tokenizer, dataclasses.replace(settings, limit=2), removed_sets)  # warm-up
    started = time.perf_counter()
    evaluations = evaluate_sets(loaded.model, loaded.tokenizer, settings, removed_sets)
    evaluation_seconds = time.perf_counter() - started
    scores = [[row["value"] for row in evaluations[s].samples] for s in removed_sets]  # window NLLs, log-likelihoods
    print(
        json.dumps(
            {
                "calibration_seconds": calibration_seconds,
                "evaluation_seconds": evaluation_seconds,
                "losses": losses,
                "scores": scores,
                "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "dtype": dtype_name(next(loaded.model.parameters()).dtype),
                "kept": allocator.in_force(),
            }
        )
    )
    return 0

"""Benchmark of the subset evaluator: the same workload with and without its caches.

Workload (issue: engine §7): the single-layer prior plus one full greedy pass to M = 9 under
``ppl_c4``, on the embedded model, in float32. Run twice in one process: the evaluator as the
pipeline uses it (memo, state cache, batch trie), and in ``no_cache`` mode (every set from scratch,
nothing remembered). Prints blocks run, wall seconds and the largest loss difference, then one
summary line.

Under ``tlm_cs170k`` a third run scores each item's candidates as separate sequences (cached
evaluator, ``--tlm-context separate``) against the default shared-context rows; the summary adds
``tlm_shared_ratio`` (shared wall time / separate wall time, same workload) and ``losses_equal``
then also requires every loss of the two to agree within 1e-4 absolute. ``--skip-uncached`` leaves
out the (slow) no-cache run.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from depthprune.seeding import seed_option


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="embedded:smollm2-135m")
    parser.add_argument("--data-dir", help="offline mirror (default: hub)")
    parser.add_argument("--calibration", default="ppl_c4")
    parser.add_argument("--n-samples", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--budget", type=int, default=9, help="greedy pass length M")
    parser.add_argument("--seed", type=seed_option, default=0)
    parser.add_argument(
        "--skip-uncached", action="store_true", help="leave out the no-cache run (blocks_ratio is then not printed)"
    )


def workload_setups(
    model: str,
    calibration: str,
    n_samples: int,
    seq_len: int,
    seed: int,
    data_dir: str | None,
    no_cache: bool = False,
    tlm_context: str = "shared",
    dtype: str = "float32",
):
    """The model, calibration and evaluator setups of the timing workload on the CPU: what `depthprune
    prior/search` build from these options, every other option at its default."""
    from depthprune.calibration.setup import CalibrationSetup
    from depthprune.engine.setup import EvaluatorSetup
    from depthprune.models.setup import ModelSetup

    return (
        ModelSetup(model, dtype=dtype, device="cpu"),
        CalibrationSetup(
            calibration, n_samples=n_samples, seq_len=seq_len, seed=seed, tlm_context=tlm_context, data_dir=data_dir
        ),
        EvaluatorSetup(no_cache=no_cache),
    )


def calibration_workload(setups, budget: int, loaded=None):
    """The prior plus a greedy pass to ``budget`` with the evaluator of ``setups`` (``workload_setups``).
    Returns (evaluator, wall seconds, every loss, search result)."""
    from depthprune.prior import compute_prior
    from depthprune.search.runner import run_search

    model, calibration, engine = setups
    started = time.perf_counter()
    evaluator = engine.build(model, calibration, loaded=loaded)
    prior = compute_prior(evaluator)
    with tempfile.TemporaryDirectory() as workdir:
        result = run_search(evaluator, "greedy", budget, prior["scores"], calibration.seed, workdir)
    wall = time.perf_counter() - started
    losses = [prior["empty_loss"], *prior["scores"]] + [entry.loss for entry in result.trace]
    return evaluator, wall, losses, result


def run(
    model: str,
    data_dir: str | None,
    calibration: str,
    n_samples: int,
    seq_len: int,
    budget: int,
    seed: int,
    skip_uncached: bool,
) -> int:
    from depthprune.models.loading import load_model

    loaded = load_model(model, dtype="float32", device="cpu")
    tlm = calibration == "tlm_cs170k"
    modes = [("cached", False, "shared")]
    if not skip_uncached:
        modes.append(("uncached", True, "shared"))
    if tlm:
        modes.append(("separate", False, "separate"))
    rows = {}
    for label, no_cache, context in modes:
        setups = workload_setups(model, calibration, n_samples, seq_len, seed, data_dir or None, no_cache, context)
        evaluator, wall, losses, result = calibration_workload(setups, budget, loaded)
        rows[label] = (evaluator.stats, wall, losses, result)
        n_layers = evaluator.n_layers
        del evaluator  # free the cached states before the next run
    c_stats, c_wall, c_losses, c_result = rows["cached"]
    equal = True
    print(
        f"workload: prior ({n_layers} + 1 sets) + greedy to M={budget} under {calibration}, "
        f"{n_samples} x {seq_len} tokens, {model}, float32"
    )
    print(f"{'mode':<10}{'evaluations':>13}{'memo hits':>11}{'blocks run':>12}{'tokens':>12}{'wall s':>10}")
    for label, (stats, wall, _, _) in rows.items():
        print(
            f"{label:<10}{stats.distinct_evaluations:>13}{stats.memo_hits:>11}{stats.blocks_run:>12}{stats.tokens:>12}{wall:>10.1f}"
        )
    summary = []
    if "uncached" in rows:
        u_stats, u_wall, u_losses, u_result = rows["uncached"]
        max_diff = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(c_losses, u_losses))
        equal &= len(c_losses) == len(u_losses) and max_diff <= 1e-5 and c_result.removed == u_result.removed
        print(
            f"max relative loss difference cached vs uncached: {max_diff:.2e}; greedy set cached={list(c_result.removed)} "
            f"uncached={list(u_result.removed)}"
        )
        summary += [f"blocks_ratio={c_stats.blocks_run / u_stats.blocks_run:.3f}", f"wall_ratio={c_wall / u_wall:.3f}"]
    if tlm:
        _s_stats, s_wall, s_losses, s_result = rows["separate"]
        abs_diff = max(abs(a - b) for a, b in zip(c_losses, s_losses))
        equal &= len(c_losses) == len(s_losses) and abs_diff <= 1e-4 and c_result.removed == s_result.removed
        print(
            f"max absolute loss difference shared vs separate context: {abs_diff:.2e}; greedy set "
            f"shared={list(c_result.removed)} separate={list(s_result.removed)}"
        )
        summary.append(f"tlm_shared_ratio={c_wall / s_wall:.3f}")
    print(f"evaluator: losses_equal={'yes' if equal else 'no'} " + " ".join(summary))
    return 0

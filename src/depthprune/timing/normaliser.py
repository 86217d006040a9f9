"""Timing of the LM head's normaliser (engine/scoring.py:vocabulary_logsumexp): one ``torch.logsumexp``
call over a chunk of logits against the same a few rows at a time, results compared bit for bit.

Two measurements, both alternating the two settings ``--rounds`` times in one process so that a
drifting machine speed falls on both:

- the normaliser alone, on random logits of the model's vocabulary and precision, for a calibration
  chunk (``--n-samples`` x ``--seq-len`` rows) and an evaluation chunk (2048 rows);
- the calibration workload of ``timing evaluator`` (the single-layer prior plus a greedy pass to
  M = ``--budget``, a fresh cached evaluator each time), as ``depthprune prior`` and ``search`` run it.

The last line is ``normaliser: kernel_ratio=R1 calibration_ratio=R2 losses_equal=yes|no`` (blocked
over one call: the median seconds, on the calibration chunk and on the workload).
"""

from __future__ import annotations

import argparse
import statistics
import time

from depthprune.models import DTYPE_CHOICES
from depthprune.seeding import seed_option

SETTINGS = {"one call": 0, "blocked": None}  # LOGSUMEXP_BLOCK_ROWS; None: the module's default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="embedded:smollm2-135m")
    parser.add_argument("--dtype", default="auto", choices=list(DTYPE_CHOICES))
    parser.add_argument("--data-dir", help="offline mirror (default: hub)")
    parser.add_argument("--calibration", default="ppl_c4", choices=["ppl_c4", "ppl_cs170k", "tlm_cs170k"])
    parser.add_argument("--n-samples", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--seed", type=seed_option, default=0)
    parser.add_argument("--budget", type=int, default=7, help="greedy pass length M")
    parser.add_argument("--rounds", type=int, default=2, help="runs per setting, alternating")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's; searches run with 1)")


def _kernel_seconds(rows: int, vocab: int, dtype, rounds: int) -> tuple[dict[str, float], bool]:
    import torch

    from depthprune.engine import scoring

    logits = (torch.randn(rows, vocab, generator=torch.Generator().manual_seed(rows)) * 4).to(dtype)
    seconds: dict[str, list[float]] = {name: [] for name in SETTINGS}
    values = {}
    for _ in range(rounds):
        for name, block_rows in SETTINGS.items():
            values[name] = scoring.vocabulary_logsumexp(logits, torch.float32, block_rows)  # warm-up
            started = time.perf_counter()
            for _ in range(5):
                scoring.vocabulary_logsumexp(logits, torch.float32, block_rows)
            seconds[name].append((time.perf_counter() - started) / 5)
    equal = torch.equal(values["one call"], values["blocked"])
    return {name: statistics.median(times) for name, times in seconds.items()}, equal


def run(
    model: str,
    dtype: str,
    data_dir: str | None,
    calibration: str,
    n_samples: int,
    seq_len: int,
    seed: int,
    budget: int,
    rounds: int,
    threads: int | None,
) -> int:
    import torch

    from depthprune.engine import scoring
    from depthprune.models.loading import dtype_name, load_model
    from depthprune.timing.evaluator import calibration_workload, workload_setups

    if threads:
        torch.set_num_threads(threads)
    loaded = load_model(model, dtype=dtype, device="cpu")
    torch_dtype = next(loaded.model.parameters()).dtype
    vocab = loaded.model.get_output_embeddings().weight.shape[0]
    print(
        f"{model}: vocabulary {vocab}, {dtype_name(torch_dtype)}, {torch.get_num_threads()} threads, "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}, {scoring.LOGSUMEXP_BLOCK_ROWS} rows per block"
    )
    kernel_ratios = []  # the calibration chunk's first: the summary line's kernel_ratio
    all_equal = True
    for rows in (n_samples * seq_len, 2048):
        seconds, equal = _kernel_seconds(rows, vocab, torch_dtype, rounds)
        all_equal &= equal
        ratio = seconds["blocked"] / seconds["one call"]
        kernel_ratios.append(ratio)
        print(
            f"normaliser over {rows} x {vocab}: one call {seconds['one call'] * 1e3:.1f} ms, "
            f"blocked {seconds['blocked'] * 1e3:.1f} ms ({ratio:.3f}), equal={'yes' if equal else 'no'}",
            flush=True,
        )
    walls: dict[str, list[float]] = {name: [] for name in SETTINGS}
    losses: dict[str, list[float]] = {}
    default = scoring.LOGSUMEXP_BLOCK_ROWS
    setups = workload_setups(
        model, calibration, n_samples, seq_len, seed, data_dir or None, dtype=dtype_name(torch_dtype)
    )
    for round_index in range(rounds):
        for name, block_rows in SETTINGS.items():
            scoring.LOGSUMEXP_BLOCK_ROWS = default if block_rows is None else block_rows
            try:
                evaluator, wall, run_losses, _ = calibration_workload(setups, budget, loaded)
            finally:
                scoring.LOGSUMEXP_BLOCK_ROWS = default
            del evaluator  # free the cached states before the next run
            walls[name].append(wall)
            all_equal &= losses.setdefault(name, run_losses) == run_losses
            print(
                f"round {round_index + 1} {name:<8}: prior + greedy to M={budget} under {calibration} "
                f"({n_samples} x {seq_len}) {wall:.1f}s",
                flush=True,
            )
    all_equal &= losses["one call"] == losses["blocked"]
    median = {name: statistics.median(times) for name, times in walls.items()}
    print(
        f"normaliser: kernel_ratio={kernel_ratios[0]:.3f} calibration_ratio={median['blocked'] / median['one call']:.3f} "
        f"losses_equal={'yes' if all_equal else 'no'}"
    )
    return 0

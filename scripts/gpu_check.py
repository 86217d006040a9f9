"""GPU acceptance check (issue 35): run it first on a new GPU, offline, in under 10 minutes.

    bash scripts/gpu_check.sh [--cpu] [--small] [--out DIR] [--data-dir DIR]

Three parts, one result line each, then ``gpu_check: ok throughput_tflops=X peak_gpu_gib=Y``
(exit 0), or ``gpu_check: FAILED ...`` naming every mismatch (exit 1):

1. ``smollm2``: the embedded SmolLM2-135M in float32, the prior, a greedy search and an evaluation
   pass (WikiText-2 perplexity and ARC-Easy through lm-eval, dense and the greedy set), once on the
   CPU (the reference) and once on CUDA. Equal means: every calibration loss and every evaluation
   metric within rel 1e-4 (TF32 off), and the same greedy set. Under --cpu both runs are on the
   CPU (a self-consistency check; the line says so).
2. ``llama3_8b_random``: a random-weight model (seed 0) with the bundled Meta-Llama-3-8B config
   in bfloat16 (under --cpu: dtype auto, float32 on a CPU without native bfloat16), no download:
   the prior and two greedy steps at the paper's 64 x 2048 calibration tokens, timed, against
   naive scoring (the blocks physically removed, one plain forward per set) on 6 of the requested
   sets (dense, two singles, three of the last greedy step's; 4 under --small), its time
   extrapolated to every requested set. Equal means the same loss per set within rel 2e-3 in
   bfloat16, 1e-5 in float32 (the engine runs the same block calls; batching may change the
   rounding). The line also gives the prior's spread (how far apart the single-layer losses are:
   the check only means something if it is well above the tolerance), the speed ratio
   naive/engine and the peak GPU memory (torch.cuda.max_memory_allocated).
3. ``throughput``: the engine's forward FLOPs (depthprune.plan.ModelShape: blocks run x block FLOPs
   + LM-head FLOPs per distinct evaluation) per second of part 2: the number `depthprune plan
   --throughput` takes.

--small scales everything down so that the test suite runs it on the CPU (tests/test_gpu_check.py):
part 1 on the 8-block tiny random Llama (tiny:llama-8, SmolLM2's tokenizer) with 2 x 32 tokens, M=2
and WikiText-2 only; part 2 with 4 blocks of width 128 and 2 x 32 tokens. Its TFLOP/s mean nothing.
--out DIR writes DIR/gpu_check.json with every measurement (the lines' numbers and more).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LOSS_RTOL = 1e-4  # part 1: CPU vs CUDA, float32
BF16_RTOL = 2e-3  # part 2: engine vs naive, bfloat16
F32_RTOL = 1e-5  # part 2 in float32 (--cpu)
GIB = 1 << 30
SMOLLM2 = "embedded:smollm2-135m"
TINY = "tiny:llama-8"  # part 1 under --small


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="run every part on the CPU (no CUDA needed)")
    parser.add_argument("--small", action="store_true", help="scaled-down shapes (the test suite's run)")
    parser.add_argument("--out", help="folder for gpu_check.json")
    default_data = os.environ.get("DEPTHPRUNE_DATA_DIR", str(REPO.parent / "shared" / "data"))
    parser.add_argument("--data-dir", default=default_data, help="offline data mirror (default: %(default)s)")
    parser.add_argument("--model-cache-dir", default=str(REPO / "resources" / "models"))
    return parser.parse_args(argv)


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def timed(device, fn):
    from depthprune.devices import synchronize

    synchronize(device)
    started = time.perf_counter()
    out = fn()
    synchronize(device)
    return out, time.perf_counter() - started


def namespace(args, device, dtype, n_samples, seq_len, model=SMOLLM2):
    from depthprune.cli_common import shared_namespace

    # fmt: off
    return shared_namespace(
        model=model, dtype=dtype, device=device, calibration="ppl_c4", n_samples=n_samples, seq_len=seq_len,
        seed=0, data_dir=args.data_dir, model_cache_dir=args.model_cache_dir,
    )
    # fmt: on


# --------------------------------------------------------------------------- part 1


def smollm2_run(args, device: str) -> dict:
    """Prior + greedy + an evaluation pass of SmolLM2 (--small: the tiny model) in float32 on
    ``device``: every number, and the seconds it took."""
    from depthprune.cli_common import build_evaluator
    from depthprune.evaluation.benchmarks import EvalSettings
    from depthprune.evaluation.run import evaluate_sets
    from depthprune.models.loading import load_model
    from depthprune.prior import compute_prior
    from depthprune.search.runner import run_search

    started = time.perf_counter()
    n_samples, seq_len, budget = (2, 32, 2) if args.small else (8, 64, 2)
    spec = TINY if args.small else SMOLLM2
    loaded = load_model(spec, dtype="float32", device=device, cache_dir=args.model_cache_dir)
    evaluator = build_evaluator(namespace(args, device, "float32", n_samples, seq_len, spec), loaded=loaded)
    prior = compute_prior(evaluator)
    with tempfile.TemporaryDirectory() as workdir:
        result = run_search(evaluator, "greedy", budget, prior["scores"], 0, workdir)
    settings = EvalSettings(
        benchmarks=("wikitext2",) if args.small else ("wikitext2", "arc_easy"),
        limit=4 if args.small else 20,
        ppl_seq_len=64 if args.small else 512,
        ppl_max_tokens=128 if args.small else 2048,
        batch_size=4,
        data_dir=Path(args.data_dir),
    )
    evaluations = evaluate_sets(loaded.model, loaded.tokenizer, settings, [(), result.removed])
    metrics = {
        f"{'dense' if not s else 'greedy'}/{m.benchmark}/{m.metric}": m.value
        for s, e in evaluations.items()
        for m in e.metrics
    }
    losses = {"empty": prior["empty_loss"], **{f"prior/{i}": s for i, s in enumerate(prior["scores"])}}
    losses.update({f"greedy/{e.order}/{list(e.removed)}": e.loss for e in result.trace})
    out = {"model": spec, "device": device, "removed": list(result.removed), "losses": losses, "metrics": metrics}
    return out | {"seconds": time.perf_counter() - started}


def check_smollm2(args, device: str, mismatches: list[str]) -> dict:
    reference = smollm2_run(args, "cpu")
    other = smollm2_run(args, device)
    pairs = [(k, reference[part][k], other[part].get(k)) for part in ("losses", "metrics") for k in reference[part]]
    missing = [k for k, _, b in pairs if b is None]
    worst = max((rel(a, b) for _, a, b in pairs if b is not None), default=0.0)
    if missing or worst > LOSS_RTOL:
        mismatches.append(f"smollm2: {device} differs from the CPU (max rel {worst:.2e}, missing {missing})")
    if reference["removed"] != other["removed"]:
        mismatches.append(f"smollm2: greedy sets differ cpu={reference['removed']} {device}={other['removed']}")
    kind = "CUDA vs CPU" if device != "cpu" else "CPU vs CPU (self-consistency: --cpu)"
    print(
        f"smollm2: {reference['model']} {kind} float32: {len(pairs)} losses and metrics, max rel diff {worst:.2e} "
        f"(tol {LOSS_RTOL:g}); greedy set {reference['removed']} vs {other['removed']}; "
        f"{reference['seconds']:.1f}s vs {other['seconds']:.1f}s"
    )
    return {"comparison": kind, "max_rel_diff": worst, "tolerance": LOSS_RTOL, "reference": reference, "checked": other}


# --------------------------------------------------------------------------- part 2


def llama_config(small: bool, vocab: int) -> dict:
    from depthprune.plan import BUNDLED_CONFIGS

    cfg = json.loads((BUNDLED_CONFIGS / "meta-llama--Meta-Llama-3-8B" / "config.json").read_text())
    if small:
        cfg.update(num_hidden_layers=4, hidden_size=128, intermediate_size=256, num_attention_heads=4)
        cfg.update(num_key_value_heads=2, vocab_size=vocab, bos_token_id=None, eos_token_id=None)
    return cfg


def random_llama(cfg: dict, device: str, dtype, tokenizer):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from depthprune.models.loading import LoadedModel

    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg), dtype=dtype)
    model.eval().config.use_cache = False
    tag = f"random-seed0-L{cfg['num_hidden_layers']}-h{cfg['hidden_size']}"
    return LoadedModel(model, tokenizer, spec=f"random:{tag}", name="llama3-8b-random", path=tag, _fingerprint=tag)


def physical_loss(loaded, objective, removed) -> float:
    """L of the model with ``removed`` physically deleted (models.remove_blocks), then put back."""
    import torch

    from depthprune.engine.scoring import forward_loss
    from depthprune.models import family_for, remove_blocks

    model, family = loaded.model, family_for(loaded.model)
    blocks, config = family.blocks(model), model.config
    saved = {
        k: getattr(config, k, None)
        for k in ("num_hidden_layers", "depthprune_removed_layers", *family.per_layer_config)
    }
    remove_blocks(model, removed)
    try:
        with torch.no_grad():
            return forward_loss(model, objective)[0]
    finally:
        family.backbone(model).layers = blocks
        for i, block in enumerate(blocks):
            block.self_attn.layer_idx = i
        for key, value in saved.items():
            setattr(config, key, value)


def check_llama(args, device: str, tokenizer, mismatches: list[str]) -> dict:
    import torch

    from depthprune.cli_common import build_evaluator, check_calibration_inputs
    from depthprune.models.loading import dtype_name, resolve_dtype
    from depthprune.plan import ModelShape
    from depthprune.prior import compute_prior
    from depthprune.search.runner import run_search

    cfg = llama_config(args.small, len(tokenizer))
    n_samples, seq_len, steps = (2, 32, 2) if args.small else (64, 2048, 2)
    dtype = resolve_dtype("bfloat16" if device == "cuda" else "auto", torch.device(device))
    tolerance = BF16_RTOL if dtype == torch.bfloat16 else F32_RTOL
    if device != "cpu":
        gc.collect()  # part 1's models and states
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    loaded, build_s = timed(device, lambda: random_llama(cfg, device, dtype, tokenizer))
    ns = namespace(args, device, dtype_name(dtype), n_samples, seq_len, model=loaded.spec)
    samples = check_calibration_inputs(ns, n_layers=cfg["num_hidden_layers"])
    evaluator = build_evaluator(ns, loaded=loaded, samples=samples)
    stats, before = evaluator.stats, dict(evaluator.stats.as_dict())
    prior, prior_s = timed(device, lambda: compute_prior(evaluator))
    with tempfile.TemporaryDirectory() as workdir:
        result, greedy_s = timed(device, lambda: run_search(evaluator, "greedy", steps, prior["scores"], 0, workdir))
    shape, objective = ModelShape.from_config("llama3-8b", cfg), evaluator.objective
    longest = max(int(b.attention_mask.sum(dim=1).max()) for b in objective.batches)
    blocks = stats.blocks_run - before["blocks_run"]
    evals = stats.distinct_evaluations - before["distinct_evaluations"]
    flops = blocks * shape.block_flops(objective.n_tokens, longest) + evals * shape.head_flops(objective.n_scored)
    engine_s = prior_s + greedy_s
    # Naive: every requested set (the prior's N + 1, each greedy request) by a forward pass of its own.
    requested = [(), *[(i,) for i in range(evaluator.n_layers)], *[tuple(e.removed) for e in result.trace]]
    engine_loss = {(): prior["empty_loss"], **{(i,): s for i, s in enumerate(prior["scores"])}}
    engine_loss.update({tuple(e.removed): e.loss for e in result.trace})
    pairs = [tuple(e.removed) for e in result.trace if len(e.removed) == steps]  # greedy's last step
    k = 1 if args.small else 3
    sample = [(), (0,), (evaluator.n_layers - 1,), *pairs[:: max(1, len(pairs) // k)][:k]]
    naive, naive_s = timed(device, lambda: {s: physical_loss(loaded, objective, s) for s in sample})
    naive_total_s = naive_s / len(sample) * len(requested)
    worst = max(rel(engine_loss[s], naive[s]) for s in sample)
    if worst > tolerance:
        mismatches.append(f"llama3_8b_random: engine and naive losses differ (max rel {worst:.2e})")
    singles = [s for s in prior["scores"] if s is not None]
    spread = (max(singles) - min(singles)) / abs(prior["empty_loss"])
    peak = torch.cuda.max_memory_allocated() / GIB if device != "cpu" else 0.0
    print(
        f"llama3_8b_random: {shape.n_layers} blocks, {shape.params / 1e9:.3g}e9 params, {dtype_name(dtype)}, "
        f"{n_samples} x {seq_len} tokens on {device}: prior {prior_s:.1f}s + greedy {steps} steps {greedy_s:.1f}s; "
        f"naive {naive_s:.1f}s for {len(sample)} of {len(requested)} sets (all: ~{naive_total_s:.1f}s), "
        f"speed ratio naive/engine {naive_total_s / engine_s:.2f}; max rel loss diff {worst:.2e} "
        f"(tol {tolerance:g}; prior spread {spread:.2e}); peak GPU {peak:.2f} GiB"
    )
    # fmt: off
    return {
        "config": cfg, "params": shape.params, "dtype": dtype_name(dtype), "n_samples": n_samples,
        "seq_len": seq_len, "calibration_tokens": objective.n_tokens, "greedy_steps": steps,
        "build_seconds": build_s, "prior_seconds": prior_s, "greedy_seconds": greedy_s, "engine_seconds": engine_s,
        "engine_blocks_run": blocks, "engine_evaluations": evals, "engine_flops": flops,
        "naive_sets_timed": len(sample), "naive_sets_requested": len(requested), "naive_seconds": naive_s,
        "naive_seconds_all_sets": naive_total_s, "speed_ratio": naive_total_s / engine_s,
        "max_rel_loss_diff": worst, "tolerance": tolerance, "prior_spread": spread,
        "greedy_set": list(result.removed), "peak_gpu_gib": peak, "throughput_tflops": flops / engine_s / 1e12,
    }
    # fmt: on


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # stderr
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("gpu_check: FAILED no CUDA device (pass --cpu to run the check on the CPU)")
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 on CUDA as on the CPU
    torch.backends.cudnn.allow_tf32 = False
    device = "cpu" if args.cpu else "cuda"
    started, mismatches = time.perf_counter(), []
    report = {"device": device, "small": args.small, "torch": torch.__version__}
    if device == "cuda":
        report["gpu"] = torch.cuda.get_device_name(0)
    report["smollm2"] = check_smollm2(args, device, mismatches)
    from depthprune.models.loading import load_model

    tokenizer = load_model(SMOLLM2, dtype="float32", device="cpu", cache_dir=args.model_cache_dir).tokenizer
    report["llama3_8b_random"] = llama = check_llama(args, device, tokenizer, mismatches)
    report["throughput_tflops"], report["peak_gpu_gib"] = llama["throughput_tflops"], llama["peak_gpu_gib"]
    print(
        f"throughput: {llama['engine_flops'] / 1e12:.4g} TFLOP in {llama['engine_seconds']:.2f}s of engine time "
        f"= {llama['throughput_tflops']:.4g} TFLOP/s (depthprune plan --throughput {llama['throughput_tflops']:.3g})"
    )
    report.update(mismatches=mismatches, ok=not mismatches, seconds=time.perf_counter() - started)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    if mismatches:
        print("gpu_check: FAILED " + "; ".join(mismatches))
        return 1
    print(
        f"gpu_check: ok throughput_tflops={report['throughput_tflops']:.4g} peak_gpu_gib={report['peak_gpu_gib']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m depthprune bench evaluate``: the cost and figures of evaluating one model.

Evaluates the dense embedded SmolLM2-135M (or ``--removed`` blocks of it) with the default
profile's evaluation settings (config.yaml ``evaluation:``: 2048-token perplexity windows, 8192
tokens per perplexity benchmark, the first 100 documents of each lm-eval task incl. LAMBADA, batch
8, the model in the profile's dtype: auto), prints each benchmark's figures and seconds, and last ``evaluate: seconds_per_model=S``
(loading + pruning + all nine benchmarks; the evaluation cache is not used).
"""

from __future__ import annotations

import argparse
import time

from depthprune.evaluation.cli import add_evaluation_args, settings_from_args

# The default profile's evaluation settings (config.yaml); flags override them.
PROFILE_DEFAULTS = dict(limit=100, ppl_seq_len=2048, ppl_max_tokens=8192, batch_size=8)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model")
    group.add_argument("--model", default="embedded:smollm2-135m", help="model spec (default %(default)s)")
    group.add_argument("--name", help="alias written into --out-metrics (default: from --model)")
    group.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"],
                       help="default %(default)s, as config.yaml (bfloat16 on CUDA or a CPU with native bfloat16, else float32)")
    group.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    group.add_argument("--model-cache-dir", default="resources/models", help="where converted checkpoints are kept")
    group.add_argument("--removed", default="", help='blocks to remove, e.g. "6 8 10 12 14 16 18" (default: dense)')
    add_evaluation_args(parser, **PROFILE_DEFAULTS)
    parser.add_argument("--out-metrics", help="also write the tidy metrics CSV here")


def run(args) -> int:
    from depthprune.cli_common import load_model_from_args
    from depthprune.evaluation.run import Labels, evaluate_model, check_data, write_outputs
    from depthprune.io import parse_layers
    from depthprune.models.loading import default_name
    from depthprune.models.pruning import remove_blocks

    settings = settings_from_args(args)
    removed = parse_layers(args.removed)
    check_data(settings)
    start = time.perf_counter()
    loaded = load_model_from_args(args)
    if removed:
        remove_blocks(loaded.model, removed)
    load_seconds = time.perf_counter() - start
    evaluation = evaluate_model(loaded.model, loaded.tokenizer, settings, removed)
    total = time.perf_counter() - start

    labels = Labels.for_removed(args.name or default_name(args.model), removed)
    frame = write_outputs(evaluation, labels, settings, args.out_metrics, None)
    print(f"model {args.model} removed=[{args.removed}] dtype={loaded.dtype} device={loaded.device} "
          f"limit={settings.limit} ppl_seq_len={settings.ppl_seq_len} ppl_max_tokens={settings.ppl_max_tokens}")
    print(f"load+prune: seconds={load_seconds:.1f}")
    for benchmark, rows in frame.groupby("benchmark", sort=False):
        figures = " ".join(f"{r.metric}={r.value:.4f}" for r in rows.itertuples())
        print(f"{benchmark}: {figures} n={int(rows.n.iloc[0])} seconds={evaluation.seconds[benchmark]:.1f}")
    print(f"evaluate: seconds_per_model={total:.1f}")
    return 0

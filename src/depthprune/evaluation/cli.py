"""``depthprune evaluate``: perplexity + zero-shot accuracy of a model without one or more removed sets."""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from depthprune.errors import InputError
from depthprune.evaluation.benchmarks import (
    BENCHMARKS,
    EvalSettings,
    parse_benchmarks,
    parse_headline_overrides,
    parse_limit_per_task,
)
from depthprune.models.setup import ModelSetup
from depthprune.paths import eval_cache_dir

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="perplexity and lm-eval zero-shot accuracy of a pruned (or the dense) model",
        description=(
            "Evaluate one model without the blocks of --selection or --removed (neither: the dense model) "
            "on WikiText-2/C4 perplexity and lm-eval tasks; write tidy metrics.csv and the raw lm-eval JSON. "
            "--selection may be repeated (with one --out-* of each kind per selection): the sets are "
            "evaluated in one pass that runs the blocks they share once. Identical removed sets are "
            "evaluated once per model (content-addressed cache), so only sets not yet cached are computed."
        ),
    )
    from depthprune.cli_common import add_model_args

    add_model_args(parser)
    which = parser.add_argument_group("removed set and its labels")
    chosen = which.add_mutually_exclusive_group()
    chosen.add_argument(
        "--selection",
        action="append",
        help="selection.json of a search (gives removed set and labels); repeatable: a group in one pass",
    )
    chosen.add_argument("--removed", help='blocks to remove, e.g. "3 5 7" (0-based)')
    which.add_argument(
        "--dense",
        action="store_true",
        help="also evaluate the dense model, in the same pass as the --selection sets (it shares their first blocks)",
    )
    which.add_argument("--calibration", help="label (default: from --selection, else 'none')")
    which.add_argument("--budget", type=int, help="label M (default: from --selection, else the removed count)")
    which.add_argument("--algorithm", help="label (default: from --selection, else 'dense' or 'manual')")
    add_evaluation_args(parser)
    out = parser.add_argument_group("outputs")
    out.add_argument("--cache-dir", help="evaluation cache (default: results/<model>/eval_cache)")
    out.add_argument("--no-eval-cache", action="store_true", help="neither read nor write the evaluation cache")
    from depthprune.cli_common import add_recompute_arg

    add_recompute_arg(out)
    out.add_argument("--out-metrics", action="append", help="tidy metrics CSV to write (atomically); one per set")
    out.add_argument("--out-raw", action="append", help="raw lm-eval results JSON to write (atomically); one per set")
    out.add_argument(
        "--out-samples",
        action="append",
        help="per-document scores and per-window NLLs, Parquet (atomically); one per set",
    )
    out.add_argument(
        "--out-pass",
        help="JSON record of the pass: every set with its cache key, computed or a cache hit, blocks run "
        "(the pipeline's evaluate_pass, whose sets' own files are written by later jobs from the cache)",
    )
    parser.set_defaults(func=main)


def add_evaluation_args(parser: argparse.ArgumentParser, **defaults) -> None:
    """Evaluation settings (shared with ``timing evaluate``, which passes the default preset's settings)."""
    group = parser.add_argument_group("evaluation")
    group.add_argument(
        "--data-dir",
        default=defaults.get("data_dir"),
        help="offline mirror of the data sets (JSONL, HF layout); default: Hugging Face hub",
    )
    group.add_argument(
        "--tasks",
        default=defaults.get("tasks"),
        help=f"comma-separated benchmarks (default: all nine: {','.join(BENCHMARKS)})",
    )
    group.add_argument(
        "--limit", type=int, default=defaults.get("limit"), help="first N documents of each lm-eval task (default: all)"
    )
    group.add_argument(
        "--limit-per-task",
        action="append",
        metavar="TASK=N",
        help="first N documents of this lm-eval task, instead of --limit (repeatable, e.g. hellaswag=1000)",
    )
    group.add_argument(
        "--ppl-seq-len",
        type=int,
        default=defaults.get("ppl_seq_len", 2048),
        help="perplexity window in tokens (default %(default)s, the paper's)",
    )
    group.add_argument(
        "--ppl-max-tokens",
        type=int,
        default=defaults.get("ppl_max_tokens"),
        help="tokens per perplexity benchmark, rounded down to whole windows (default: all)",
    )
    group.add_argument(
        "--batch-size",
        type=int,
        default=defaults.get("batch_size", 8),
        help="windows / lm-eval requests per forward pass (default %(default)s)",
    )
    group.add_argument(
        "--bootstrap-iters",
        type=int,
        default=1000,
        help="lm-eval bootstrap draws for LAMBADA's perplexity stderr (default %(default)s)",
    )
    group.add_argument(
        "--headline-metric",
        action="append",
        metavar="BENCHMARK=METRIC",
        help="headline metric override, e.g. hellaswag=acc (repeatable)",
    )


def settings_from_args(args) -> EvalSettings:
    data_dir = Path(args.data_dir).resolve() if args.data_dir else None
    if data_dir is not None and not data_dir.is_dir():
        raise FileNotFoundError(f"--data-dir {args.data_dir}: folder not found")
    return EvalSettings(
        benchmarks=parse_benchmarks(args.tasks),
        limit=args.limit,
        limit_per_task=parse_limit_per_task(getattr(args, "limit_per_task", None)),
        ppl_seq_len=args.ppl_seq_len,
        ppl_max_tokens=args.ppl_max_tokens,
        batch_size=args.batch_size,
        bootstrap_iters=args.bootstrap_iters,
        data_dir=data_dir,
        headline=parse_headline_overrides(args.headline_metric),
    )


def model_identity(model: ModelSetup) -> dict:
    """What stands for the model in the evaluation cache key (nothing is loaded): the content
    fingerprint of its files, never its path, plus the resolved dtype, the device type and the
    scoring-code version."""
    from depthprune.models.loading import resolve_device
    from depthprune.versions import SCORING_VERSION

    return {
        "fingerprint": model.fingerprint(),
        "dtype": model.resolved_dtype_name(),
        "device": resolve_device(model.device).type,
        "scoring_version": SCORING_VERSION,
    }


def removed_and_labels(args, model_name: str) -> list:
    """(removed set, labels) per set: one per --selection, else one from --removed or neither (dense)."""
    from depthprune.cli_common import read_selection
    from depthprune.evaluation.run import Labels
    from depthprune.io import parse_layers

    if not args.selection:
        removed = parse_layers(args.removed)
        return [(removed, Labels.for_removed(model_name, removed, args.calibration, args.budget, args.algorithm))]
    if len(args.selection) > 1 and (args.calibration or args.budget is not None or args.algorithm):
        raise InputError(
            "--calibration/--budget/--algorithm label one set; with several --selection they come from each file"
        )
    sets = []
    for path in args.selection:
        selection = read_selection(path, model_name)
        removed = parse_layers(selection["removed"])
        labels = Labels.for_removed(
            model_name,
            removed,
            args.calibration or selection.get("calibration"),
            selection.get("budget") if args.budget is None else args.budget,
            args.algorithm or selection.get("algorithm"),
        )
        sets.append((removed, labels))
    return sets


def outputs_per_set(args, n_sets: int) -> list[tuple]:
    """(metrics, raw, samples) paths per set; each --out-* given is given once per set."""
    columns = []
    for option in ("out_metrics", "out_raw", "out_samples"):
        paths = getattr(args, option) or []
        if paths and len(paths) != n_sets:
            flag = "--" + option.replace("_", "-")
            raise InputError(f"{flag} given {len(paths)} times for {n_sets} removed set(s): give it once per set")
        columns.append(paths or [None] * n_sets)
    return list(zip(*columns))


def check_benchmark_rows(settings) -> None:
    """Every line of the mirror's lm-eval JSONL files is a JSON object: checked just before the model
    loads (only when something is to be computed), so a corrupt line is named by file and 1-based line
    (ValueError) instead of lm-eval's loader failing inside the first task with "could not be loaded"."""
    if settings.data_dir is None:
        return
    from depthprune.calibration.data import read_jsonl_numbered
    from depthprune.evaluation.benchmarks import LM_EVAL_TASKS
    from depthprune.evaluation.harness import check_offline_data, offline_data_files

    tasks = [b for b in settings.benchmarks if b in LM_EVAL_TASKS]
    check_offline_data(tasks, settings.data_dir)
    for task in tasks:
        for path in offline_data_files(task, settings.data_dir).values():
            for _ in read_jsonl_numbered(path):
                pass


def pass_record(name: str, evaluations, seconds: float) -> dict:
    """What one evaluation pass did (``--out-pass``): its sets, which were computed, the blocks run."""
    distinct = {e.cache_key: e for e in evaluations}.values()  # a set chosen twice is evaluated once
    computed = [e for e in distinct if not e.cache_hit]
    group = next((e.raw["depthprune"].get("set_group") for e in computed), None) or {}
    return {
        "model": name,
        "sets": [{"removed": list(e.removed), "cache_key": e.cache_key, "cache_hit": e.cache_hit} for e in evaluations],
        "computed": len(computed),
        "cache_hits": len(distinct) - len(computed),
        "blocks_run": group.get("blocks_run", 0),
        "naive_blocks": group.get("naive_blocks", 0),
        "seconds": seconds,
    }


def main(args) -> int:
    from depthprune.cli_common import model_inputs, model_setup
    from depthprune.evaluation.cache import EvalCache
    from depthprune.evaluation.run import evaluate_removed_sets, write_outputs
    from depthprune.io import check_inputs_outputs

    start = time.perf_counter()
    model = model_setup(args)
    name = model.display_name
    cache_dir = None if args.no_eval_cache else args.cache_dir or eval_cache_dir(name)
    check_inputs_outputs(
        {**model_inputs(args), "--selection": args.selection, "--cache-dir": cache_dir},
        {
            "--out-metrics": args.out_metrics,
            "--out-raw": args.out_raw,
            "--out-samples": args.out_samples,
            "--out-pass": args.out_pass,
        },
    )
    settings = settings_from_args(args)
    sets = removed_and_labels(args, name)
    outputs = outputs_per_set(args, len(sets))
    cache = None if cache_dir is None else EvalCache(cache_dir)
    evaluations = evaluate_removed_sets(
        model_identity=model_identity(model),
        # --dense: the dense model rides along, for the cache and the --out-pass record (no files)
        removed_sets=[removed for removed, _ in sets] + ([()] if args.dense else []),
        settings=settings,
        load=lambda: (check_benchmark_rows(settings), model.load())[1],
        cache=cache,
        read_cache=not args.recompute,
    )
    seconds = time.perf_counter() - start
    for (removed, labels), evaluation, (metrics, raw, samples) in zip(sets, evaluations[: len(sets)], outputs):
        frame = write_outputs(evaluation, labels, settings, metrics, raw, samples)
        source = f"cache hit {evaluation.cache_key[:12]}" if evaluation.cache_hit else "evaluated"
        print(
            f"{labels.model} removed=[{' '.join(map(str, removed))}] "
            f"({labels.calibration}/{labels.algorithm}/M={labels.budget}): {source}"
        )
        print(frame[["benchmark", "metric", "value", "stderr", "n", "headline"]].to_string(index=False))
    if args.out_pass:
        from depthprune.io import atomic_write_json

        atomic_write_json(args.out_pass, pass_record(name, evaluations, seconds))
    computed = sum(not e.cache_hit for e in evaluations)
    print(
        f"{len(evaluations)} set(s), {computed} computed, {len(evaluations) - computed} from the cache, in {seconds:.2f}s"
    )
    return 0

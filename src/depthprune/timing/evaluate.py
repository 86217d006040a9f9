"""``python -m depthprune timing evaluate``: the cost and figures of evaluating one model.

Evaluates the dense embedded SmolLM2-135M (or ``--removed`` blocks of it) with the default
preset's evaluation settings (config.yaml ``evaluation:``: 2048-token perplexity windows, 8192
tokens per perplexity benchmark, the first 100 documents of each lm-eval task incl. LAMBADA, batch
8, the model in the preset's dtype: auto), prints each benchmark's figures and seconds, and last ``evaluate: seconds_per_model=S``
(loading + pruning + all nine benchmarks; the evaluation cache is not used).

``--compare`` evaluates the dense model and three pruned sets (``--compare-sets``) in float32, in
one process, benchmark by benchmark with every path in turn (so that a shared machine's drifting
speed falls on all paths alike), three ways: through lm-eval's HFLM one pruned model at a time (full logits, one
sequence per choice), through the scoring engine one pruned model at a time (evaluation/engine_lm.py),
and through the engine with all four sets in one pass, as the pipeline runs them (shared contexts,
head at continuations, blocks shared below the sets' first differences run once:
depthprune.engine.set_group). It ends with ``evaluate: seconds_ratio=R max_abs_loglik_diff=D
metrics_equal=yes|no`` (R: one-pass seconds / HFLM seconds over all models and benchmarks, model
loading excluded; D: the largest difference of any lm-eval request's log-likelihood from HFLM's, on
either engine path; metrics equal: accuracies identical, perplexities within 1e-4 relative, i.e. mean
log-likelihoods within 1e-4 nat per token: HFLM's float32 log-softmax alone moves them by about 1e-5,
and LAMBADA's perplexity of a 9-block-pruned model by 1.03e-5 relative).
Before it, the five requests that differ most are rescored through HFLM in float64 (the referee):
each path's error from that value says whether D is the engine's rounding or HFLM's; and each
path's multiply-adds in linear layers (every block's projections and the LM head, padding included,
counted by forward hooks; attention's score products are not counted): where R follows their ratio,
the one pass runs at HFLM's efficiency and only less arithmetic would lower R.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import time
from collections import defaultdict

from depthprune.cli_common import add_model_args
from depthprune.evaluation.cli import add_evaluation_args
from depthprune.models.setup import ModelSetup

# The default preset's evaluation settings (config.yaml); flags override them.
PRESET_DEFAULTS = {"limit": 100, "ppl_seq_len": 2048, "ppl_max_tokens": 8192, "batch_size": 8}
PERPLEXITY_RTOL = 1e-4  # see the module doc
COMPARE_SETS = ("6 8 10 12 14 16 18", "3 5 7 9 11 13 15 17 19", "20 21 22 23 24 25 26")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_args(parser, default_model="embedded:smollm2-135m")
    group = parser.add_argument_group("removed blocks")
    group.add_argument("--removed", default="", help='blocks to remove, e.g. "6 8 10 12 14 16 18" (default: dense)')
    add_evaluation_args(parser, **PRESET_DEFAULTS)
    parser.add_argument("--out-metrics", help="also write the tidy metrics CSV here")
    parser.add_argument("--compare", action="store_true", help="HFLM path vs the scoring engine (see above)")
    parser.add_argument(
        "--compare-sets",
        nargs="*",
        default=list(COMPARE_SETS),
        help="removed sets evaluated besides the dense model under --compare",
    )


class LinearMacs:
    """Multiply-adds of every ``nn.Linear`` call in ``models`` (forward hooks), summed per ``label``.

    A linear layer maps rows × in_features to rows × out_features: rows × in × out multiply-adds,
    padded rows included (they are computed). Calls made while ``label`` is None are not counted.
    Use as a context manager: the hooks are removed on exit.
    """

    def __init__(self, models):
        import torch

        self.label = None
        self.macs: dict = defaultdict(int)
        self._handles = [
            module.register_forward_hook(self._count)
            for model in models
            for module in model.modules()
            if isinstance(module, torch.nn.Linear)
        ]

    def _count(self, module, args, output) -> None:
        if self.label is not None:
            self.macs[self.label] += output.numel() * module.in_features

    def __enter__(self) -> LinearMacs:
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


def run(
    model_setup: ModelSetup,
    eval_settings,
    removed: str,
    out_metrics: str | None,
    compare: bool,
    compare_sets: list[str],
) -> int:
    if compare:
        return run_compare(model_setup, eval_settings, compare_sets)
    from depthprune.evaluation.run import Labels, check_data, evaluate_model, write_outputs
    from depthprune.io import parse_layers
    from depthprune.models.pruning import remove_blocks

    settings = eval_settings
    removed_set = parse_layers(removed)
    check_data(settings)
    start = time.perf_counter()
    loaded = model_setup.load()
    if removed_set:
        remove_blocks(loaded.model, removed_set)
    load_seconds = time.perf_counter() - start
    evaluation = evaluate_model(loaded.model, loaded.tokenizer, settings, removed_set)
    total = time.perf_counter() - start

    labels = Labels.for_removed(model_setup.display_name, removed_set)
    frame = write_outputs(evaluation, labels, settings, out_metrics, None)
    print(
        f"model {model_setup.model} removed=[{removed}] dtype={loaded.dtype} device={loaded.device} "
        f"limit={settings.limit} ppl_seq_len={settings.ppl_seq_len} ppl_max_tokens={settings.ppl_max_tokens}"
    )
    print(f"load+prune: seconds={load_seconds:.1f}")
    for benchmark, rows in frame.groupby("benchmark", sort=False):
        figures = " ".join(f"{r.metric}={r.value:.4f}" for r in rows.itertuples())
        print(f"{benchmark}: {figures} n={int(rows.n.iloc[0])} seconds={evaluation.seconds[benchmark]:.1f}")
    print(f"evaluate: seconds_per_model={total:.1f}")
    return 0


class RequestRecorder:
    """Every lm-eval request's log-likelihood per path, recorded by wrapping ``harness.make_lm`` while
    the recorder is entered (``path`` and ``removed``: whose answers the next calls are)."""

    def __init__(self):
        self.recorded: dict[str, dict] = {}  # path -> request key -> log-likelihood
        self.instances: dict[tuple, object] = {}  # request key -> lm-eval Instance, for the float64 referee
        self.path = "hflm"
        self.removed: tuple = ()

    def __enter__(self) -> RequestRecorder:
        from depthprune.evaluation import harness

        self._make_lm = harness.make_lm
        harness.make_lm = self.make_lm
        return self

    def __exit__(self, *exc) -> None:
        from depthprune.evaluation import harness

        harness.make_lm = self._make_lm

    def make_lm(self, model, tokenizer, batch_size, **engine):
        lm = self._make_lm(model, tokenizer, batch_size, **engine)
        answers = self.recorded.setdefault(self.path, {})
        inner = lm.loglikelihood

        def loglikelihood(requests, disable_tqdm=False):
            results = inner(requests, disable_tqdm=disable_tqdm)
            removed = lm.active_set if self.path == "grouped" else self.removed
            for request, result in zip(requests, results):
                key = (tuple(removed), request.task_name, request.doc_id, request.idx, request.args)
                answers[key] = result[0]
                self.instances.setdefault(key, request)
            return results

        lm.loglikelihood = loglikelihood
        return lm


PATHS = ("hflm", "engine", "grouped")


def run_compare(model_setup: ModelSetup, settings, compare_sets: list[str]) -> int:
    from depthprune.evaluation.run import check_data
    from depthprune.io import parse_layers

    check_data(settings)
    sets = [()] + [parse_layers(text) for text in compare_sets]
    with RequestRecorder() as recorder:
        print(
            f"compare: model {model_setup.model} float32, sets {['dense'] + compare_sets}, limit={settings.limit}, "
            f"ppl_seq_len={settings.ppl_seq_len} ppl_max_tokens={settings.ppl_max_tokens}"
        )
        models = {removed: load_pruned_float32(model_setup, removed) for removed in sets}  # sets[0]: unpruned
        with LinearMacs([loaded.model for loaded in models.values()]) as counter:
            metrics, seconds, blocks = time_paths(models, settings, recorder, counter)
    totals = print_costs(seconds, blocks, counter.macs)
    diff, equal, worst = compare_paths(recorder.recorded, metrics)
    referee_float64(models, worst, recorder.recorded, recorder.instances)
    print(
        f"requests compared: {len(recorder.recorded.get('hflm', {}))}; seconds hflm={totals['hflm']:.1f} "
        f"engine one model at a time={totals['engine']:.1f} ({totals['engine'] / totals['hflm']:.3f} of hflm) "
        f"engine, all sets in one pass={totals['grouped']:.1f}"
    )
    print(
        f"evaluate: seconds_ratio={totals['grouped'] / totals['hflm']:.3f} max_abs_loglik_diff={diff:.2e} "
        f"metrics_equal={'yes' if equal else 'no'}"
    )
    return 0


def load_pruned_float32(model_setup: ModelSetup, removed: tuple):
    """The model in float32 on its device, ``removed`` taken out (the comparison is float32 whatever --dtype)."""
    from depthprune.models.loading import load_model
    from depthprune.models.pruning import remove_blocks

    loaded = load_model(model_setup.model, dtype="float32", device=model_setup.device, cache_dir=model_setup.cache_dir)
    if removed:
        remove_blocks(loaded.model, removed)
    return loaded


def time_paths(models: dict, settings, recorder: RequestRecorder, counter: LinearMacs):
    """Every benchmark through the three paths (module doc), benchmark by benchmark: a shared machine's
    speed drifts over a run of this length, and the paths then see the same drift instead of one path
    a faster machine. Returns (metrics, seconds per (path, set) and benchmark, the one pass's blocks)."""
    from depthprune.evaluation.run import evaluate_model, evaluate_sets

    sets = list(models)
    metrics: dict[tuple, float] = {}
    seconds: dict[tuple, dict[str, float]] = {}  # (path, removed) -> benchmark -> seconds
    blocks = {"blocks_run": 0, "naive_blocks": 0}
    for benchmark in settings.benchmarks:
        one = dataclasses.replace(settings, benchmarks=(benchmark,))
        for removed in sets:  # HFLM and the engine, one pruned model at a time
            for path, engine in (("hflm", "hflm"), ("engine", "depthprune")):
                recorder.removed, recorder.path = removed, path
                loaded = models[removed]
                counter.label = (path, benchmark)
                evaluation = evaluate_model(loaded.model, loaded.tokenizer, one, removed, engine=engine)
                _record(path, {removed: evaluation}, metrics, seconds)
        recorder.path = "grouped"  # the pipeline's path: all sets in one pass
        counter.label = ("grouped", benchmark)
        grouped = evaluate_sets(models[()].model, models[()].tokenizer, one, sets)
        counter.label = None
        _record("grouped", grouped, metrics, seconds)
        for key in blocks:
            blocks[key] += grouped[()].raw["depthprune"]["set_group"][key]
        macs = {path: counter.macs[(path, benchmark)] for path in PATHS}
        print(
            f"{benchmark}: "
            + " ".join(f"{path}={sum(seconds[(path, r)][benchmark] for r in sets):.1f}s" for path in PATHS)
            + f" linear multiply-adds grouped/hflm={macs['grouped'] / macs['hflm']:.3f}",
            flush=True,
        )
    return metrics, seconds, blocks


def print_costs(seconds: dict, blocks: dict, counted_macs: dict) -> dict[str, float]:
    """Print each path's seconds per set, the one pass's block calls and the linear multiply-adds;
    returns each path's total seconds."""
    for (path, removed), per in seconds.items():
        text = " ".join(f"{b}={t:.1f}" for b, t in per.items())
        print(f"removed=[{' '.join(map(str, removed))}] {path}: seconds={sum(per.values()):.1f} ({text})")
    print(
        f"one pass: {blocks['blocks_run']} block calls against {blocks['naive_blocks']} one model at a time "
        f"({blocks['blocks_run'] / blocks['naive_blocks']:.3f}): the most sharing allows, for these sets"
    )
    totals = {path: sum(sum(per.values()) for (p, _), per in seconds.items() if p == path) for path in PATHS}
    macs = {path: sum(n for (p, _), n in counted_macs.items() if p == path) for path in PATHS}
    print(
        "linear multiply-adds (blocks' projections and LM head, padding included; attention's products not "
        "counted): "
        + " ".join(f"{path}={macs[path] / 1e12:.2f}T" for path in PATHS)
        + f"; grouped/hflm={macs['grouped'] / macs['hflm']:.3f} against seconds "
        f"{totals['grouped'] / totals['hflm']:.3f}"
    )
    return totals


def compare_paths(recorded: dict, metrics: dict) -> tuple[float, bool, dict]:
    """The engine paths against HFLM: (largest |log-likelihood difference|, whether every metric agrees,
    request key -> its largest difference); each metric that differs is printed."""
    theirs = recorded.get("hflm", {})
    diff, equal = 0.0, True
    worst: dict[tuple, float] = {}  # request key -> largest |engine path - hflm|
    for path in ("engine", "grouped"):
        ours = recorded.get(path, {})
        if set(theirs) != set(ours):
            raise RuntimeError(f"the hflm and {path} paths saw different lm-eval requests")
        for key in theirs:
            worst[key] = max(worst.get(key, 0.0), abs(theirs[key] - ours[key]))
        diff = max([diff, *worst.values()])
        for (removed, benchmark, metric, name), value in metrics.items():
            if name != "hflm":
                continue
            other = metrics[(removed, benchmark, metric, path)]
            same = abs(other - value) <= PERPLEXITY_RTOL * abs(value) if metric == "perplexity" else other == value
            if not same:
                equal = False
                print(f"differs: removed={list(removed)} {benchmark} {metric}: hflm={value} {path}={other}")
    return diff, equal, worst


def referee_float64(models: dict, worst: dict, recorded: dict, instances: dict, top: int = 5) -> None:
    """Rescore the ``top`` requests where the engine differs most from HFLM through HFLM in float64.

    Both float32 paths round differently (packed trees against one sequence per choice, other
    batch shapes); the float64 value says which of them is the closer one, so that D is read as
    float32 rounding of either path and not as an engine error.
    """
    from lm_eval.models.huggingface import HFLM

    keys = sorted(worst, key=worst.get, reverse=True)[:top]
    by_set: dict[tuple, list] = {}
    for key in keys:
        by_set.setdefault(key[0], []).append(key)
    errors = {"hflm": 0.0, "engine": 0.0, "grouped": 0.0}
    for removed, set_keys in by_set.items():
        loaded = models[removed]  # already pruned; a float64 copy, the float32 model stays as it is
        model = copy.deepcopy(loaded.model).double()
        # HFLM itself, with its log-softmax in float64 too (make_lm's float32 would bias the referee)
        lm = HFLM(pretrained=model, tokenizer=loaded.tokenizer, batch_size=1, softmax_dtype="float64")
        references = [result[0] for result in lm.loglikelihood([instances[k] for k in set_keys], disable_tqdm=True)]
        for key, reference in zip(set_keys, references):
            values = {path: recorded[path][key] for path in errors}
            for path, value in values.items():
                errors[path] = max(errors[path], abs(value - reference))
            print(
                f"referee removed=[{' '.join(map(str, removed))}] {key[1]} doc {key[2]} choice {key[3]}: "
                f"float64={reference:.6f} "
                + " ".join(f"{path}={value:.6f} ({value - reference:+.2e})" for path, value in values.items())
            )
    print(
        f"float64 referee on the {len(keys)} most different requests: largest |error| "
        + " ".join(f"{path}={error:.2e}" for path, error in errors.items())
    )


def _record(path: str, evaluations: dict, metrics: dict, seconds: dict) -> None:
    """Add a path's seconds (model loading excluded) and metrics, per set and benchmark."""
    for removed, evaluation in evaluations.items():
        seconds.setdefault((path, removed), {}).update(evaluation.seconds)
        for m in evaluation.metrics:
            metrics[(removed, m.benchmark, m.metric, path)] = m.value

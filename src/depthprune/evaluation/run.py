"""Evaluate one model with one removed set: perplexities + lm-eval tasks, cached, as tidy rows.

``evaluate_model`` scores a model as it is (already pruned or dense); ``evaluate_sets`` scores the
unpruned model without each of a group of removed sets in one pass, sharing their common blocks.
``evaluate_removed_sets`` is what the command line and the pipeline use: it looks each (model,
removed set, settings) up in the content-addressed cache first and loads the model only on a miss. ``metrics_frame`` /
``write_outputs`` turn a result into the tidy ``metrics.csv`` of docs/architecture.md plus the raw
lm-eval JSON, labelled with the caller's calibration/budget/algorithm.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from depthprune.errors import InputError
from depthprune.evaluation.benchmarks import (
    BENCHMARKS,
    CORPUS_PERPLEXITIES,
    LM_EVAL_TASKS,
    METRICS_COLUMNS,
    SAMPLES_COLUMNS,
    EvalSettings,
)
from depthprune.evaluation.cache import CacheEntry, EvalCache, cache_key, file_sha256
from depthprune.evaluation.harness import (
    LM_ENGINE,
    LOG_SOFTMAX_DTYPE,
    MetricValue,
    check_offline_data,
    offline_data_files,
)
from depthprune.io import atomic_write_csv, atomic_write_json, format_layers, package_versions, parse_layers
from depthprune.progress import Progress

log = logging.getLogger(__name__)

KEY_VERSIONS = ("lm_eval", "transformers", "torch")  # packages whose upgrade can change a figure


@dataclass(frozen=True)
class Labels:
    """What a metrics row says it is; not part of the cache key (a hit is relabelled)."""

    model: str
    calibration: str = "none"
    budget: int = 0
    algorithm: str = "dense"

    @classmethod
    def for_removed(cls, model: str, removed, calibration=None, budget=None, algorithm=None) -> Labels:
        """Dense model: none/0/dense; a hand-given set: none/|removed|/manual, unless told otherwise."""
        removed = tuple(removed)
        return cls(
            model=model,
            calibration=calibration or "none",
            budget=len(removed) if budget is None else int(budget),
            algorithm=algorithm or ("manual" if removed else "dense"),
        )


@dataclass
class Evaluation:
    removed: tuple[int, ...]
    metrics: list[MetricValue]
    seconds: dict[str, float]  # per benchmark (+ "load" when the model was loaded here)
    raw: dict  # lm-eval results dict + a "depthprune" section
    cache_key: str | None = None
    cache_hit: bool = False
    details: dict = field(default_factory=dict)
    # Per-document / per-window scores (rows of harness.SAMPLE_COLUMNS); None for a cache entry
    # written before they were kept.
    samples: list[dict] | None = None


def evaluate_model(model, tokenizer, settings: EvalSettings, removed=(), engine: str = LM_ENGINE) -> Evaluation:
    """Score ``model`` as it is on ``settings.benchmarks`` (``removed`` is only recorded).

    ``engine``: "depthprune" (shared-context scoring engine) or "hflm" (lm-eval's HFLM, full logits)."""
    removed = tuple(removed)
    evaluation = evaluate_sets(
        model, tokenizer, settings, [()], engine=engine, label=f"removed=[{format_layers(removed)}]"
    )[()]
    evaluation.raw["depthprune"]["removed"] = list(removed)
    evaluation.raw["depthprune"].pop("set_group", None)  # the model as it is: no group to report
    return dataclasses.replace(evaluation, removed=removed)


def evaluate_sets(
    model, tokenizer, settings: EvalSettings, sets, engine: str = LM_ENGINE, label: str | None = None
) -> dict[tuple[int, ...], Evaluation]:
    """Score the unpruned ``model`` without each of ``sets`` on ``settings.benchmarks``, in one pass.

    Each benchmark's rows (perplexity windows, lm-eval requests) are made once and scored for every
    set through the batch trie of depthprune.engine.set_group, so the blocks that sets share below
    their first difference run once. lm-eval then runs each task once per set on those scores, with
    its own prompts, filters and metrics. Per set, the result equals ``evaluate_model`` of the
    physically pruned model (tests/test_set_group.py). A set's ``seconds`` are its share of the
    group's wall time. ``engine="hflm"`` (lm-eval's HFLM, the reference of ``timing evaluate
    --compare``) scores only the model as it is: ``sets`` must be ``[()]``."""
    from depthprune.evaluation import harness

    sets = list(dict.fromkeys(parse_layers(s) for s in sets))
    grouped = engine == "depthprune"
    if not grouped and sets != [()]:
        raise InputError(f"lm engine {engine!r} scores the model as it is; only depthprune scores removed sets")
    model.eval()
    parts = {s: {"metrics": [], "seconds": {}, "perplexity": {}, "runs": [], "samples": []} for s in sets}
    blocks = {"blocks_run": 0, "naive_blocks": 0}
    progress = Progress(
        f"evaluate {label or f'{len(sets)} removed set(s)'}",
        total=len(settings.benchmarks),
        unit="benchmarks",
        interval=0.0,
    )
    offline = harness.hub_offline() if settings.data_dir is not None else contextlib.nullcontext()
    with offline:
        _score_perplexities(model, tokenizer, settings, sets, engine, parts, blocks, progress)
        _score_tasks(model, tokenizer, settings, sets, engine, parts, blocks, progress)
    if grouped:
        log.info(
            "%d removed set(s): %d blocks run, %d if each model ran on its own",
            len(sets),
            blocks["blocks_run"],
            blocks["naive_blocks"],
        )
    return {s: _evaluation(model, s, parts[s], sets, blocks if grouped else None) for s in sets}


def _score_perplexities(model, tokenizer, settings: EvalSettings, sets, engine: str, parts, blocks, progress) -> None:
    """The corpus perplexities of ``settings.benchmarks`` for every set, into ``parts`` (and the one
    pass's block counts into ``blocks``)."""
    from depthprune.evaluation.perplexity import evaluate_perplexity, evaluate_perplexity_for_sets

    window_args = {
        "seq_len": settings.ppl_seq_len,
        "max_tokens": settings.ppl_max_tokens,
        "batch_size": settings.batch_size,
        "data_dir": settings.data_dir,
    }
    for benchmark in (b for b in settings.benchmarks if b in CORPUS_PERPLEXITIES):
        started = time.perf_counter()
        if engine == "depthprune":
            results, stats = evaluate_perplexity_for_sets(model, tokenizer, benchmark, sets, **window_args)
            blocks["blocks_run"] += stats.blocks_run
            blocks["naive_blocks"] += stats.naive_blocks
        else:
            results = {(): evaluate_perplexity(model, tokenizer, benchmark, engine=engine, **window_args)}
        for s in sets:
            result, part = results[s], parts[s]
            part["metrics"].append(
                MetricValue(benchmark, "perplexity", result.perplexity, result.stderr, result.n_tokens)
            )
            part["seconds"][benchmark] = result.seconds
            part["perplexity"][benchmark] = result.to_dict()
            part["samples"].extend(result.sample_rows())
        progress.step(note=f"{benchmark} took {time.perf_counter() - started:.1f}s")


def _score_tasks(model, tokenizer, settings: EvalSettings, sets, engine: str, parts, blocks, progress) -> None:
    """The lm-eval tasks of ``settings.benchmarks`` for every set, into ``parts``: each task is built
    once, and its first run scores its requests for every set (the batch trie)."""
    from depthprune.evaluation import harness

    tasks = [b for b in settings.benchmarks if b in LM_EVAL_TASKS]
    if not tasks:
        return
    grouped = engine == "depthprune"
    with harness.task_manager(settings.data_dir, tasks) as manager:
        lm = harness.make_lm(model, tokenizer, settings.batch_size, engine=engine)
        if grouped:
            lm.use_set_group(sets)
        for task in tasks:
            started = time.perf_counter()
            task_objects = harness.load_task(manager, task)  # built once, run for every set
            for s in sets:  # the first run scores the task's requests for every set
                if grouped:
                    lm.active_set = s
                run = harness.run_task(
                    lm,
                    manager,
                    task,
                    limit=settings.task_limit(task),
                    bootstrap_iters=settings.bootstrap_iters,
                    task_objects=task_objects,
                )
                parts[s]["metrics"].extend(run.metrics)
                parts[s]["runs"].append(run.results)
                parts[s]["samples"].extend(run.samples or [])
            seconds = time.perf_counter() - started
            for s in sets:
                parts[s]["seconds"][task] = seconds / len(sets)
            progress.step(note=f"{task} took {seconds:.1f}s")
        if grouped:
            blocks["blocks_run"] += lm.group_stats.blocks_run
            blocks["naive_blocks"] += lm.group_stats.naive_blocks


def _evaluation(model, removed: tuple[int, ...], part: dict, sets, blocks: dict | None) -> Evaluation:
    """One set's Evaluation from its scored ``part`` (``blocks``: the one pass's counts; None: not grouped)."""
    from depthprune.evaluation import harness
    from depthprune.models.loading import dtype_name

    raw = harness.merge_results(part["runs"])
    raw["depthprune"] = {
        "removed": list(removed),
        "dtype": dtype_name(next(model.parameters()).dtype),  # the resolved precision (dtype: auto)
        "perplexity": part["perplexity"],
        "seconds": part["seconds"],
    }
    if blocks is not None:
        raw["depthprune"]["set_group"] = {"sets": [list(t) for t in sets], **blocks}
    return Evaluation(
        removed=removed, metrics=part["metrics"], seconds=part["seconds"], raw=raw, samples=part["samples"]
    )


def check_data(settings: EvalSettings) -> None:
    """Fail before loading any model if the offline mirror lacks a file the benchmarks need."""
    if settings.data_dir is None:
        return
    from depthprune.evaluation.perplexity import local_corpus_file

    for benchmark in settings.benchmarks:
        if benchmark in CORPUS_PERPLEXITIES:
            local_corpus_file(benchmark, settings.data_dir)  # raises, naming the file, if missing
    check_offline_data([b for b in settings.benchmarks if b in LM_EVAL_TASKS], settings.data_dir)


def data_fingerprint(settings: EvalSettings) -> dict:
    """Identity of the evaluation data: file hashes for a mirror (its location does not matter)."""
    if settings.data_dir is None:
        return {"source": "hub"}
    from depthprune.evaluation.perplexity import local_corpus_file

    files = {}
    for benchmark in settings.benchmarks:
        paths = (
            [local_corpus_file(benchmark, settings.data_dir)]
            if benchmark in CORPUS_PERPLEXITIES
            else list(offline_data_files(benchmark, settings.data_dir).values())
        )
        for path in paths:
            files[f"{path.parent.name}/{path.name}"] = file_sha256(path)
    return {"source": "data_dir", "sha256": files}


def cache_payload(model_identity: dict, removed, settings: EvalSettings) -> dict:
    """Everything that can change a figure; its hash is the cache key."""
    versions = package_versions()
    return {
        "model": model_identity,
        "removed": list(removed),
        "settings": {
            "benchmarks": sorted(settings.benchmarks, key=BENCHMARKS.index),
            "limit": settings.limit,
            # only when set: the cache keys of studies without per-task limits stay as they were
            **({"limit_per_task": dict(sorted(settings.limit_per_task.items()))} if settings.limit_per_task else {}),
            "ppl_seq_len": settings.ppl_seq_len,
            "ppl_max_tokens": settings.ppl_max_tokens,
            "batch_size": settings.batch_size,
            "bootstrap_iters": settings.bootstrap_iters,
            "log_softmax_dtype": LOG_SOFTMAX_DTYPE,
            "lm_engine": LM_ENGINE,
        },
        "data": data_fingerprint(settings),
        "versions": {name: versions[name] for name in KEY_VERSIONS},
    }


def evaluate_removed_sets(
    *,
    model_identity: dict,
    removed_sets,
    settings: EvalSettings,
    load: Callable[[], object],
    cache: EvalCache | None = None,
    read_cache: bool = True,
) -> list[Evaluation]:
    """Evaluate the model (``load()`` -> LoadedModel) without each of ``removed_sets``, through the
    cache, in the order given.

    ``model_identity`` (content fingerprint, resolved dtype, device, scoring version) stands for
    the model in the cache key. Sets found in the cache are answered from it; the others are
    computed together in one pass over the benchmarks (``evaluate_sets``: blocks shared below the
    sets' first differences run once) and stored one entry per set, so a rerun with one more set
    computes that set only. Nothing is loaded when every set is a hit. ``read_cache=False``
    (--recompute): evaluate every set again and replace its entry.
    """
    sets = [parse_layers(removed) for removed in removed_sets]
    distinct = list(dict.fromkeys(sets))
    check_data(settings)
    payloads = {s: cache_payload(model_identity, s, settings) for s in distinct}
    keys = {s: cache_key(payload) for s, payload in payloads.items()}
    if cache is None:
        found = _compute(load, distinct, settings, keys, payloads)
        return [found[s] for s in sets]
    with contextlib.ExitStack() as locks:
        for s in sorted(distinct, key=keys.get):  # one global order: jobs sharing sets cannot deadlock
            locks.enter_context(cache.lock(keys[s]))
        found = {}
        for s in distinct:
            entry = cache.get(keys[s]) if read_cache else None
            if entry is not None and entry.samples is None:
                # Written before per-document results were kept: evaluate again (once) to add them.
                log.info("evaluation cache entry %s lacks per-document results; re-evaluating", keys[s][:12])
                entry = None
            if entry is not None:
                log.info("evaluation cache hit %s (removed %r)", keys[s][:12], format_layers(s))
                found[s] = Evaluation(
                    removed=s,
                    metrics=[MetricValue(**row) for row in entry.metrics],
                    seconds=entry.seconds,
                    raw=entry.raw,
                    cache_key=keys[s],
                    cache_hit=True,
                    samples=entry.samples,
                )
        missing = [s for s in distinct if s not in found]
        if missing:
            log.info("evaluating %d of %d removed sets (%d cache hits)", len(missing), len(distinct), len(found))
            computed = _compute(load, missing, settings, keys, payloads)
            for s in missing:
                evaluation = computed[s]
                cache.put(
                    CacheEntry(
                        key=keys[s],
                        payload=payloads[s],
                        metrics=[dataclasses.asdict(m) for m in evaluation.metrics],
                        seconds=evaluation.seconds,
                        raw=evaluation.raw,
                        samples=evaluation.samples,
                    )
                )
            found.update(computed)
    return [found[s] for s in sets]


def _compute(load, sets, settings, keys, payloads) -> dict[tuple[int, ...], Evaluation]:
    """Load the unpruned model once and evaluate it without each of ``sets`` together."""
    start = time.perf_counter()
    loaded = load()
    load_seconds = (time.perf_counter() - start) / len(sets)
    evaluations = evaluate_sets(loaded.model, loaded.tokenizer, settings, sets)
    for s, evaluation in evaluations.items():
        check_finite(evaluation, loaded.name)  # before anything is cached or written
        evaluation.seconds = {"load": load_seconds, **evaluation.seconds}
        evaluation.cache_key = keys[s]
        evaluation.raw["depthprune"].update(cache_key=keys[s], key=payloads[s], seconds=evaluation.seconds)
    return evaluations


def check_finite(evaluation: Evaluation, model_name: str) -> None:
    """ValueError naming the model, the removed set and the benchmark if a score is not finite.

    A NaN in the weights or an overflow gives NaN log-likelihoods, which lm-eval turns into a
    plausible accuracy (the first answer wins every argmax) and a perplexity into an empty cell:
    such a model is broken, and its numbers must not become results.
    """
    bad = [f"{m.benchmark} {m.metric}={m.value}" for m in evaluation.metrics if not math.isfinite(m.value)]
    for row in evaluation.samples or ():
        if (row["metric"] == "nll_sum" or row["metric"].startswith("loglik_")) and not math.isfinite(row["value"]):
            bad.append(f"{row['benchmark']} document {row['unit']} {row['metric']}={row['value']}")
            break
    if bad:
        removed = f"without blocks [{format_layers(evaluation.removed)}]" if evaluation.removed else "(dense)"
        raise InputError(
            f"evaluate: model {model_name!r} {removed} gives non-finite scores ({'; '.join(bad[:3])}): "
            "its weights or computation are broken (NaN/inf); nothing was written"
        )


def metrics_frame(evaluation: Evaluation, labels: Labels, settings: EvalSettings):
    """The tidy metrics table (columns ``METRICS_COLUMNS``), benchmarks in canonical order."""
    import pandas as pd

    order = {b: i for i, b in enumerate(BENCHMARKS)}
    rows = [
        {
            "model": labels.model,
            "calibration": labels.calibration,
            "budget": labels.budget,
            "algorithm": labels.algorithm,
            "removed": format_layers(evaluation.removed),
            "benchmark": m.benchmark,
            "metric": m.metric,
            "value": m.value,
            "stderr": m.stderr,
            "n": m.n,
            "headline": m.metric == settings.headline_metric(m.benchmark),
        }
        for m in sorted(evaluation.metrics, key=lambda m: order[m.benchmark])
    ]
    return pd.DataFrame(rows, columns=METRICS_COLUMNS)


def raw_document(evaluation: Evaluation, labels: Labels, settings: EvalSettings) -> dict:
    """The raw lm-eval JSON with this run's labels and headline choices added."""
    raw = dict(evaluation.raw)
    section = dict(raw.get("depthprune", {}))
    section.update(
        labels=dataclasses.asdict(labels),
        removed=list(evaluation.removed),
        headline={b: settings.headline_metric(b) for b in settings.benchmarks},
        cache_key=evaluation.cache_key,
        cache_hit=evaluation.cache_hit,
    )
    raw["depthprune"] = section
    return raw


def samples_frame(evaluation: Evaluation, labels: Labels, settings: EvalSettings):
    """Labelled per-document table: ``SAMPLES_COLUMNS``; ``headline`` marks the rows the bootstrap
    resamples (the headline accuracy metric of a task; ``nll_sum``/``n_tokens`` of a perplexity)."""
    import pandas as pd

    if evaluation.samples is None:
        raise InputError(
            f"evaluation cache entry {evaluation.cache_key} predates per-document results; "
            "delete it (or pass --no-eval-cache) to re-evaluate"
        )
    frame = pd.DataFrame(evaluation.samples, columns=["benchmark", "unit", "metric", "value"])
    headline = [
        metric in ("nll_sum", "n_tokens")
        if benchmark in CORPUS_PERPLEXITIES
        else metric == settings.headline_metric(benchmark)
        for benchmark, metric in zip(frame["benchmark"], frame["metric"])
    ]
    labelled = pd.DataFrame(
        {
            "model": labels.model,
            "calibration": labels.calibration,
            "budget": labels.budget,
            "algorithm": labels.algorithm,
            "removed": format_layers(evaluation.removed),
        },
        index=frame.index,
    )
    out = pd.concat([labelled, frame], axis=1)
    out["headline"] = pd.Series(headline, index=frame.index, dtype=bool)
    out["unit"] = out["unit"].astype("int64")
    out["budget"] = out["budget"].astype("int64")
    return out[SAMPLES_COLUMNS]


def write_outputs(
    evaluation: Evaluation,
    labels: Labels,
    settings: EvalSettings,
    out_metrics: str | Path | None,
    out_raw: str | Path | None,
    out_samples: str | Path | None = None,
):
    """Write metrics.csv, the raw JSON and the per-document Parquet atomically; returns the metrics frame."""
    frame = metrics_frame(evaluation, labels, settings)
    if out_samples:
        from depthprune.io import atomic_write_parquet

        atomic_write_parquet(out_samples, samples_frame(evaluation, labels, settings))
    if out_raw:
        atomic_write_json(out_raw, raw_document(evaluation, labels, settings))
    if out_metrics:
        atomic_write_csv(out_metrics, frame)
    return frame

"""Carry the source study's perplexities into an evaluation-only study's aggregate (docs/method.md §11).

An evaluation-only study re-scores committed sets on its own tasks and documents; the rescore study
(`config/rescore_informative.yaml`) scores only three zero-shot tasks and no perplexity. §5.3 and
Figure 3 set each set's average perplexity against its accuracy, and a set's perplexity depends on
the set, the model, its precision and the perplexity data (WikiText-2 and C4 windows, LAMBADA
documents), never on the zero-shot documents: the source study measured it already. With ``source_study.perplexity`` (an aggregate
folder; `depthprune aggregate --perplexity-from`), the study's aggregate takes, for every run it
holds, the source's perplexity benchmarks (``PERPLEXITY_BENCHMARKS``, the parts of
``avg_perplexity``: their metrics rows and per-window or per-document scores), so ρ and its
document bootstrap run as in any study.

Taken only where they are the same computation, else refused with an error naming the source:

- the study evaluates no perplexity benchmark itself (its own would clash with the carried ones);
- every run but the random sets has its (model, calibration, seed, M, algorithm) in the source,
  removing the same blocks, searched at the same precision; the random sets were never scored on
  the source's windows and keep no perplexity (they are controls, outside §5.3's statistics);
- every carried run has the same windows of every perplexity benchmark.

What was carried is written as ``carried_perplexity.json`` next to the aggregate.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from depthprune.errors import InputError
from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS  # avg_perplexity's parts
from depthprune.evaluation_only import is_random_set
from depthprune.io import atomic_write_json, read_json
from depthprune.reporting.aggregate import (
    RUN_KEY,
    SAMPLES,
    Aggregate,
    build_summary,
    concat_runs,
    load_aggregate,
    load_samples,
)

log = logging.getLogger(__name__)

CARRIED_PERPLEXITY_RECORD = "carried_perplexity.json"


@dataclass(frozen=True)
class CarriedPerplexity:
    """What the aggregate took from the source study."""

    source: str
    benchmarks: tuple[str, ...]
    runs_carried: int
    runs_without: tuple[str, ...]  # the random sets: no perplexity in the source
    units_per_benchmark: dict


def carry_perplexity(agg: Aggregate, samples: pd.DataFrame, source_dir: str | Path):
    """``agg`` and ``samples`` with the source study's perplexity rows of every run they hold
    (module docstring); returns (aggregate, samples, record)."""
    source_dir = Path(source_dir)
    where = f"source_study.perplexity {source_dir}"
    own = agg.metrics[agg.metrics["benchmark"].isin(PERPLEXITY_BENCHMARKS)]
    if not own.empty:
        raise InputError(
            f"{where}: this study evaluates {', '.join(sorted(set(own['benchmark'])))} itself; "
            "carry perplexity only into a study that scores none"
        )
    if not (source_dir / f"{SAMPLES}.parquet").is_file():
        raise FileNotFoundError(
            f"{source_dir / f'{SAMPLES}.parquet'}: the source study's per-window scores are missing"
        )
    if (source_dir / CARRIED_PERPLEXITY_RECORD).is_file():
        carried_from = read_json(source_dir / CARRIED_PERPLEXITY_RECORD).get("source")
        raise InputError(
            f"{where}: is itself a study whose perplexities were carried (from {carried_from}), such as this "
            "study's own aggregate; pass the aggregate of the study that scored them (source_study.aggregate)"
        )
    source = load_aggregate(source_dir)
    source_samples = load_samples(source_dir)

    runs = agg.summary[RUN_KEY + ["removed"]]
    without = runs[runs["algorithm"].map(is_random_set)]
    runs = runs[~runs["algorithm"].map(is_random_set)]
    theirs = source.summary[RUN_KEY + ["removed"]]
    joined = runs.merge(theirs, on=RUN_KEY, how="left", suffixes=("", "_source"), indicator=True)
    missing = joined[joined["_merge"] != "both"]
    if not missing.empty:
        raise InputError(f"{where}: holds no run {_run_text(missing.iloc[0])} ({len(missing)} runs missing)")
    moved = joined[joined["removed"] != joined["removed_source"]]
    if not moved.empty:
        row = moved.iloc[0]
        raise InputError(
            f"{where}: its run {_run_text(row)} removes [{row['removed_source']}], this study's [{row['removed']}]"
        )
    keys = runs[RUN_KEY]
    picked = source.metrics[source.metrics["benchmark"].isin(PERPLEXITY_BENCHMARKS)].merge(keys, on=RUN_KEY)
    scored = keys.merge(picked[RUN_KEY].drop_duplicates(), on=RUN_KEY, how="left", indicator=True)
    unscored = scored[scored["_merge"] != "both"]
    if not unscored.empty:
        raise InputError(
            f"{where}: scored no perplexity for run {_run_text(unscored.iloc[0])} ({len(unscored)} runs); pass the "
            "aggregate of the study whose sets these are (source_study.aggregate), not one that scored none"
        )
    _check_dtype(agg.selections.merge(keys, on=RUN_KEY), source.selections, where)  # the random sets have none

    picked_samples = source_samples[source_samples["benchmark"].isin(PERPLEXITY_BENCHMARKS)].merge(keys, on=RUN_KEY)
    units = {}
    for benchmark, group in picked_samples.groupby("benchmark", sort=True):
        per_run = group.groupby(RUN_KEY, sort=False)["unit"].apply(frozenset)
        if per_run.nunique() != 1:
            raise InputError(f"{where}: its runs were scored on different {benchmark} windows")
        units[str(benchmark)] = len(per_run.iloc[0])

    metrics = concat_runs(agg.metrics, picked, RUN_KEY + ["benchmark", "metric"], where)
    merged_samples = concat_runs(samples, picked_samples, RUN_KEY + ["benchmark", "unit", "metric"], where)
    summary = build_summary(agg.selections, metrics)
    record = CarriedPerplexity(
        source=str(source_dir),
        benchmarks=PERPLEXITY_BENCHMARKS,
        runs_carried=len(keys),
        runs_without=tuple(
            sorted(f"{r.calibration}/seed{r.seed}/M{r.budget}/{r.algorithm}" for r in without.itertuples())
        ),
        units_per_benchmark=units,
    )
    log.info(
        "perplexity of %d runs carried from %s (%s); %d random sets without",
        record.runs_carried,
        source_dir,
        ", ".join(f"{b}: {n} windows" for b, n in units.items()),
        len(record.runs_without),
    )
    return Aggregate(selections=agg.selections, metrics=metrics, summary=summary), merged_samples, record


def write_record(record: CarriedPerplexity, out_dir: str | Path) -> Path:
    path = Path(out_dir) / CARRIED_PERPLEXITY_RECORD
    atomic_write_json(path, asdict(record))
    return path


def _run_text(row) -> str:
    return f"{row['model']} {row['calibration']} seed {row['seed']} M={row['budget']} {row['algorithm']}"


def _check_dtype(own: pd.DataFrame, source: pd.DataFrame, where: str) -> None:
    """The searches' recorded precision: the forward passes the perplexities come from."""
    joined = own[RUN_KEY + ["dtype"]].merge(source[RUN_KEY + ["dtype"]], on=RUN_KEY, suffixes=("", "_source"))
    unrecorded = joined[joined["dtype"].isna() | joined["dtype_source"].isna()]
    if not unrecorded.empty:
        row = unrecorded.iloc[0]
        whose = "the source's" if pd.isna(row["dtype_source"]) else "this study's"
        raise InputError(
            f"{where}: {whose} run {_run_text(row)} records no precision (dtype), so its perplexities cannot be "
            "matched to this study's forward passes; re-aggregate that study with this version"
        )
    differ = joined[joined["dtype"].astype(str) != joined["dtype_source"].astype(str)]
    if not differ.empty:
        row = differ.iloc[0]
        raise InputError(
            f"{where}: its run {_run_text(row)} ran in {row['dtype_source']}, this study's in {row['dtype']}"
        )

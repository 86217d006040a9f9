"""Collect every selection.json and metrics.csv into three tidy/wide tables under results/aggregate/.

The aggregate is the only input of the figures and tables:

- ``selections``: one row per search result (selection.json), removed set as "3 5 7".
- ``metrics``: every metrics.csv row (pruned and dense models), contract columns.
- ``summary``: one row per (model, calibration, budget, algorithm) with the headline value of every
  benchmark (``ppl_<benchmark>`` for perplexities, ``acc_<benchmark>`` for accuracies, as fractions),
  ``avg_perplexity`` (mean of the perplexity benchmarks) and ``avg_accuracy`` (mean of the zero-shot
  headline metrics; both sets from ``evaluation.benchmarks.BENCHMARK_TABLE``), plus the search cost
  columns of the selection.

An average is NaN when one of its parts is missing: a partial mean would not be comparable with the
complete ones next to it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from depthprune.budgets import check_protected, protected_blocks
from depthprune.calibration.specs import CALIBRATIONS
from depthprune.calibration.variants import parse_label
from depthprune.errors import InputError
from depthprune.evaluation.benchmarks import (
    ACCURACY_COLUMNS,
    METRICS_COLUMNS,
    PERPLEXITY_COLUMNS,
    SAMPLES_COLUMNS,
    ZERO_SHOT_BENCHMARKS,
)
from depthprune.io import atomic_write_csv, atomic_write_parquet, format_layers, parse_layers
from depthprune.paths import search_file_globs
from depthprune.reporting.provenance import RAW_EVALUATION, check_provenance
from depthprune.results_schema import (
    AGGREGATE_TABLE_SCHEMAS,
    DENSE_ALGORITHM,
    RUN_KEY_COLUMNS,
    RUN_METRICS,
    RUN_SAMPLES,
    SEARCH_RECORD_NUMBERS,
    TRUE_TEXT,
    check_table_files,
    evaluated_benchmarks,
    read_csv,
    read_evaluation_record,
    read_parquet,
    read_selection_json,
)

log = logging.getLogger(__name__)

KEY = list(RUN_KEY_COLUMNS)
# Several seeds (config `seeds:`) give one run per KEY and seed; analyses work on one seed at a time.
RUN_KEY = KEY + ["seed"]
SEED_DIR = re.compile(r"^seed(\d+)$")

SUMMARY_SELECTION_COLUMNS = ["removed", "n_layers", *SEARCH_RECORD_NUMBERS]
SELECTION_COLUMNS = KEY + SUMMARY_SELECTION_COLUMNS + ["seed", "hyperparameters", "source"]
# The selected set's loss (and TLM accuracy) on the fixed held-out draw (selection.json "heldout",
# from `search --heldout-samples`): columns of selections and summary only when some selection has
# them, so aggregates of studies without held-out scoring keep their columns and bytes.
HELDOUT_COLUMNS = ["heldout_loss", "heldout_accuracy", "heldout_samples"]
# The blocks no search could remove ("0 29" under `protect: boundary`; config model_table, passed as
# `aggregate --protected MODEL=SPEC`): the nulls of the agreement statistics draw random sets from the
# n_layers − |protected| candidates. A column only when some model protects a block, so aggregates of
# studies without protection keep their columns and bytes.
PROTECTED_COLUMN = "protected"
BOUNDARY = "boundary"

AGGREGATE_TABLES = ("selections", "metrics", "summary")
SAMPLES = "samples"  # per-document scores (Parquet only), read by the bootstrap
# Averages and accuracies are rounded to this many decimals so that equal accuracies (fractions of
# counts) compare equal: 0.45 and 0.44999999999999996 must tie in ranks, ρ and bold cells.
TIE_DECIMALS = 9
DENSE_CALIBRATION = "none"


def calibration_kind(calibration: str) -> str:
    """'tlm' (task-likelihood pruning), 'ppl' (perplexity pruning), 'none' (dense) or 'other'
    (a label that names no registered calibration), asked of the calibration's registry entry."""
    if calibration == DENSE_CALIBRATION:
        return "none"
    try:
        spec = CALIBRATIONS.get(parse_label(calibration).base)
    except ValueError:
        spec = None
    return spec.kind if spec is not None else "other"


# --------------------------------------------------------------------------- discovery and reading


def discover_result_files(results_dir: str | Path) -> tuple[list[Path], list[Path]]:
    """selection.json and metrics.csv files of the Snakemake layout under ``results_dir``."""
    root = Path(results_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"--results {root}: directory not found")
    selections = search_files(root, "selection.json")
    metrics = search_files(root, "metrics.csv") + sorted(root.glob("*/dense/metrics.csv"))
    return selections, metrics


def search_files(root: Path, name: str) -> list[Path]:
    """The file ``name`` of every search folder under ``root`` (paths.search_file_globs: the seeds
    layout, then the one before seeds)."""
    return [path for pattern in search_file_globs(name) for path in sorted(root.glob(pattern))]


def discover_samples(results_dir: str | Path) -> list[Path]:
    """samples.parquet files next to the metrics.csv files of the Snakemake layout."""
    root = Path(results_dir)
    return search_files(root, "samples.parquet") + sorted(root.glob("*/dense/samples.parquet"))


def evaluated_accuracy_tasks(summary: pd.DataFrame) -> tuple[str, ...]:
    """The zero-shot tasks a study evaluated (``ZERO_SHOT_BENCHMARKS`` order): those with an accuracy
    in any run. ``avg_accuracy`` is their mean (docs/method.md §7; all six in a full study, fewer in an
    evaluation-only study that names its own tasks, §11); a run without one of them has none."""
    return tuple(b for b in ZERO_SHOT_BENCHMARKS if f"acc_{b}" in summary and summary[f"acc_{b}"].notna().any())


def path_seed(path: Path) -> int | None:
    """The k of a ``seed<k>`` folder in ``path`` (None outside the seeds layout, e.g. the dense model)."""
    for part in Path(path).parts:
        match = SEED_DIR.match(part)
        if match:
            return int(match.group(1))
    return None


def assign_seeds(frame: pd.DataFrame, selections: pd.DataFrame) -> pd.DataFrame:
    """Give every row a ``seed``: its ``seed<k>`` folder, else the seed of the only selection with its
    KEY, else 0; the dense model (no seed) is repeated once per seed so each seed's slice is complete."""
    frame = frame.copy()
    if "seed" not in frame:
        frame["seed"] = [path_seed(Path(p)) for p in frame["source"]] if "source" in frame else None
    frame["seed"] = pd.to_numeric(frame["seed"], errors="coerce")
    if not selections.empty:
        unique = selections.groupby(KEY)["seed"].agg(lambda s: s.iloc[0] if s.nunique() == 1 else np.nan)
        missing = frame["seed"].isna() & (frame["algorithm"] != DENSE_ALGORITHM)
        if missing.any():
            keys = pd.MultiIndex.from_frame(frame.loc[missing, KEY])
            frame.loc[missing, "seed"] = unique.reindex(keys).to_numpy()
    seeds = sorted(int(v) for v in selections["seed"].dropna().unique()) if not selections.empty else []
    seeds = seeds or [0]
    dense = frame["algorithm"] == DENSE_ALGORITHM
    parts = [frame[~dense].assign(seed=frame.loc[~dense, "seed"].fillna(0))]
    if dense.any():
        parts += [frame[dense].assign(seed=seed) for seed in seeds]
    out = pd.concat(parts, ignore_index=True)
    out["seed"] = out["seed"].astype(int)
    return out


def read_selection(path: Path) -> dict:
    data = read_selection_json(path)
    row = {col: data.get(col) for col in SELECTION_COLUMNS}
    row["removed"] = format_layers(parse_layers(data["removed"]))
    row["budget"] = int(data["budget"])
    row["n_layers"] = int(data["n_layers"])
    if len(parse_layers(row["removed"])) != row["budget"]:
        raise InputError(f"{path}: removes {len(parse_layers(row['removed']))} layers but budget is {row['budget']}")
    # Parquet needs one type per column: keep the free-form dict as canonical JSON text.
    row["hyperparameters"] = json.dumps(data.get("hyperparameters") or {}, sort_keys=True)
    row["dtype"] = data.get("dtype")  # the search's resolved precision (None: not recorded)
    row["calibration_tokens"] = data.get("calibration_tokens")  # None: selection.json before it was recorded
    row["source"] = str(path)
    heldout = data.get("heldout") or {}
    if not isinstance(heldout, dict):
        raise InputError(f'{path}: selection.json "heldout" must be an object')
    row["heldout_loss"] = heldout.get("loss")
    row["heldout_accuracy"] = heldout.get("accuracy")
    row["heldout_samples"] = heldout.get("n_samples")
    return row


def read_metrics(path: Path) -> pd.DataFrame:
    """One run's metrics.csv (results_schema.RUN_METRICS: complete rows, a number in every value) as
    the contract columns, every benchmark its lm_eval.json beside it names included (check_tasks)."""
    text_columns = dict.fromkeys(("model", "calibration", "algorithm", "removed", "benchmark", "metric"), str)
    frame = read_csv(
        path,
        RUN_METRICS,
        dtype=text_columns,
        keep_default_na=False,
        na_values={"value": [""], "stderr": [""], "n": [""]},
    )
    frame = frame[METRICS_COLUMNS].copy()
    frame["removed"] = frame["removed"].map(lambda s: format_layers(parse_layers(s)))
    for col in ("budget", "value", "stderr", "n"):
        frame[col] = pd.to_numeric(frame[col])  # results_schema checked that each is a number (or empty)
    frame["budget"] = frame["budget"].astype(int)
    frame["headline"] = frame["headline"].map(lambda v: str(v).strip().lower() in TRUE_TEXT)
    own = recorded_tasks(path)
    if own is not None:
        check_tasks(path, frame, *own)
    return frame


def recorded_tasks(metrics_path: Path) -> tuple[Path, dict[str, str | None]] | None:
    """(lm_eval.json, benchmark -> headline metric) of the evaluation that wrote ``metrics_path``, from
    the lm_eval.json beside it; None without one."""
    raw = Path(metrics_path).with_name(RAW_EVALUATION)
    return (raw, evaluated_benchmarks(read_evaluation_record(raw))) if raw.is_file() else None


def check_tasks(path: Path, frame: pd.DataFrame, raw: Path, named: Mapping[str, str | None]) -> None:
    """A run's metrics.csv must hold every benchmark its evaluation's settings named (``named``,
    recorded in ``raw``), with the headline metric chosen for it: a metrics.csv cut at a line
    boundary, or a partial evaluation, would otherwise enter the aggregate as a run without those
    benchmarks (NaN averages, no error)."""
    present = set(zip(frame["benchmark"], frame["metric"]))
    benchmarks = {benchmark for benchmark, _ in present}
    missing = [
        benchmark if metric is None or benchmark not in benchmarks else f"{benchmark} {metric}"
        for benchmark, metric in named.items()
        if benchmark not in benchmarks or (metric is not None and (benchmark, metric) not in present)
    ]
    if missing:
        where = f"{raw.name} beside it" if raw.parent == Path(path).parent else f"{raw}, of the same model"
        raise InputError(
            f"{path}: lacks {', '.join(missing)}, which the evaluation settings ({where}) name "
            "(cut off or partial; run the evaluation again)"
        )


def check_runs_without_a_record(frames: Sequence[tuple[Path, pd.DataFrame]]) -> None:
    """A run whose evaluation left no lm_eval.json beside its metrics.csv (the committed runs keep only
    their small files) is judged by the settings its model's other evaluations recorded, where they
    all record the same: one study evaluates every run of a model with one `evaluation` section."""
    recorded: dict[str, dict[str, tuple[Path, dict]]] = {}
    for path, frame in frames:
        own = recorded_tasks(path)
        if own is not None:
            for model in set(frame["model"]):
                recorded.setdefault(model, {})[json.dumps(own[1], sort_keys=True)] = own
    for path, frame in frames:
        if Path(path).with_name(RAW_EVALUATION).is_file():
            continue  # judged by its own record (read_metrics)
        for model in sorted(set(frame["model"])):
            settings = list(recorded.get(model, {}).values())
            if len(settings) == 1:
                check_tasks(path, frame[frame["model"] == model], *settings[0])


# --------------------------------------------------------------------------- aggregation


@dataclass
class Aggregate:
    selections: pd.DataFrame
    metrics: pd.DataFrame
    summary: pd.DataFrame


def protected_layers(spec: str, n_layers: int) -> tuple[int, ...]:
    """The protected blocks of a model with ``n_layers`` blocks from a spec: block indices and/or
    ``boundary`` (the first and the last block), comma-separated; "" protects none. The same
    parsing, range check and boundary rule as the searches' ``--protected``/``--protect``."""
    parts = [p.strip() for p in str(spec).split(",") if p.strip()]
    try:
        explicit = parse_layers(" ".join(p for p in parts if p != BOUNDARY))
        check_protected(explicit, n_layers)
    except ValueError as err:
        raise InputError(
            f"--protected {spec!r}: a part is neither a block index in 0..{n_layers - 1} nor {BOUNDARY!r} ({err})"
        ) from err
    return protected_blocks(explicit, BOUNDARY if BOUNDARY in parts else "none", n_layers)


def add_protected(selections: pd.DataFrame, protected: Mapping[str, str]) -> pd.DataFrame:
    """Add the ``protected`` column (blocks as "0 29") when some model's spec protects a block; a
    selection that removes a protected block is an error (the searches never do)."""
    if selections.empty or not any(str(spec).strip() for spec in protected.values()):
        return selections
    unknown = sorted(set(protected) - set(selections["model"]))
    if unknown:
        raise InputError(f"--protected names models without selections: {', '.join(unknown)}")
    column = []
    for row in selections.itertuples(index=False):
        layers = protected_layers(protected.get(row.model, ""), int(row.n_layers))
        clash = sorted(set(layers) & set(parse_layers(row.removed)))
        if clash:
            raise InputError(f"{row.source}: removes protected block(s) {clash} of model {row.model}")
        column.append(format_layers(layers))
    out = selections.copy()
    out.insert(out.columns.get_loc("n_layers") + 1, PROTECTED_COLUMN, column)
    return out


def aggregate(
    selection_files: Sequence[str | Path],
    metrics_files: Sequence[str | Path],
    protected: Mapping[str, str] | None = None,
) -> Aggregate:
    """Build the three aggregate tables from explicit file lists (of one provenance: provenance.py);
    ``protected`` maps a model to its protected-block spec (``protected_layers``)."""
    check_provenance(selection_files, metrics_files)
    selections = add_protected(_selections_frame([Path(p) for p in selection_files]), protected or {})
    metrics = assign_seeds(_metrics_frame([Path(p) for p in metrics_files]), selections)
    _check_consistency(selections, metrics)
    summary = build_summary(selections, metrics)
    return Aggregate(selections=selections, metrics=metrics, summary=summary)


def _selections_frame(paths: list[Path]) -> pd.DataFrame:
    rows = [read_selection(p) for p in paths]
    heldout = [c for c in HELDOUT_COLUMNS if any(row[c] is not None for row in rows)]
    columns = SELECTION_COLUMNS + heldout
    frame = pd.DataFrame(rows, columns=columns)
    numeric = [
        c for c in columns if c not in ("model", "calibration", "algorithm", "removed", "hyperparameters", "source")
    ]
    for col in numeric:
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    frame.insert(frame.columns.get_loc("seed") + 1, "dtype", [row["dtype"] for row in rows])
    # The calibration's real tokens per evaluation, where every selection.json records them (the
    # committed aggregates were made before: they keep their columns).
    if all(row["calibration_tokens"] is not None for row in rows) and rows:
        tokens = [int(row["calibration_tokens"]) for row in rows]
        frame.insert(frame.columns.get_loc("dtype") + 1, "calibration_tokens", tokens)
    frame["seed"] = frame["seed"].fillna(0).astype(int)  # selection.json before seeds: seed 0
    _raise_on_duplicates(frame, "selection.json", RUN_KEY)
    frame["budget"] = frame["budget"].astype(int)
    frame["n_layers"] = frame["n_layers"].astype(int)
    return frame.sort_values(RUN_KEY, kind="stable").reset_index(drop=True)


def _metrics_frame(paths: list[Path]) -> pd.DataFrame:
    read = [(path, read_metrics(path)) for path in paths]
    check_runs_without_a_record(read)
    frames = [frame.assign(source=str(path)) for path, frame in read]
    if not frames:
        return pd.DataFrame(columns=METRICS_COLUMNS + ["source"])
    metrics = pd.concat(frames, ignore_index=True)
    metrics["seed"] = [path_seed(Path(p)) for p in metrics["source"]]
    dup = metrics.duplicated(KEY + ["seed", "benchmark", "metric"], keep=False)
    if dup.any():
        first = metrics[dup].iloc[0]
        files = sorted(set(metrics[dup & (metrics["benchmark"] == first["benchmark"])]["source"]))
        raise InputError(
            f"metrics for {_key_text(first)} {first['benchmark']}/{first['metric']} appear more than once "
            f"(in {', '.join(files)})"
        )
    return metrics.sort_values(KEY + ["benchmark", "metric"], kind="stable").reset_index(drop=True)


def concat_runs(own: pd.DataFrame, other: pd.DataFrame, key: list[str], origin: str) -> pd.DataFrame:
    """Rows of both (a committed study's runs joining this study's: ``base_study``,
    ``carried_perplexity``), the study's column order first, sorted as the aggregate sorts them; a
    row of ``key`` both hold is an error naming ``origin``."""
    columns = list(own.columns) + [c for c in other.columns if c not in own.columns]
    out = pd.concat([own, other.reindex(columns=columns)], ignore_index=True) if not other.empty else own
    if out.duplicated(key).any():
        row = out[out.duplicated(key)].iloc[0]
        raise InputError(f"{origin} and this study both hold {dict(row[key])}")
    return out.sort_values([k for k in RUN_KEY if k in out.columns], kind="stable").reset_index(drop=True)


def _raise_on_duplicates(frame: pd.DataFrame, what: str, key=KEY) -> None:
    dup = frame.duplicated(key, keep=False)
    if dup.any():
        first = frame[dup].iloc[0]
        same = frame[(frame[key] == first[key]).all(axis=1)]
        raise InputError(f"two {what} files for {_key_text(first)}: {', '.join(same['source'])}")


def _key_text(row) -> str:
    return f"model={row['model']} calibration={row['calibration']} M={row['budget']} algorithm={row['algorithm']}"


def _check_consistency(selections: pd.DataFrame, metrics: pd.DataFrame) -> None:
    """A metrics.csv must evaluate the set its selection.json removed; otherwise it is stale."""
    if selections.empty or metrics.empty:
        return
    evaluated = metrics.drop_duplicates(RUN_KEY + ["removed"])[RUN_KEY + ["removed", "source"]]
    joined = selections[RUN_KEY + ["removed"]].merge(evaluated, on=RUN_KEY, suffixes=("", "_metrics"))
    stale = joined[joined["removed"] != joined["removed_metrics"]]
    if not stale.empty:
        row = stale.iloc[0]
        raise InputError(
            f"{row['source']}: evaluates removed=[{row['removed_metrics']}] but the selection for "
            f"{_key_text(row)} removes [{row['removed']}] (stale metrics; re-run evaluate)"
        )


def headline_values(metrics: pd.DataFrame) -> pd.DataFrame:
    """Wide frame: one row per key, one column per benchmark (``ppl_``/``acc_`` + benchmark)."""
    head = metrics[metrics["headline"].astype(bool)].copy()
    if head.empty:
        return pd.DataFrame(columns=RUN_KEY)
    dup = head.duplicated(RUN_KEY + ["benchmark"], keep=False)
    if dup.any():
        row = head[dup].iloc[0]
        raise InputError(f"{row['source']}: more than one headline metric for benchmark {row['benchmark']}")
    head["column"] = np.where(head["metric"] == "perplexity", "ppl_", "acc_") + head["benchmark"]
    return head.pivot(index=RUN_KEY, columns="column", values="value").reset_index().rename_axis(columns=None)


def build_summary(selections: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, calibration, budget, algorithm) found in either input, dense included."""
    if "seed" not in metrics:
        metrics = metrics.assign(seed=0)
    if "seed" not in selections:
        selections = selections.assign(seed=0)
    wide = headline_values(metrics)
    keys = pd.concat([selections[RUN_KEY], wide[RUN_KEY], metrics[RUN_KEY]]).drop_duplicates()
    keys["seed"] = keys["seed"].astype(int)
    heldout = [c for c in HELDOUT_COLUMNS if c in selections.columns]
    protected = [PROTECTED_COLUMN] if PROTECTED_COLUMN in selections.columns else []
    summary = keys.merge(selections[RUN_KEY + SUMMARY_SELECTION_COLUMNS + protected + heldout], on=RUN_KEY, how="left")
    summary = summary.merge(wide.astype({"seed": int}), on=RUN_KEY, how="left")
    for col in PERPLEXITY_COLUMNS + ACCURACY_COLUMNS:
        if col not in summary:
            summary[col] = np.nan
    if not metrics.empty:
        # Dense rows (and evaluations without a selection.json) take the removed set from metrics.csv.
        removed = metrics.drop_duplicates(RUN_KEY)[RUN_KEY + ["removed"]].rename(columns={"removed": "removed_metrics"})
        summary = summary.merge(removed.astype({"seed": int}), on=RUN_KEY, how="left")
        summary["removed"] = summary["removed"].fillna(summary["removed_metrics"])
        summary = summary.drop(columns="removed_metrics")
    summary["removed"] = summary["removed"].fillna("")
    # mean(skipna=False): an average with a missing part is NaN, never a partial mean.
    summary["avg_perplexity"] = summary[list(PERPLEXITY_COLUMNS)].mean(axis=1, skipna=False)
    # over the zero-shot tasks the study evaluated (an evaluation-only study may score fewer, §11)
    summary["avg_accuracy"] = summary[[f"acc_{b}" for b in evaluated_accuracy_tasks(summary)]].mean(
        axis=1, skipna=False
    )
    rounded = list(ACCURACY_COLUMNS) + ["avg_accuracy", "avg_perplexity"]
    summary[rounded] = summary[rounded].round(TIE_DECIMALS)
    summary.insert(4, "calibration_kind", summary["calibration"].map(calibration_kind))
    extra = sorted(
        c for c in summary.columns if c.startswith(("ppl_", "acc_")) and c not in PERPLEXITY_COLUMNS + ACCURACY_COLUMNS
    )
    ordered = (
        RUN_KEY
        + ["calibration_kind"]
        + SUMMARY_SELECTION_COLUMNS
        + list(PERPLEXITY_COLUMNS)
        + ["avg_perplexity"]
        + list(ACCURACY_COLUMNS)
        + ["avg_accuracy"]
        + extra
        + protected
        + heldout
    )
    summary["budget"] = summary["budget"].astype(int)
    return summary[ordered].sort_values(RUN_KEY, kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- files


def collect_samples(paths: Sequence[str | Path], selections: pd.DataFrame | None = None) -> pd.DataFrame:
    """Concatenate per-run samples.parquet files (written by ``depthprune evaluate --out-samples``)."""
    frames = []
    for path in map(Path, paths):
        frames.append(read_parquet(path, RUN_SAMPLES).assign(source=str(path)))
    if not frames:
        return pd.DataFrame(columns=SAMPLES_COLUMNS + ["seed"])
    out = pd.concat(frames, ignore_index=True)
    out = assign_seeds(out, selections if selections is not None else pd.DataFrame()).drop(columns="source")
    dup = out.duplicated(RUN_KEY + ["benchmark", "unit", "metric"])
    if dup.any():
        row = out[dup].iloc[0]
        raise InputError(f"per-document results for {_key_text(row)} {row['benchmark']} appear more than once")
    return out


def write_samples(samples: pd.DataFrame, out_dir: str | Path) -> Path:
    path = Path(out_dir) / f"{SAMPLES}.parquet"
    atomic_write_parquet(path, samples)
    return path


def write_aggregate(agg: Aggregate, out_dir: str | Path) -> list[Path]:
    """Write ``<name>.csv`` and ``<name>.parquet`` for the three tables; return the paths."""
    out = Path(out_dir)
    written = []
    for name in AGGREGATE_TABLES:
        frame = getattr(agg, name)
        for suffix, writer in ((".csv", atomic_write_csv), (".parquet", atomic_write_parquet)):
            path = out / f"{name}{suffix}"
            writer(path, frame)
            written.append(path)
    log.info(
        "aggregate: %d selections, %d metric rows, %d summary rows -> %s",
        len(agg.selections),
        len(agg.metrics),
        len(agg.summary),
        out,
    )
    return written


def load_aggregate(aggregate_dir: str | Path, tables: Iterable[str] = AGGREGATE_TABLES) -> Aggregate:
    """Read the Parquet aggregate (exact dtypes) through results_schema: a missing, cut or unreadable
    file, or a CSV twin that differs from its Parquet, is an error naming it. The tables not asked
    for are validated too where their files exist (their frames are left empty)."""
    root = Path(aggregate_dir)
    frames = {}
    for name in AGGREGATE_TABLES:
        if name not in tables:
            check_table_files(root, name, AGGREGATE_TABLE_SCHEMAS[name])
            frames[name] = pd.DataFrame()
            continue
        path = root / f"{name}.parquet"
        if not path.exists():
            raise FileNotFoundError(f"{path}: aggregate file not found (run `depthprune aggregate` first)")
        frames[name] = read_parquet(path, AGGREGATE_TABLE_SCHEMAS[name])
    return Aggregate(**frames)


def load_samples(aggregate_dir: str | Path) -> pd.DataFrame | None:
    """The aggregate's per-document scores (samples.parquet), or None where the folder has none
    (aggregates made before they were collected)."""
    path = Path(aggregate_dir) / f"{SAMPLES}.parquet"
    if not path.exists():
        log.warning("%s not found: no bootstrap intervals", path)
        return None
    return read_parquet(path, AGGREGATE_TABLE_SCHEMAS[SAMPLES])

"""Every result file depthprune reads, declared once, and the readers that refuse a broken one.

A file cut off by an interrupted write, a full disk or a bad copy must never be read as a smaller
result: pandas fills a row cut mid-line with NaN (a benchmark "arc" with no value), and a file cut
at a line boundary is one run or one table row fewer. Each kind of file has one declaration here
(``TableSchema`` for CSV and Parquet tables, a function for each JSON record), and every reader of
that kind goes through the functions below, which raise InputError with one line naming the file:

- CSV: UTF-8 text ending in a newline (the writers end every row with one: a missing final newline
  is a row cut off), every row with the header's number of fields, the declared columns, a number
  in every row of a ``numbers`` column, a number or nothing in an ``optional_numbers`` column, and
  true/false in a ``flags`` column;
- Parquet: readable, the declared columns with numeric (or, for flags, boolean) dtypes, no NaN in a
  ``numbers`` column;
- twins: an aggregate table is written twice from one frame (``aggregate.write_aggregate``), as
  ``<name>.csv`` for people and ``<name>.parquet`` for the render; where both exist the CSV must be
  exactly that frame's CSV text, so a truncated or edited twin is refused whichever one is read;
- JSON: valid JSON of the declared shape (``read_selection_json``, ``read_prior_json``,
  ``read_evaluation_record``).

The readers validate and return what the pandas reader returns for a sound file (no dtype is
coerced here), so a valid file renders the same bytes as before.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthprune.errors import InputError
from depthprune.evaluation.benchmarks import ACCURACY_COLUMNS, METRICS_COLUMNS, PERPLEXITY_COLUMNS, SAMPLES_COLUMNS
from depthprune.io import read_json

RUN_KEY_COLUMNS = ("model", "calibration", "budget", "algorithm")
DENSE_ALGORITHM = "dense"  # the unpruned model's run label (reporting/aggregate.py writes its rows)
# What a true/false column may hold in a CSV ("" is false: metrics.csv files written before the
# headline column was always filled).
TRUE_TEXT = ("true", "1", "yes")
FALSE_TEXT = ("false", "0", "no", "")


@dataclass(frozen=True)
class TableSchema:
    """The columns a reader of one kind of table needs, and what each must hold."""

    kind: str  # what the file is, in error messages
    columns: tuple[str, ...]  # required columns
    numbers: tuple[str, ...] = ()  # numeric, a number in every row (never empty or NaN)
    optional_numbers: tuple[str, ...] = ()  # numeric where present, empty/NaN allowed
    flags: tuple[str, ...] = ()  # true/false
    # Results hold finite numbers: ±inf is refused in every number column (a rendered table may print
    # an infinite ratio), and a searched run (not the dense model, not a random set) has a finite loss.
    finite: bool = False


# --------------------------------------------------------------------------- the declarations

# One run's evaluation (`depthprune evaluate --out-metrics`): evaluation/run.py metrics_frame.
RUN_METRICS = TableSchema(
    "metrics.csv",
    tuple(METRICS_COLUMNS),
    numbers=("budget", "value"),
    optional_numbers=("stderr", "n"),
    flags=("headline",),
    finite=True,
)
# One run's per-document scores (`depthprune evaluate --out-samples`): evaluation/run.py samples_frame.
RUN_SAMPLES = TableSchema(
    "samples.parquet", tuple(SAMPLES_COLUMNS), numbers=("budget", "unit", "value"), flags=("headline",), finite=True
)
# What a search records about its set (selection.json -> the aggregate's selections and summary).
SEARCH_RECORD_NUMBERS = (
    "loss",
    "calibration_perplexity",
    "calibration_accuracy",
    "distinct_evaluations",
    "memo_hits",
    "blocks_run",
    "search_seconds",
    "prior_seconds",
)
# The aggregate's tables (reporting/aggregate.py): the columns every reader needs; the rest of a
# table's columns are numbers where present (a column that only some studies have, such as
# `protected` or the held-out loss, is not required).
AGGREGATE_SELECTIONS = TableSchema(
    "aggregate selections",
    (*RUN_KEY_COLUMNS, "removed", "n_layers"),
    numbers=("budget", "n_layers"),
    optional_numbers=(
        "seed",
        *SEARCH_RECORD_NUMBERS,
        "calibration_tokens",
        "heldout_loss",
        "heldout_accuracy",
        "heldout_samples",
    ),
    finite=True,
)
AGGREGATE_METRICS = TableSchema(
    "aggregate metrics",
    tuple(METRICS_COLUMNS),
    numbers=("budget", "value"),
    optional_numbers=("stderr", "n", "seed"),
    flags=("headline",),
    finite=True,
)
# calibration-size reads the summary.csv alone, and only these columns (a study of some benchmarks
# may be summarised without the others' columns); the render needs every benchmark's (below).
AGGREGATE_SUMMARY = TableSchema(
    "aggregate summary",
    (*RUN_KEY_COLUMNS, "removed", "avg_perplexity", "avg_accuracy"),
    numbers=("budget",),
    optional_numbers=(
        "seed",
        "n_layers",
        *SEARCH_RECORD_NUMBERS,
        "avg_perplexity",
        "avg_accuracy",
        *PERPLEXITY_COLUMNS,
        *ACCURACY_COLUMNS,
        "heldout_loss",
        "heldout_accuracy",
        "heldout_samples",
    ),
    finite=True,
)
AGGREGATE_SUMMARY_EVERY_BENCHMARK = dataclasses.replace(
    AGGREGATE_SUMMARY, columns=(*AGGREGATE_SUMMARY.columns, *PERPLEXITY_COLUMNS, *ACCURACY_COLUMNS)
)
AGGREGATE_SAMPLES = TableSchema(
    "aggregate samples", tuple(SAMPLES_COLUMNS), numbers=("budget", "unit", "value"), flags=("headline",), finite=True
)
AGGREGATE_TABLE_SCHEMAS = {
    "selections": AGGREGATE_SELECTIONS,
    "metrics": AGGREGATE_METRICS,
    "summary": AGGREGATE_SUMMARY_EVERY_BENCHMARK,
    "samples": AGGREGATE_SAMPLES,
}

# The rendered tables docs/results.md and the README are written from (figures/**/tables/<name>.csv,
# by `depthprune render`): the columns reporting/pages/results_page.py reads, and those it reads as numbers.
REPORT_TABLE_SCHEMAS = {
    "paper_comparison": TableSchema(
        "rendered paper_comparison.csv",
        ("claim", "scope", "statistic", "paper_value", "value", "verdict"),
        optional_numbers=("value", "ci_low", "ci_high", "null_pass_probability"),
    ),
    "observations": TableSchema(
        "rendered observations.csv",
        ("claim", "scope", "statistic", "value", "verdict"),
        optional_numbers=("ci_low", "ci_high"),
    ),
    "evaluation_size": TableSchema("rendered evaluation_size.csv", ("limit",), optional_numbers=("limit",)),
    "calibration_contrast": TableSchema(
        "rendered calibration_contrast.csv",
        ("algorithm", "budget", "acc_tlm_pruned", "acc_perplexity_pruned", "diff_tlm_minus_ppl", "mdd"),
        optional_numbers=("budget", "acc_tlm_pruned", "acc_perplexity_pruned", "diff_tlm_minus_ppl", "mdd"),
    ),
    "baselines": TableSchema(
        "rendered baselines.csv",
        ("benchmark", "chance", "baseline", "majority", "majority_answer", "n_documents"),
        numbers=("chance", "baseline"),
        optional_numbers=("majority", "n_documents"),
    ),
    "calibration_decomposition": TableSchema(
        "rendered calibration_decomposition.csv",
        ("algorithm", "budget", "response", "effect", "estimate", "ci_low", "ci_high", "verdict", "direction"),
        optional_numbers=("budget", "estimate", "ci_low", "ci_high"),
    ),
    "calibration_decomposition_sets": TableSchema(
        "rendered calibration_decomposition_sets.csv",
        ("budget", "within_minus_across", "p_permutation", "verdict", "across", "across_null_low", "across_null_high"),
        optional_numbers=("budget", "within_minus_across", "p_permutation", "across"),
    ),
    "seeds_two_stage": TableSchema("rendered seeds_two_stage.csv", ()),
    "seeds_claims": TableSchema(
        "rendered seeds_claims.csv",
        ("claim", "statistic", "estimate", "ci_low", "ci_high", "seeds_holding", "per_seed", "verdict"),
        optional_numbers=("estimate", "ci_low", "ci_high"),
    ),
}


# --------------------------------------------------------------------------- CSV


def check_csv(path: str | Path, schema: TableSchema) -> list[dict[str, str]]:
    """The rows of a complete, well-formed CSV of ``schema`` as dicts of text (csv.DictReader's);
    ValueError naming the file and line otherwise (module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: {schema.kind} not found")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text (byte {err.start}); a damaged {schema.kind}") from err
    if not text:
        raise InputError(f"{path}: empty file, not even a header line (a {schema.kind} cut off?)")
    if not text.endswith("\n"):
        raise InputError(f"{path}: cut off mid-row (its last line has no newline; an interrupted write?): rewrite it")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
        rows = []
        for record in reader:
            if len(record) != len(header):
                raise InputError(
                    f"{path}: line {reader.line_num} has {len(record)} fields, the header {len(header)} "
                    "(a row cut off or edited?)"
                )
            rows.append((reader.line_num, dict(zip(header, record))))
    except csv.Error as err:
        raise InputError(f"{path}: not a well-formed CSV at line {reader.line_num} ({err})") from err
    missing = [c for c in schema.columns if c not in header]
    if missing:
        raise InputError(f"{path}: {schema.kind} lacks columns {', '.join(missing)}")
    for line, row in rows:
        for column in schema.numbers:
            if not _is_number(row[column], empty=False, finite=schema.finite):
                raise InputError(f"{path}: line {line}: {column} is {row[column]!r}, {_not_a_number(row[column])}")
        for column in (c for c in schema.optional_numbers if c in row):
            if not _is_number(row[column], empty=True, finite=schema.finite):
                raise InputError(f"{path}: line {line}: {column} is {row[column]!r}, {_not_a_number(row[column])}")
        searched_row = schema.finite and "loss" in row and searched(row.get("algorithm"))
        if searched_row and not _is_number(row["loss"], empty=False, finite=True):
            raise InputError(f"{path}: line {line}: loss is {row['loss']!r}: {_LOSS_REQUIRED}")
        for column in schema.flags:
            if row[column].strip().lower() not in TRUE_TEXT + FALSE_TEXT:
                raise InputError(f"{path}: line {line}: {column} is {row[column]!r}, not true/false")
    return [row for _, row in rows]


def _is_number(text: str, empty: bool, finite: bool = False) -> bool:
    """Whether ``text`` is a number (NaN is none; ``empty``: "" and NaN stand for "no value";
    ``finite``: ±inf is none)."""
    text = text.strip()
    if text == "" or text.lower() == "nan":
        return empty
    try:
        value = float(text)
    except ValueError:
        return False
    return math.isfinite(value) or not finite


def _not_a_number(text: str) -> str:
    """What a refused cell is not: infinite values are numbers, but not the finite ones results hold."""
    try:
        infinite = math.isinf(float(text))
    except ValueError:
        infinite = False
    return "not a finite number" if infinite else "not a number"


_LOSS_REQUIRED = "a searched run's calibration loss must be a finite number (a failed or edited search?)"


def searched(algorithm: Any) -> bool:
    """Whether a run's set came from a search, which records its calibration loss (the dense model
    and the random-set control have none)."""
    from depthprune.evaluation_only import is_random_set

    return algorithm is not None and str(algorithm) != DENSE_ALGORITHM and not is_random_set(str(algorithm))


def read_csv(path: str | Path, schema: TableSchema, **read_options):
    """``pandas.read_csv(path, **read_options)`` of a CSV that ``check_csv`` accepts and that agrees
    with its Parquet twin where one exists (``check_twin``)."""
    import pandas as pd

    path = Path(path)
    check_csv(path, schema)
    twin = path.with_suffix(".parquet")
    if twin.is_file():
        read_parquet(twin, schema)  # compares the two
    return pd.read_csv(path, **read_options)


# --------------------------------------------------------------------------- Parquet


def read_parquet(path: str | Path, schema: TableSchema):
    """The frame of a readable Parquet file of ``schema``; where its CSV twin exists, the twin must be
    exactly this frame's CSV text. ValueError naming the file otherwise."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: {schema.kind} not found")
    try:
        frame = pd.read_parquet(path)
    except Exception as err:  # pyarrow raises several unrelated types for a corrupt file
        raise InputError(f"{path}: not a readable Parquet file ({err})") from err
    check_frame(frame, schema, path)
    check_twin(path.with_suffix(".csv"), path, frame)
    return frame


def check_frame(frame, schema: TableSchema, path: Path) -> None:
    """The declared columns with numeric or boolean dtypes, and no NaN in a ``numbers`` column (an
    empty table has nothing to judge but its columns)."""
    import numpy as np
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    missing = [c for c in schema.columns if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: {schema.kind} lacks columns {', '.join(missing)}")
    if frame.empty:
        return
    for column in (*schema.numbers, *(c for c in schema.optional_numbers if c in frame.columns)):
        series = frame[column]
        if (not is_numeric_dtype(series) or is_bool_dtype(series)) and series.notna().any():
            raise InputError(f"{path}: column {column} holds {series.dtype} values, not numbers")
    for column in schema.numbers:
        if frame[column].isna().any():
            row = int(frame[column].isna().to_numpy().nonzero()[0][0])
            raise InputError(f"{path}: row {row}: {column} is missing (NaN where a number is required)")
    if schema.finite:
        for column in (*schema.numbers, *(c for c in schema.optional_numbers if c in frame.columns)):
            infinite = np.isinf(frame[column].to_numpy(dtype=float, na_value=np.nan))
            if infinite.any():
                row = int(infinite.nonzero()[0][0])
                raise InputError(f"{path}: row {row}: {column} is {frame[column].iloc[row]}, not a finite number")
        if "loss" in frame.columns and "algorithm" in frame.columns:
            loss = frame["loss"].to_numpy(dtype=float, na_value=np.nan)
            bad = ~np.isfinite(loss) & frame["algorithm"].map(searched).to_numpy(dtype=bool)
            if bad.any():
                row = int(bad.nonzero()[0][0])
                raise InputError(f"{path}: row {row}: loss is {loss[row]}: {_LOSS_REQUIRED}")
    for column in schema.flags:
        if not is_bool_dtype(frame[column]):
            raise InputError(f"{path}: column {column} holds {frame[column].dtype} values, not true/false")


def check_twin(csv_path: Path, parquet_path: Path, frame) -> None:
    """The CSV a person reads and the Parquet the render reads must say the same: ``write_aggregate``
    writes both from one frame, so the CSV must be exactly that frame's CSV text. A truncated or
    hand-edited twin is an error naming both files (a missing CSV is not: the Parquet is the source)."""
    if not csv_path.exists():
        return
    if csv_path.read_text(encoding="utf-8") != frame.to_csv(index=False):
        raise InputError(
            f"{csv_path}: differs from its twin {parquet_path.name}, from which it was written (truncated or "
            "edited by hand?); run `depthprune aggregate` (snakemake aggregate) again to rewrite both"
        )


def check_table_files(folder: str | Path, name: str, schema: TableSchema) -> None:
    """Validate ``<name>.parquet`` (with its twin) or, without it, ``<name>.csv``, where either exists:
    a table a reader does not need is still refused when broken (issue 55: a truncated aggregate
    metrics.csv passed the render, which reads only the selections and the summary)."""
    folder = Path(folder)
    parquet, text = folder / f"{name}.parquet", folder / f"{name}.csv"
    if parquet.is_file():
        read_parquet(parquet, schema)
    elif text.is_file():
        check_csv(text, schema)


# --------------------------------------------------------------------------- rendered tables


def read_report_rows(path: str | Path) -> list[dict[str, str]]:
    """The rows (text) of a rendered table under figures/**/tables/, checked by ``check_csv`` against
    its declaration in ``REPORT_TABLE_SCHEMAS`` (a table not declared there: complete rows only)."""
    path = Path(path)
    schema = REPORT_TABLE_SCHEMAS.get(path.stem, TableSchema(f"rendered {path.name}", ()))
    return check_csv(path, schema)


# --------------------------------------------------------------------------- JSON

SELECTION_REQUIRED = (*RUN_KEY_COLUMNS, "removed", "n_layers")
SELECTION_TEXT = ("model", "calibration", "algorithm")
SELECTION_INTEGERS = ("budget", "n_layers")
# Fields that are a number or null (null: not measured, e.g. a perplexity search's accuracy).
SELECTION_NUMBERS = (*SEARCH_RECORD_NUMBERS, "seed", "calibration_tokens")


def read_selection_json(path: str | Path, required: tuple[str, ...] = SELECTION_REQUIRED) -> dict[str, Any]:
    """A search's selection.json (search/runner.py): an object with the ``required`` fields (the
    aggregate needs the run's labels and depth; `evaluate` only the removed blocks), its removed
    blocks as a list of integers (or their text "3 5 7"), labels as text, integer budget and depth,
    and numbers (or null) where numbers are recorded."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: selection.json must hold a JSON object")
    missing = [k for k in required if k not in data]
    if missing:
        raise InputError(f"{path}: selection.json lacks {', '.join(missing)}")
    for key in (k for k in SELECTION_TEXT if data.get(k) is not None):
        if not isinstance(data[key], str) or not data[key]:
            raise InputError(f"{path}: selection.json {key!r} must be a non-empty string, got {data[key]!r}")
    for key in (k for k in SELECTION_INTEGERS if data.get(k) is not None):
        if not _is_integer(data[key]):
            raise InputError(f"{path}: selection.json {key!r} must be an integer, got {data[key]!r}")
    removed = data.get("removed", [])
    if not (isinstance(removed, str) or (isinstance(removed, list) and all(_is_integer(i) for i in removed))):
        raise InputError(f"{path}: selection.json 'removed' must be a list of block indices, got {removed!r}")
    for key in SELECTION_NUMBERS:
        value = data.get(key)
        if value is not None and not (_is_json_number(value) and math.isfinite(value)):
            raise InputError(
                f"{path}: selection.json {key!r} must be a finite number or null (not measured), got {value!r}"
            )
    if "algorithm" in required and searched(data.get("algorithm")) and data.get("loss") is None:
        raise InputError(f"{path}: selection.json 'loss' is missing or null: {_LOSS_REQUIRED}")
    for key in ("heldout", "hyperparameters"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise InputError(f"{path}: selection.json {key!r} must be an object")
    return data


def read_prior_json(path: str | Path) -> dict[str, Any]:
    """A prior.json (`depthprune prior`): an object whose "scores" hold one number (null for a
    protected block) per block, as many as its "n_layers" where that is recorded."""
    prior = read_json(path)
    if not isinstance(prior, dict):
        raise InputError(f"{path}: prior.json must hold a JSON object")
    if "scores" not in prior:
        raise InputError(f'{path}: no "scores" field (expected the output of `depthprune prior`)')
    scores = prior["scores"]
    if not isinstance(scores, list) or not all(s is None or _is_json_number(s) for s in scores):
        raise InputError(f'{path}: "scores" must be a list of numbers (null for a protected block)')
    n_layers = prior.get("n_layers")
    if n_layers is not None and (not _is_integer(n_layers) or len(scores) != n_layers):
        raise InputError(f'{path}: {len(scores)} "scores" for "n_layers" {n_layers!r} (cut off or edited?)')
    return prior


def read_evaluation_record(path: str | Path) -> dict[str, Any]:
    """An evaluation's lm_eval.json (`depthprune evaluate --out-raw`): an object whose "depthprune"
    section, where present, is an object."""
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise InputError(f"{path}: lm_eval.json must hold a JSON object")
    if not isinstance(raw.get("depthprune", {}), dict):
        raise InputError(f'{path}: lm_eval.json "depthprune" must be an object')
    return raw


def evaluated_benchmarks(raw: Mapping[str, Any]) -> dict[str, str | None]:
    """benchmark -> headline metric of every benchmark an evaluation's settings named (its
    lm_eval.json "depthprune" section: the headline choice per benchmark, else the evaluation-cache
    key's benchmark list, headline unknown); {} when neither is recorded."""
    section = raw.get("depthprune") or {}
    headline = section.get("headline")
    if isinstance(headline, dict) and headline:
        return {str(b): (str(m) if m is not None else None) for b, m in headline.items()}
    settings = (section.get("key") or {}).get("settings") or {}
    return dict.fromkeys(map(str, settings.get("benchmarks") or ()))


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_json_number(value: Any) -> bool:
    """An int or float (JSON's NaN and Infinity are floats: the readers refuse them where a result must be finite)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)

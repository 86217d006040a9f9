"""Amend a committed study without recomputing it: rename an algorithm whose registry name now
points at other code, and add the runs of one more algorithm to its aggregate.

Both serve the case issue 67 made real: the second-order expansion that ran as ``cbo`` is registered
as ``cbo_taylor``, and ``cbo`` is now Jansen et al.'s Fisher energy. A committed row must carry the
name of the code that computed it (``relabel_aggregate``, ``relabel_runs``), and the new ``cbo`` joins
each study as runs of its own (``add_runs``) while every other row, the dense model's included, stays
the committed computation.

``add_runs`` takes the added runs only where they are comparable with the committed ones, as
``base_study`` does (docs/method.md §9): the same precision, depth and search space, and a dense
evaluation of their own that agrees with the committed one document by document. It refuses a run
the study already holds and a run of a (model, calibration, seed, M) the study does not have.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from depthprune.errors import InputError
from depthprune.io import atomic_write_json, atomic_write_parquet, atomic_write_text
from depthprune.paths import search_file_globs
from depthprune.reporting.aggregate import (
    AGGREGATE_TABLES,
    DENSE_ALGORITHM,
    PROTECTED_COLUMN,
    RUN_KEY,
    SAMPLES,
    Aggregate,
    build_summary,
    concat_runs,
    load_aggregate,
    load_samples,
)
from depthprune.reporting.base_study import check_same, dense_agreement
from depthprune.results_schema import read_evaluation_record, read_selection_json

log = logging.getLogger(__name__)

RELABEL_RECORD = "relabelled.json"  # {old name: new name} of every relabelling of the aggregate
ADDED_RUNS_RECORD = "added_runs.json"  # one entry per add_runs: what joined and how the dense model agreed
ADDED = "the added runs"  # names them in concat_runs' error
CELL = ["model", "calibration", "budget", "seed"]


# --------------------------------------------------------------------------- relabel


def relabel_aggregate(aggregate_dir: str | Path, old: str, new: str) -> tuple[Aggregate, pd.DataFrame, int]:
    """The committed aggregate (and per-document scores) with algorithm ``old`` named ``new``, and the
    number of its runs renamed. Rows keep their values and their order within a run; the tables are
    re-sorted as the aggregate sorts them. Refuses an aggregate with no ``old`` run, or one that
    already holds ``new`` (two codes under one name)."""
    where = f"{aggregate_dir}"
    _check_names(old, new)
    agg = load_aggregate(aggregate_dir)
    samples = load_samples(aggregate_dir)
    if samples is None:
        samples = pd.DataFrame(columns=RUN_KEY)
    present = set(agg.selections["algorithm"]) | set(agg.metrics["algorithm"])
    if old not in present:
        raise InputError(f"{where}: holds no {old} runs to relabel")
    if new in present or new in set(samples.get("algorithm", ())):
        raise InputError(f"{where}: already holds {new} runs; relabelling {old} would put two codes under one name")
    renamed = int((agg.selections["algorithm"] == old).sum())
    tables = {name: _renamed(getattr(agg, name), old, new) for name in AGGREGATE_TABLES}
    return Aggregate(**tables), _renamed(samples, old, new), renamed


def write_relabelled(agg: Aggregate, samples: pd.DataFrame, out_dir: str | Path, old: str, new: str) -> None:
    """Write the relabelled aggregate into ``out_dir`` (every file apart, then moved in) with its
    record of names (``relabelled.json``, merged with an earlier one)."""
    from depthprune.io import atomic_files
    from depthprune.reporting.aggregate import write_aggregate, write_samples

    record_path = Path(out_dir) / RELABEL_RECORD
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    record[old] = new
    with atomic_files(out_dir) as staging:
        write_aggregate(agg, staging)
        write_samples(samples, staging)
        atomic_write_json(staging / RELABEL_RECORD, record)


def relabel_runs(runs_dir: str | Path, old: str, new: str) -> list[Path]:
    """Rename algorithm ``old`` to ``new`` in a study's committed run files (the ``runs/`` layout of
    scripts/commit_seed_runs.sh): each search folder ``.../old`` becomes ``.../new`` and the algorithm
    recorded in its selection.json, metrics.csv, samples.parquet and lm_eval.json is renamed; every
    other byte is kept. Returns the new folders. Nothing is moved unless every folder can be."""
    _check_names(old, new)
    root = Path(runs_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: runs folder not found")
    folders = sorted({path.parent for pattern in search_file_globs("selection.json") for path in root.glob(pattern)})
    folders = [folder for folder in folders if folder.name == old]
    if not folders:
        raise InputError(f"{root}: holds no {old} runs to relabel")
    clash = [folder.with_name(new) for folder in folders if folder.with_name(new).exists()]
    if clash:
        raise InputError(f"{clash[0]}: already exists; relabelling {old} would put two codes under one name")
    for folder in folders:  # read and check everything before the first write
        _check_recorded_algorithm(folder, old)
    moved = []
    for folder in folders:
        _rename_in_run(folder, old, new)
        target = folder.with_name(new)
        folder.rename(target)
        moved.append(target)
    log.info("relabelled %d %s runs under %s as %s", len(moved), old, root, new)
    return moved


def _check_names(old: str, new: str) -> None:
    if old == new:
        raise InputError(f"--from and --to are both {old!r}")
    if DENSE_ALGORITHM in (old, new):
        raise InputError(f"the dense model ({DENSE_ALGORITHM!r}) is not an algorithm to relabel")


def _renamed(frame: pd.DataFrame, old: str, new: str) -> pd.DataFrame:
    if frame.empty or "algorithm" not in frame:
        return frame
    out = frame.copy()
    out.loc[out["algorithm"] == old, "algorithm"] = new
    keys = [k for k in RUN_KEY if k in out.columns]
    return out.sort_values(keys, kind="stable").reset_index(drop=True)


def _check_recorded_algorithm(folder: Path, old: str) -> None:
    selection = read_selection_json(folder / "selection.json")
    if selection["algorithm"] != old:
        raise InputError(f"{folder / 'selection.json'}: records algorithm {selection['algorithm']!r}, not {old!r}")


def _rename_in_run(folder: Path, old: str, new: str) -> None:
    selection_path = folder / "selection.json"
    selection = read_selection_json(selection_path)
    selection["algorithm"] = new
    atomic_write_json(selection_path, selection)
    metrics_path = folder / "metrics.csv"
    if metrics_path.is_file():
        atomic_write_text(metrics_path, _csv_renamed(metrics_path.read_text(encoding="utf-8"), old, new))
    samples_path = folder / "samples.parquet"
    if samples_path.is_file():
        samples = pd.read_parquet(samples_path)
        samples.loc[samples["algorithm"] == old, "algorithm"] = new
        atomic_write_parquet(samples_path, samples)
    raw_path = folder / "lm_eval.json"
    if raw_path.is_file():
        raw = read_evaluation_record(raw_path)
        section = raw.get("depthprune", {})
        if section.get("algorithm") == old:
            section["algorithm"] = new
            atomic_write_json(raw_path, raw)


def _csv_renamed(text: str, old: str, new: str) -> str:
    """The CSV text with ``old`` replaced in its algorithm column only, every other field as written."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or "algorithm" not in rows[0]:
        return text
    column = rows[0].index("algorithm")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(rows[0])
    for row in rows[1:]:
        if len(row) > column and row[column] == old:
            row[column] = new
        writer.writerow(row)
    return out.getvalue()


# --------------------------------------------------------------------------- add runs


@dataclass(frozen=True)
class AddedRuns:
    """What ``add_runs`` added and how the added runs' dense evaluation agrees with the study's."""

    algorithms: tuple[str, ...]
    runs: int
    sources: tuple[str, ...]
    answered_documents: int
    answers_differ: int
    perplexity_units: int
    max_perplexity_rel_diff: float


def add_runs(
    aggregate_dir: str | Path, added: Aggregate, added_samples: pd.DataFrame
) -> tuple[Aggregate, pd.DataFrame, AddedRuns]:
    """The committed aggregate of ``aggregate_dir`` with the searched runs of ``added`` (built by
    ``aggregate`` from their files) joined: every committed row is kept as it is, the dense model's
    included; the added runs' own dense evaluation is only compared with it (refused beyond
    base_study's tolerances) and dropped. Raises InputError naming the folder when the runs are
    not comparable, not new, or of a cell the study does not have."""
    aggregate_dir = Path(aggregate_dir)
    where = f"add-runs --aggregate {aggregate_dir}"
    study = load_aggregate(aggregate_dir)
    study_samples = load_samples(aggregate_dir)
    if study_samples is None:
        raise FileNotFoundError(
            f"{aggregate_dir / (SAMPLES + '.parquet')}: the study's per-document scores are missing"
        )
    searched = added.selections[added.selections["algorithm"] != DENSE_ALGORITHM]
    if searched.empty:
        raise InputError(f"{where}: the added files hold no searched run")
    cells = study.selections[CELL].drop_duplicates()
    outside = searched[CELL].merge(cells, how="left", indicator=True)
    outside = outside[outside["_merge"] == "left_only"]
    if not outside.empty:
        row = outside.iloc[0]
        raise InputError(
            f"{where}: the study has no {row['model']} {row['calibration']} seed {row['seed']} M={row['budget']} runs "
            "to add to (add-runs adds algorithms to a study's cells, not cells)"
        )
    check_same(searched, study.selections, "dtype", where)
    check_same(searched, study.selections, "n_layers", where)
    if PROTECTED_COLUMN in searched or PROTECTED_COLUMN in study.selections:
        check_same(searched, study.selections, PROTECTED_COLUMN, where)
    models = sorted(set(searched["model"]))
    seeds = sorted(int(s) for s in set(study_samples["seed"])) if "seed" in study_samples else [0]
    added_seeds = sorted(int(s) for s in set(added_samples.get("seed", pd.Series([0]))))
    # the study's dense rows of the added runs' seed where it has them (one evaluation, repeated per seed)
    study_seed = added_seeds[0] if added_seeds[0] in seeds else seeds[0]
    calibrations = tuple(sorted(set(searched["calibration"])))
    agreement = dense_agreement(
        added_samples, study_samples, models, added_seeds, [study_seed], aggregate_dir, calibrations
    )
    runs = searched[RUN_KEY]
    metrics = added.metrics.merge(runs, on=RUN_KEY)
    samples = added_samples.merge(runs, on=RUN_KEY)
    selections = concat_runs(study.selections, searched, RUN_KEY, ADDED)
    metrics = concat_runs(study.metrics, metrics, RUN_KEY + ["benchmark", "metric"], ADDED)
    samples = concat_runs(study_samples, samples, RUN_KEY + ["benchmark", "unit", "metric"], ADDED)
    summary = build_summary(selections, metrics)
    record = AddedRuns(
        algorithms=tuple(sorted(set(searched["algorithm"]))),
        runs=len(searched),
        sources=tuple(sorted(searched["source"].astype(str))),
        answered_documents=agreement.answered_documents,
        answers_differ=agreement.answers_differ,
        perplexity_units=agreement.perplexity_units,
        max_perplexity_rel_diff=agreement.max_perplexity_rel_diff,
    )
    log.info(
        "%s: %d runs of %s added; their dense answers differ on %d of %d documents, largest perplexity "
        "difference %.2e (relative)",
        where,
        record.runs,
        ", ".join(record.algorithms),
        record.answers_differ,
        record.answered_documents,
        record.max_perplexity_rel_diff,
    )
    return Aggregate(selections=selections, metrics=metrics, summary=summary), samples, record


def write_added(
    agg: Aggregate, samples: pd.DataFrame, record: AddedRuns, aggregate_dir: str | Path, out_dir: str | Path
) -> list[Path]:
    """Write the amended aggregate into ``out_dir`` (every file apart, then moved in), with the
    study's ``added_runs.json`` (its earlier entries, then this one)."""
    from depthprune.io import atomic_files
    from depthprune.reporting.aggregate import write_aggregate, write_samples

    earlier_path = Path(aggregate_dir) / ADDED_RUNS_RECORD
    entries = json.loads(earlier_path.read_text()) if earlier_path.is_file() else []
    entries.append(asdict(record))
    with atomic_files(out_dir) as staging:
        written = write_aggregate(agg, staging)
        written.append(write_samples(samples, staging))
        atomic_write_json(staging / ADDED_RUNS_RECORD, entries)
        written.append(Path(out_dir) / ADDED_RUNS_RECORD)
    return written

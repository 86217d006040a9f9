"""Evaluation-only studies and the random-set control (docs/method.md §11).

An evaluation-only study (config ``source_study``) re-scores the removed sets of a study already run
under its own evaluation settings (more documents, other tasks), without repeating a search: the
searches do not depend on the evaluation. Each set comes from the source study's ``selection.json``
(``source_study.runs``, in the results layout ``<model>/<calibration>/seed<k>/M<M>/<algorithm>/``) or,
for runs whose folders were not kept, from a row of its aggregate's ``selections.csv``
(``source_study.aggregate``); ``depthprune source-selection`` copies it into the study's own results
folder, recording where it came from, and the evaluation, aggregate and render run as in any study.

The random-set control (config ``random_sets``) evaluates, per model, seed and M, ``count`` distinct
M-sets drawn uniformly from the blocks the barrier allows (``protected_layers``, ``protect``), with
the config's ``random_sets.seed``: how much of a search's accuracy a set without any search reaches.
Each draw is written like a search's ``selection.json`` under calibration ``none`` (no calibration,
as the dense model) and algorithm ``random_set_<i>``; the render counts them as controls, never in
the statistics behind the paper's claims.

Light on purpose (the workflow's plan-time checks import it): the standard library and the package's
path and budget helpers only; NumPy is imported by the draw.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path

from depthprune.errors import InputError
from depthprune.io import parse_layers, read_json
from depthprune.paths import search_parts

# Random sets have no calibration: the label the dense model has (reporting/aggregate.py DENSE_CALIBRATION).
RANDOM_SET_CALIBRATION = "none"
RANDOM_SET_PREFIX = "random_set_"
RANDOM_SET_PATTERN = re.compile(r"^random_set_\d+$")
AGGREGATE_SELECTIONS = "selections.csv"  # the aggregate table a source study's sets are read from


# --------------------------------------------------------------------------- random-set control


def random_set_names(count: int) -> list[str]:
    """Algorithm labels of the draws, ``random_set_00`` ... (zero-padded: they sort in draw order)."""
    width = max(2, len(str(count - 1)))
    return [f"{RANDOM_SET_PREFIX}{index:0{width}d}" for index in range(count)]


def is_random_set(algorithm: str) -> bool:
    return bool(RANDOM_SET_PATTERN.match(str(algorithm)))


def allowed_blocks(n_layers: int, protected: Sequence[int]) -> list[int]:
    """The blocks a set may remove: all but the protected ones (the searches' space)."""
    kept = set(protected)
    return [block for block in range(n_layers) if block not in kept]


def draw_random_sets(allowed: Sequence[int], budget: int, count: int, seed: int, study_seed: int) -> list[tuple]:
    """``count`` distinct ``budget``-sets of ``allowed``, each uniform over all C(|allowed|, budget)
    subsets (a uniform subset, redrawn when it repeats an earlier one: the distinct draws are then a
    uniform sample without replacement). Reproducible: the generator is seeded with (``seed``,
    ``study_seed``, ``budget``), so each study seed and M has its own stream."""
    import numpy as np

    allowed = sorted(int(block) for block in allowed)
    if not 1 <= budget < len(allowed):
        raise InputError(f"random_sets: M={budget} must be at least 1 and below the {len(allowed)} allowed blocks")
    total = math.comb(len(allowed), budget)
    if count > total:
        raise InputError(
            f"random_sets.count {count}: only C({len(allowed)}, {budget}) = {total} distinct sets of M={budget}"
        )
    rng = np.random.default_rng([int(seed), int(study_seed), int(budget)])
    drawn: list[tuple] = []
    seen: set[tuple] = set()
    while len(drawn) < count:
        subset = tuple(sorted(int(b) for b in rng.choice(allowed, size=budget, replace=False)))
        if subset not in seen:
            seen.add(subset)
            drawn.append(subset)
    return drawn


def random_set_selection(
    model: str, n_layers: int, protected: Sequence[int], budget: int, index: int, count: int, removed, seed, study_seed
) -> dict:
    """One draw as a search's selection.json: the fields the aggregate reads, no search cost."""
    return {
        "model": model,
        "calibration": RANDOM_SET_CALIBRATION,
        "budget": int(budget),
        "algorithm": random_set_names(count)[index],
        "removed": list(parse_layers(removed)),
        "n_layers": int(n_layers),
        "seed": int(study_seed),
        "hyperparameters": {"count": int(count), "seed": int(seed)},
        "random_set": {"index": index, "seed": int(seed), "allowed": allowed_blocks(n_layers, protected)},
    }


# --------------------------------------------------------------------------- source study


@functools.cache
def _aggregate_rows(path: str, mtime_ns: int) -> dict[tuple, dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in ("model", "calibration", "seed", "budget", "algorithm", "removed", "n_layers")
                   if c not in (reader.fieldnames or ())]  # fmt: skip
        if missing:
            raise InputError(f"{path}: not an aggregate selections table (lacks {', '.join(missing)})")
        return {
            (row["model"], row["calibration"], int(float(row["seed"] or 0)), int(row["budget"]), row["algorithm"]): row
            for row in reader
        }


def aggregate_rows(aggregate_dir: str | os.PathLike) -> dict[tuple, dict]:
    """(model, calibration, seed, M, algorithm) -> row of an aggregate's selections.csv (read once per
    process while the file is unchanged)."""
    path = Path(aggregate_dir, AGGREGATE_SELECTIONS)
    if not path.is_file():
        raise FileNotFoundError(f"source_study.aggregate {aggregate_dir}: no {AGGREGATE_SELECTIONS} there")
    return _aggregate_rows(str(path), path.stat().st_mtime_ns)


def source_file(source: dict, model: str, calibration: str, seed, budget, algorithm: str) -> str | None:
    """The file a run's set is read from: its selection.json under ``source.runs``, else the
    aggregate's selections.csv when that holds the run; None when neither has it."""
    runs = source.get("runs")
    if runs:
        path = os.path.join(runs, *search_parts(model, calibration, seed, budget, algorithm), "selection.json")
        if os.path.isfile(path):
            return path
    aggregate = source.get("aggregate")
    if aggregate and (model, calibration, int(seed), int(budget), algorithm) in aggregate_rows(aggregate):
        return os.path.join(aggregate, AGGREGATE_SELECTIONS)
    return None


def selection_from_source(path: str, model: str, calibration: str, seed: int, budget: int, algorithm: str) -> dict:
    """The run's selection.json content, from a selection.json (labels checked) or an aggregate row,
    with ``source_study`` naming where it came from."""
    labels = {"model": model, "calibration": calibration, "budget": int(budget), "algorithm": algorithm}
    if Path(path).name == AGGREGATE_SELECTIONS:
        row = aggregate_rows(Path(path).parent).get((model, calibration, int(seed), int(budget), algorithm))
        if row is None:
            raise InputError(
                f"{path}: no row for model={model} calibration={calibration} seed={seed} M={budget} "
                f"algorithm={algorithm}"
            )
        selection = {**labels, "removed": list(parse_layers(row["removed"])), "n_layers": int(row["n_layers"])}
        for column in ("loss", "calibration_perplexity", "calibration_accuracy", "search_seconds", "prior_seconds"):
            selection[column] = _number(row.get(column))
        for column in ("distinct_evaluations", "memo_hits", "blocks_run", "calibration_tokens"):
            value = _number(row.get(column))
            selection[column] = None if value is None else int(value)
        selection["seed"] = int(seed)
        selection["dtype"] = row.get("dtype") or None
        selection["hyperparameters"] = json.loads(row.get("hyperparameters") or "{}")
        if _number(row.get("heldout_loss")) is not None:
            selection["heldout"] = {
                "loss": _number(row.get("heldout_loss")),
                "accuracy": _number(row.get("heldout_accuracy")),
                "n_samples": int(_number(row.get("heldout_samples")) or 0) or None,
            }
        selection["source_study"] = {"aggregate": path, "row_source": row.get("source")}
        return selection
    if Path(path).suffix.lower() != ".json":
        raise InputError(
            f"--from {path}: neither a selection.json nor an aggregate's {AGGREGATE_SELECTIONS}; pass one of "
            f"those (another table of the aggregate does not hold the sets)"
        )
    selection = read_json(path)
    if not isinstance(selection, dict) or "removed" not in selection:
        raise InputError(f"{path}: not a selection.json (no 'removed' field)")
    found = {key: selection.get(key) for key in labels}
    found["budget"] = None if found["budget"] is None else int(found["budget"])
    if found != labels or int(selection.get("seed", seed)) != int(seed):
        raise InputError(
            f"{path}: labels {found} seed {selection.get('seed')} differ from the run's {labels} seed {seed}"
        )
    return {**selection, "source_study": {"selection": path}}


def _number(text):
    if text is None or str(text).strip() == "":
        return None
    value = float(text)
    return None if math.isnan(value) else value

"""The aggregate refuses inputs of mixed provenance: another dtype, scoring code or torch.

A study rerun in part after a ``SCORING_VERSION`` bump, a torch upgrade or a dtype change would
otherwise put numbers of two computations side by side in one table without a word (issue 37).
Each input records its provenance: ``selection.json`` its ``dtype``, ``scoring_version`` and
``versions`` (``io.package_versions``); an evaluation's ``lm_eval.json`` (next to its metrics.csv)
its ``depthprune.dtype`` and the evaluation-cache key's model identity and versions. A field an
input does not record (written before it was recorded) is "not recorded", which differs from any
recorded value: such inputs are as unknown as they are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from depthprune.errors import InputError
from depthprune.results_schema import read_evaluation_record, read_selection_json

FIELDS = ("dtype", "scoring_version", "torch")
RAW_EVALUATION = "lm_eval.json"  # written by `depthprune evaluate --out-raw` next to metrics.csv
NOT_RECORDED = "not recorded"
SHOWN_FILES = 3  # files named per value in the error


def selection_provenance(data: dict) -> dict:
    """dtype, scoring_version and torch version of a selection.json's search."""
    return {
        "dtype": data.get("dtype"),
        "scoring_version": data.get("scoring_version"),
        "torch": (data.get("versions") or {}).get("torch"),
    }


def evaluation_provenance(raw: dict) -> dict:
    """The same of an evaluation, from its lm_eval.json (the cache key records what computed it)."""
    section = raw.get("depthprune") or {}
    key = section.get("key") or {}
    model = key.get("model") or {}
    return {
        "dtype": section.get("dtype", model.get("dtype")),
        "scoring_version": model.get("scoring_version"),
        "torch": (key.get("versions") or {}).get("torch"),
    }


def searched_here(data: dict) -> bool:
    """Whether a selection.json records a search of this study: not a set an evaluation-only study
    took from another study (``source_study``, whose aggregate checked its searches) nor a draw of
    the random-set control (``random_set``, no computation); evaluation_only.py writes both."""
    return "source_study" not in data and "random_set" not in data


def input_provenance(selection_files: Sequence[str | Path], metrics_files: Sequence[str | Path]) -> dict[str, dict]:
    """file -> provenance of every selection.json of a search run here and of every metrics.csv whose
    lm_eval.json is beside it."""
    found = {}
    for path in selection_files:
        data = read_selection_json(path)
        if not isinstance(data, dict) or searched_here(data):
            found[str(path)] = selection_provenance(data if isinstance(data, dict) else {})
    for path in metrics_files:
        raw = Path(path).with_name(RAW_EVALUATION)
        if raw.is_file():
            found[str(raw)] = evaluation_provenance(read_evaluation_record(raw))
    return found


def check_provenance(selection_files: Sequence[str | Path], metrics_files: Sequence[str | Path]) -> None:
    """Raise ValueError naming the files if the inputs differ in dtype, scoring version or torch."""
    found = input_provenance(selection_files, metrics_files)
    for field in FIELDS:
        groups: dict[str, list[str]] = {}
        for path, provenance in found.items():
            value = provenance[field]
            groups.setdefault(NOT_RECORDED if value is None else str(value), []).append(path)
        if len(groups) > 1:
            raise InputError(
                f"inputs of mixed provenance ({describe_groups(groups, f'{field}=')}): recompute the stale ones, or aggregate "
                "each computation apart"
            )
    check_evaluation_settings(metrics_files)


def evaluation_settings(raw: dict) -> str:
    """The settings an evaluation was scored with (its cache key's ``settings``: tasks, documents
    per task, perplexity windows, ...) as one line of text; "not recorded" where absent."""
    settings = ((raw.get("depthprune") or {}).get("key") or {}).get("settings")
    if not settings:
        return NOT_RECORDED
    return ", ".join(f"{name}={json.dumps(value, sort_keys=True)}" for name, value in sorted(settings.items()))


def describe_groups(groups: dict[str, list[str]], before: str = "", after: str = "") -> str:
    """'VALUE in N file(s): a, b and 3 more; ...' for the errors naming files that disagree, the
    largest group first."""
    parts = []
    for value, paths in sorted(groups.items(), key=lambda item: -len(item[1])):
        shown = ", ".join(paths[:SHOWN_FILES]) + (
            f" and {len(paths) - SHOWN_FILES} more" if len(paths) > SHOWN_FILES else ""
        )
        parts.append(f"{before}{value}{after} in {len(paths)} file(s): {shown}")
    return "; ".join(parts)


def check_evaluation_settings(metrics_files: Sequence[str | Path]) -> None:
    """Rows scored under different evaluation settings (another `evaluation.limit`,
    `limit_per_task`, task list, ...) never share a table: InputError naming both settings and files."""
    groups: dict[str, list[str]] = {}
    for path in metrics_files:
        raw = Path(path).with_name(RAW_EVALUATION)
        if raw.is_file():
            groups.setdefault(evaluation_settings(read_evaluation_record(raw)), []).append(str(raw))
    if len(groups) > 1:
        raise InputError(
            f"evaluations scored under different settings ({describe_groups(groups, '[', ']')}): rows from different evaluation "
            "settings are never mixed in one table; re-evaluate the stale ones, or aggregate each setting apart"
        )

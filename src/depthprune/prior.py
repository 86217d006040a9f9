"""The single-layer ablation prior s_i = L({i}) (docs/method.md §3): computed once per (model,
calibration, seed), then read by every search, which refuses a prior computed under other settings."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from depthprune.io import package_versions, parse_layers, read_json
from depthprune.progress import Progress

log = logging.getLogger(__name__)


def compute_prior(evaluator) -> dict:
    """s_i for every layer (protected layers get null), L(∅) and the cost of computing them."""
    check_some_layer_removable(evaluator.n_layers, evaluator.protected)
    started = time.perf_counter()
    before = evaluator.stats.as_dict()
    empty = evaluator.empty_record()
    layers = [i for i in range(evaluator.n_layers) if i not in evaluator.protected]
    previous = getattr(evaluator, "progress", None)
    evaluator.progress = Progress("prior", total=len(layers))
    try:
        records = {r.removed[0]: r for r in evaluator.evaluate([(i,) for i in layers])}
    finally:
        evaluator.progress = previous
    after = evaluator.stats.as_dict()
    is_tlm = evaluator.objective_kind == "tlm"
    scores = [records[i].loss if i in records else None for i in range(evaluator.n_layers)]
    return {
        "model": evaluator.loaded.name,
        "model_spec": evaluator.loaded.spec,
        "calibration": evaluator.calibration,
        "objective": evaluator.objective_kind,
        "n_layers": evaluator.n_layers,
        "scores": scores,
        "empty_loss": empty.loss,
        "metric_name": "calibration_accuracy" if is_tlm else "calibration_perplexity",
        "empty_metric": empty.accuracy if is_tlm else math.exp(empty.loss),
        "accuracies": [records[i].accuracy if i in records else None for i in range(evaluator.n_layers)]
        if is_tlm
        else None,
        "empty_accuracy": empty.accuracy,
        "ranking": sorted(layers, key=lambda i: scores[i]),  # most redundant first
        "cost": {
            "evaluations": len(layers) + 1,
            "blocks_run": after["blocks_run"] - before["blocks_run"] + empty.blocks_run,
            "seconds": time.perf_counter() - started + empty.seconds,
        },
        "dtype": evaluator.describe()["dtype"],  # the resolved precision (dtype: auto)
        "calibration_tokens": evaluator.describe().get("calibration_tokens"),
        "evaluator": evaluator.describe(),
        "seed": evaluator.settings.get("seed"),
        "versions": package_versions(),
    }


def check_some_layer_removable(n_layers: int, protected) -> None:
    """A prior of a model whose every layer is protected would be an empty ranking: refuse it."""
    if n_layers > 0 and set(range(n_layers)) <= {int(p) for p in protected}:
        raise ValueError(
            f"protected_layers (option --protected) protect all {n_layers} layers: no layer is left to score or remove"
        )


def load_prior(path: str | Path, calibration: str) -> dict[str, Any]:
    prior = read_json(path)
    if "scores" not in prior:
        raise ValueError(f'{path}: no "scores" field (expected the output of `depthprune prior`)')
    if prior.get("calibration") not in (None, calibration):
        raise ValueError(
            f"{path}: prior computed for calibration {prior['calibration']!r}, search asks for {calibration!r}"
        )
    return prior


def check_prior(path: str | Path, prior: dict[str, Any], expected: dict[str, Any]) -> None:
    """Refuse a prior computed under other settings than the search's own, naming the field."""
    recorded = prior.get("evaluator") or {}
    for field, want in expected.items():
        if field not in recorded:
            raise ValueError(
                f"{path}: the prior does not record {field!r} (written by an older depthprune); "
                "recompute it with `depthprune prior`"
            )
        have = recorded[field]
        if field == "protected":
            have = list(parse_layers(have))
        if have != want:
            raise ValueError(
                f"{path}: prior computed with {field}={have!r}, this search uses {field}={want!r}; "
                "recompute the prior with the search's settings"
            )

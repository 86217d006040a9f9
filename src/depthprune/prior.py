"""The single-layer ablation prior s_i = L({i}) (docs/method.md §3): computed once per (model,
calibration, seed), then read by every search, which refuses a prior computed under other settings."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from depthprune.calibration.variants import parse_label
from depthprune.errors import InputError
from depthprune.io import package_versions, parse_layers
from depthprune.progress import Progress
from depthprune.results_schema import read_prior_json

log = logging.getLogger(__name__)


def compute_prior(evaluator, keep_items: bool = False) -> dict:
    """s_i for every layer (protected layers get null), L(∅) and the cost of computing them.
    ``keep_items`` (TLM): also every score item by item (``items``), from which ``derive_prior``
    gives the prior of any draw nested in this one; losses the memo holds are computed again (it
    keeps totals only)."""
    if keep_items and evaluator.objective_kind != "tlm":
        raise InputError("--keep-items: only a TLM prior has items (its calibration is a perplexity one)")
    check_some_layer_removable(evaluator.n_layers, evaluator.protected)
    started = time.perf_counter()
    before = evaluator.stats.as_dict()
    empty = evaluator.empty_record()
    layers = [i for i in range(evaluator.n_layers) if i not in evaluator.protected]
    previous = getattr(evaluator, "progress", None)
    evaluator.progress = Progress("prior", total=len(layers))
    try:
        records = {r.removed[0]: r for r in evaluator.evaluate([(i,) for i in layers])}
        from_memo = [(i,) for i in layers if records[i].items is None] if keep_items else []
        if from_memo:
            log.info(
                "prior: %d single-layer losses came from the memo; computing them again for their items", len(from_memo)
            )
            records.update({r.removed[0]: r for r in evaluator.recompute(from_memo)})
    finally:
        evaluator.progress = previous
    after = evaluator.stats.as_dict()
    prior = _prior_document(
        evaluator,
        scores=[records[i].loss if i in records else None for i in range(evaluator.n_layers)],
        accuracies=[records[i].accuracy if i in records else None for i in range(evaluator.n_layers)],
        empty_loss=empty.loss,
        empty_accuracy=empty.accuracy,
        cost={
            "evaluations": len(layers) + 1,
            "blocks_run": after["blocks_run"] - before["blocks_run"] + empty.blocks_run,
            "seconds": time.perf_counter() - started + empty.seconds,
        },
    )
    if keep_items:
        prior["items"] = {
            "keys": list(evaluator.objective.item_keys),
            "empty": _item_lists(empty.items),
            "layers": [_item_lists(records[i].items) if i in records else None for i in range(evaluator.n_layers)],
        }
    return prior


# The fields of an evaluator's description that a nested draw changes (describe() in engine/evaluator.py)
_SIZE_FIELDS = frozenset({"data_hash", "calibration_tokens", "n_samples"})


def _comparable(field: str, value):
    if field == "calibration" and value is not None:  # the label names the size: compare the calibrations
        return parse_label(value).base
    return list(value) if isinstance(value, tuple) else value


def derive_prior(evaluator, source: dict, source_path: str | Path) -> dict:
    """The prior of ``evaluator``'s TLM draw from ``source``, the prior of a larger draw that begins
    with the same items (the draws of one seed are nested: docs/method.md §3): each s_i and L(∅) is
    the mean of the first n items' losses, no block is run. Refused unless every item and every
    other setting is the same; the directly computed L(∅) (the evaluator's capture pass) must agree."""
    started = time.perf_counter()
    where = f"--items-from {source_path}"
    if evaluator.objective_kind != "tlm":
        raise InputError(f"{where}: only a TLM prior can be derived from a larger draw's items")
    items = source.get("items")
    if not items:
        raise InputError(
            f"{where}: the prior keeps no per-item losses; compute it with `depthprune prior --keep-items`"
        )
    keys = list(evaluator.objective.item_keys)
    if items["keys"][: len(keys)] != keys:
        raise InputError(
            f"{where}: its {len(items['keys'])} items do not begin with this draw's {len(keys)} "
            "(another seed, data set, format, loss or token cap)"
        )
    mine, theirs = evaluator.describe(), source.get("evaluator") or {}
    differ = sorted(
        k
        for k in set(mine) | set(theirs)
        if k not in _SIZE_FIELDS and _comparable(k, mine.get(k)) != _comparable(k, theirs.get(k))
    )
    if differ:
        raise InputError(f"{where}: computed with other settings ({', '.join(differ)}) than this prior")
    n = len(keys)

    def mean_of(lists):
        return (float(np.mean(lists["losses"][:n])), float(np.mean(lists["correct"][:n]))) if lists else (None, None)

    per_layer = [mean_of(lists) for lists in items["layers"]]
    empty_loss, empty_accuracy = mean_of(items["empty"])
    direct = evaluator.empty_record()
    if not math.isclose(empty_loss, direct.loss, rel_tol=1e-4, abs_tol=1e-4):
        raise InputError(
            f"{where}: L(∅) of the first {n} items is {empty_loss:.6f}, computed directly {direct.loss:.6f}"
        )
    return _prior_document(
        evaluator,
        scores=[loss for loss, _ in per_layer],
        accuracies=[accuracy for _, accuracy in per_layer],
        empty_loss=empty_loss,
        empty_accuracy=empty_accuracy,
        cost={
            "evaluations": 1,  # the capture pass: L(∅) computed directly, as the check above
            "blocks_run": evaluator.n_layers,
            "seconds": time.perf_counter() - started + direct.seconds,
        },
        derived_from={"path": str(source_path), "n_items": len(items["keys"]), "empty_loss_direct": direct.loss},
    )


def _item_lists(scores) -> dict:
    return {"losses": [float(v) for v in scores.losses], "correct": [int(v) for v in scores.correct]}


def check_finite_losses(model_name: str, stage: str, empty_loss, scores) -> None:
    """ValueError naming the model and the stage if L(∅) or a single-layer score is NaN or infinite:
    a broken model (a NaN weight, an overflow) whose losses must not become a prior."""
    bad = [] if empty_loss is not None and math.isfinite(empty_loss) else [f"L(∅)={empty_loss}"]
    bad += [f"s_{i}={v}" for i, v in enumerate(scores) if v is not None and not math.isfinite(v)]
    if bad:
        shown = ", ".join(bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
        raise InputError(
            f"{stage}: model {model_name!r} gives non-finite calibration losses ({shown}): its weights or "
            "computation are broken (NaN/inf); nothing was written"
        )


def _prior_document(evaluator, *, scores, accuracies, empty_loss, empty_accuracy, cost, **extra) -> dict:
    check_finite_losses(evaluator.loaded.name, "prior", empty_loss, scores)
    is_tlm = evaluator.objective_kind == "tlm"
    layers = [i for i in range(evaluator.n_layers) if scores[i] is not None]
    return {
        "model": evaluator.loaded.name,
        "model_spec": evaluator.loaded.spec,
        "calibration": evaluator.calibration,
        "objective": evaluator.objective_kind,
        "n_layers": evaluator.n_layers,
        "scores": scores,
        "empty_loss": empty_loss,
        "metric_name": "calibration_accuracy" if is_tlm else "calibration_perplexity",
        "empty_metric": empty_accuracy if is_tlm else math.exp(empty_loss),
        "accuracies": accuracies if is_tlm else None,
        "empty_accuracy": empty_accuracy,
        "ranking": sorted(layers, key=lambda i: scores[i]),  # most redundant first
        "cost": cost,
        "dtype": evaluator.describe()["dtype"],  # the resolved precision (dtype: auto)
        "calibration_tokens": evaluator.describe().get("calibration_tokens"),
        "evaluator": evaluator.describe(),
        "seed": evaluator.settings.get("seed"),
        "versions": package_versions(),
        **extra,
    }


def check_some_layer_removable(n_layers: int, protected) -> None:
    """A prior of a model whose every layer is protected would be an empty ranking: refuse it."""
    if n_layers > 0 and set(range(n_layers)) <= {int(p) for p in protected}:
        raise InputError(
            f"protected_layers (option --protected) protect all {n_layers} layers: no layer is left to score or remove"
        )


def load_prior(path: str | Path, calibration: str) -> dict[str, Any]:
    prior = read_prior_json(path)
    if prior.get("calibration") not in (None, calibration):
        raise InputError(
            f"{path}: prior computed for calibration {prior['calibration']!r}, search asks for {calibration!r}"
        )
    return prior


# Fields of the evaluator record a search does not compare with its prior's: where the rows were read
# (a mirror of the hub's rows gives the same losses; the rows themselves are compared by data_hash
# once the search has read them).
UNCHECKED_FIELDS = ("data_source",)


def check_prior(path: str | Path, prior: dict[str, Any], expected: dict[str, Any]) -> None:
    """Refuse a prior computed under other settings than the search's own, naming the field.

    ``expected``: the evaluator record this search would write (the part known before the model
    loads); compared field by field with the prior's recorded one. A field written only when not at
    its default (calibration/setup.py ``RECORD_DEFAULTS``) has that default where either record omits it."""
    from depthprune.calibration.setup import RECORD_DEFAULTS

    recorded = prior.get("evaluator") or {}
    for field in [*expected, *(f for f in RECORD_DEFAULTS if f not in expected)]:
        if field in UNCHECKED_FIELDS:
            continue
        if field not in recorded and field not in RECORD_DEFAULTS:
            raise InputError(
                f"{path}: the prior does not record {field!r} (written by an older depthprune); "
                "recompute it with `depthprune prior`"
            )
        have = recorded.get(field, RECORD_DEFAULTS.get(field))
        want = expected.get(field, RECORD_DEFAULTS.get(field))
        if field == "protected":
            have = list(parse_layers(have))
        if have != want:
            raise InputError(
                f"{path}: prior computed with {field}={have!r}, this search uses {field}={want!r}; "
                "recompute the prior with the search's settings"
            )

"""The single-layer ablation prior s_i = L({i}) (docs/method.md §3) and ``depthprune prior``."""

from __future__ import annotations

import logging
import math
import time

from depthprune.io import atomic_write_json, package_versions
from depthprune.progress import Progress

log = logging.getLogger(__name__)


def compute_prior(evaluator) -> dict:
    """s_i for every layer (protected layers get null), L(∅) and the cost of computing them."""
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
        "evaluator": evaluator.describe(),
        "seed": evaluator.settings.get("seed"),
        "versions": package_versions(),
    }


def run(args) -> int:
    from depthprune.cli_common import build_evaluator, check_calibration_inputs

    samples = check_calibration_inputs(args)  # bad data or options fail here, before the model load
    evaluator = build_evaluator(args, samples=samples)
    prior = compute_prior(evaluator)
    atomic_write_json(args.out, prior)
    ranking = prior["ranking"]
    log.info(
        "L(empty)=%.5f; most redundant %s; least redundant %s", prior["empty_loss"], ranking[:5], ranking[-5:][::-1]
    )
    print(
        f"wrote {args.out}: L(empty)={prior['empty_loss']:.5f} most redundant={ranking[:5]} least redundant={ranking[-5:][::-1]}"
    )
    return 0


def register(subparsers) -> None:
    from depthprune.cli_common import add_calibration_args, add_evaluator_args, add_model_args

    parser = subparsers.add_parser("prior", help="single-layer ablation prior s_i = L({i}) -> prior.json")
    add_model_args(parser)
    add_calibration_args(parser)
    add_evaluator_args(parser)
    parser.add_argument("--out", required=True, help="prior.json to write")
    parser.set_defaults(func=run)

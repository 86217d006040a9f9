"""``depthprune prior``: parses and calls ``prior.compute_prior`` (docs/method.md §3)."""

from __future__ import annotations

import logging

from depthprune.io import atomic_write_json
from depthprune.prior import compute_prior

log = logging.getLogger(__name__)


def run(args) -> int:
    from depthprune.cli_common import build_evaluator, check_calibration_inputs, model_layers_without_loading
    from depthprune.io import parse_layers
    from depthprune.prior import check_some_layer_removable

    samples = check_calibration_inputs(args)  # bad data or options fail here, before the model load
    n_layers = model_layers_without_loading(args)
    if n_layers is not None:  # else after the load (compute_prior), with what --protect adds
        check_some_layer_removable(n_layers, parse_layers(args.protected))
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

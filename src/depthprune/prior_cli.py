"""``depthprune prior``: parses and calls ``prior.compute_prior`` (docs/method.md §3)."""

from __future__ import annotations

import logging

from depthprune.io import atomic_write_json, read_json
from depthprune.prior import compute_prior, derive_prior

log = logging.getLogger(__name__)


def run(args) -> int:
    from depthprune.cli_common import calibration_setup, evaluator_setup, model_inputs, model_setup
    from depthprune.io import check_inputs_outputs, parse_layers
    from depthprune.prior import check_some_layer_removable

    check_inputs_outputs({**model_inputs(args), "--items-from": args.items_from}, {"--out": args.out})
    model, calibration, engine = model_setup(args), calibration_setup(args), evaluator_setup(args)
    samples = engine.check(model, calibration)  # bad data or options fail here, before the model load
    n_layers = model.layers_without_loading()
    if n_layers is not None:  # else after the load (compute_prior), with what --protect adds
        check_some_layer_removable(n_layers, parse_layers(engine.protected))
    source = read_json(args.items_from) if args.items_from else None  # a missing file fails before the load
    evaluator = engine.build(model, calibration, samples=samples)
    prior = derive_prior(evaluator, source, args.items_from) if source else compute_prior(evaluator, args.keep_items)
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
    parser.add_argument(
        "--items-from",
        metavar="PRIOR_JSON",
        help="TLM: derive this draw's prior from the per-item losses of a larger draw's prior whose items "
        "begin with this draw's (the same seed at a larger --n-samples); no block is run",
    )
    parser.add_argument(
        "--keep-items",
        action="store_true",
        help="TLM: also write every single-layer loss item by item, so that draws nested in this one "
        "(--items-from) get their priors from it",
    )
    parser.add_argument("--out", required=True, help="prior.json to write")
    parser.set_defaults(func=run)

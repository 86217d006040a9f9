"""``depthprune source-selection`` and ``depthprune random-sets``: parse and call evaluation_only.py
(evaluation-only studies and the random-set control, docs/method.md §11)."""

from __future__ import annotations

import argparse

from depthprune.errors import InputError
from depthprune.evaluation_only import (
    allowed_blocks,
    draw_random_sets,
    random_set_selection,
    selection_from_source,
)
from depthprune.io import atomic_write_json, check_inputs_outputs, parse_layers


def register(subparsers) -> None:
    source = subparsers.add_parser(
        "source-selection",
        help="copy one run's removed set from a source study (evaluation-only studies)",
        description="Write a run's selection.json from a source study's selection.json or a row of its "
        "aggregate's selections.csv, recording the source: an evaluation-only study re-scores it.",
    )
    source.add_argument("--from", dest="source", required=True, help="selection.json, or an aggregate's selections.csv")
    for flag in ("--model-name", "--calibration", "--algorithm"):
        source.add_argument(flag, required=True)
    source.add_argument("--seed", type=int, required=True)
    source.add_argument("--budget", type=int, required=True)
    source.add_argument("--out", required=True, help="selection.json to write (atomically)")
    source.set_defaults(func=source_main)

    draw = subparsers.add_parser(
        "random-sets",
        help="draw the random-set control's removed sets of one (model, seed, M)",
        description="Draw --count distinct M-sets uniformly from the blocks not protected, seeded with "
        "(--draw-seed, --seed, --budget); write each as a selection.json (calibration none, algorithm "
        "random_set_<i>).",
    )
    draw.add_argument("--model-name", required=True)
    draw.add_argument("--n-layers", type=int, required=True)
    draw.add_argument("--protected", default="", help='blocks no set removes, e.g. "0 29"')
    draw.add_argument("--budget", type=int, required=True)
    draw.add_argument("--count", type=int, required=True)
    draw.add_argument("--draw-seed", type=int, required=True, help="config random_sets.seed")
    draw.add_argument("--seed", type=int, required=True, help="the study seed (its own stream of draws)")
    draw.add_argument("--out", action="append", required=True, help="selection.json per draw, in draw order")
    draw.set_defaults(func=random_sets_main)


def source_main(args: argparse.Namespace) -> int:
    check_inputs_outputs({"--from": args.source}, {"--out": args.out})
    selection = selection_from_source(
        args.source, args.model_name, args.calibration, args.seed, args.budget, args.algorithm
    )
    atomic_write_json(args.out, selection)
    return 0


def random_sets_main(args: argparse.Namespace) -> int:
    if args.count < 1:
        raise InputError(f"--count {args.count}: draw at least one set (config random_sets.count)")
    if len(args.out) != args.count:
        raise InputError(f"--out given {len(args.out)} times for --count {args.count}: one per draw")
    check_inputs_outputs({}, {"--out": args.out})  # each draw its own file
    protected = parse_layers(args.protected)
    outside = [block for block in protected if not 0 <= block < args.n_layers]
    if outside:
        raise InputError(
            f"--protected {args.protected!r}: block(s) {', '.join(map(str, outside))} outside the model's "
            f"{args.n_layers} blocks (0..{args.n_layers - 1}); protect blocks of this model only"
        )
    sets = draw_random_sets(
        allowed_blocks(args.n_layers, protected), args.budget, args.count, args.draw_seed, args.seed
    )
    for index, (removed, out) in enumerate(zip(sets, args.out)):
        selection = random_set_selection(
            args.model_name,
            args.n_layers,
            protected,
            args.budget,
            index,
            args.count,
            removed,
            args.draw_seed,
            args.seed,
        )
        atomic_write_json(out, selection)
    return 0

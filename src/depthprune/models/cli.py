"""``depthprune prepare-model`` and ``depthprune export``."""

from __future__ import annotations

import logging

from depthprune.io import format_layers, parse_layers, read_json

log = logging.getLogger(__name__)


def removed_from_args(args) -> tuple[int, ...]:
    """The removed set from ``--selection selection.json`` or ``--removed "3 5 7"``."""
    if getattr(args, "selection", None):
        if getattr(args, "removed", None):
            raise ValueError("give either --selection or --removed, not both")
        selection = read_json(args.selection)
        if "removed" not in selection:
            raise ValueError(f"{args.selection}: no 'removed' field")
        return parse_layers(selection["removed"])
    return parse_layers(getattr(args, "removed", None))


def run_prepare(args) -> int:
    from depthprune.models.loading import load_model

    loaded = load_model(args.model, dtype="float32", device="cpu", cache_dir=args.model_cache_dir)
    n_layers = loaded.model.config.num_hidden_layers
    print(f"{args.model}: {n_layers} blocks, loads from {loaded.path}")
    return 0


def run_export(args) -> int:
    from depthprune.cli_common import load_model_from_args
    from depthprune.models.pruning import export_pruned, remove_blocks

    removed = removed_from_args(args)
    loaded = load_model_from_args(args)
    remove_blocks(loaded.model, removed)
    export_pruned(loaded.model, loaded.tokenizer, args.out)
    print(f"exported {loaded.name} without blocks [{format_layers(removed)}] to {args.out}")
    return 0


def register(subparsers) -> None:
    from depthprune.cli_common import add_model_args

    prepare = subparsers.add_parser("prepare-model", help="convert/cache a model spec once (GGUF -> safetensors)")
    prepare.add_argument("--model", required=True, help="model spec (see docs/architecture.md)")
    prepare.add_argument("--model-cache-dir", default="resources/models")
    prepare.set_defaults(func=run_prepare)

    export = subparsers.add_parser("export", help="write a pruned checkpoint loadable by from_pretrained / lm_eval")
    add_model_args(export)
    export.add_argument("--selection", help="selection.json whose removed set to apply")
    export.add_argument("--removed", help="removed layers, e.g. '3 5 7' (alternative to --selection)")
    export.add_argument("--out", required=True, help="output folder")
    export.set_defaults(func=run_export)

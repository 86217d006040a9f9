"""``depthprune prepare-model`` and ``depthprune export``."""

from __future__ import annotations

import logging

from depthprune.errors import InputError
from depthprune.io import format_layers, parse_layers
from depthprune.paths import MODEL_CACHE_DIR

log = logging.getLogger(__name__)


def removed_from_args(args) -> tuple[int, ...]:
    """The removed set from ``--selection selection.json`` or ``--removed "3 5 7"`` (a selection made
    on another model is warned about, as ``evaluate`` does)."""
    from depthprune.cli_common import model_setup, read_selection

    if getattr(args, "selection", None):
        if getattr(args, "removed", None):
            raise InputError("give either --selection or --removed, not both")
        selection = read_selection(args.selection, model_setup(args).display_name, applying="exporting it from")
        return parse_layers(selection["removed"])
    return parse_layers(getattr(args, "removed", None))


def run_prepare(args) -> int:
    """Make a spec loadable without loading its weights: convert GGUF/tiny specs, download hub ids."""
    from pathlib import Path

    from transformers import AutoConfig

    from depthprune.io import atomic_write_json, check_inputs_outputs
    from depthprune.models.loading import resolve_local
    from depthprune.models.setup import model_source_path

    check_inputs_outputs({"--model": model_source_path(args.model)}, {"--out": args.out})
    path = resolve_local(args.model, args.model_cache_dir)  # a clear error at once if offline
    if not Path(path).exists():  # a hub id: fetch it once so parallel jobs do not race to download
        from huggingface_hub import snapshot_download

        try:
            path = snapshot_download(path, allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt"])
        except Exception as err:
            raise FileNotFoundError(f"model {args.model!r}: cannot download from the Hugging Face hub ({err})") from err
    config = AutoConfig.from_pretrained(path)
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    record = {
        "model": args.model,
        "path": str(path),
        "model_type": config.model_type,
        "n_layers": text_config.num_hidden_layers,
    }
    if args.out:
        atomic_write_json(args.out, record)
    print(f"{args.model}: {record['n_layers']} blocks ({record['model_type']}), loads from {path}")
    return 0


def run_export(args) -> int:
    from depthprune.cli_common import model_inputs, model_setup
    from depthprune.io import check_inputs_outputs
    from depthprune.models.pruning import check_export_target, export_pruned, remove_blocks

    check_inputs_outputs({**model_inputs(args), "--selection": args.selection}, {"--out": args.out})
    removed = removed_from_args(args)
    check_export_target(args.out, args.overwrite)  # before the model load, not after
    loaded = model_setup(args).load()
    remove_blocks(loaded.model, removed)
    export_pruned(loaded.model, loaded.tokenizer, args.out, overwrite=args.overwrite)
    print(f"exported {loaded.name} without blocks [{format_layers(removed)}] to {args.out}")
    return 0


def register(subparsers) -> None:
    from depthprune.cli_common import add_model_args

    prepare = subparsers.add_parser("prepare-model", help="convert/cache a model spec once (GGUF -> safetensors)")
    prepare.add_argument("--model", required=True, help="model spec (see docs/architecture.md)")
    prepare.add_argument("--model-cache-dir", default=MODEL_CACHE_DIR)
    prepare.add_argument("--out", help="JSON record of the prepared model (spec, folder, family, blocks)")
    prepare.set_defaults(func=run_prepare)

    export = subparsers.add_parser("export", help="write a pruned checkpoint loadable by from_pretrained / lm_eval")
    add_model_args(export)
    export.add_argument("--selection", help="selection.json whose removed set to apply")
    export.add_argument("--removed", help="removed layers, e.g. '3 5 7' (alternative to --selection)")
    export.add_argument(
        "--out", required=True, help="output folder: new, empty or a previous export (replaced atomically)"
    )
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="replace --out and everything in it even if export did not write it (never the current folder)",
    )
    export.set_defaults(func=run_export)

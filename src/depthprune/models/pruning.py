"""Physical block removal and export of pruned checkpoints."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from torch import nn

from depthprune.budgets import PROTECT_MODES, protected_blocks  # noqa: F401  (re-exported: the search space)
from depthprune.errors import InputError
from depthprune.io import atomic_write_json, format_layers, parse_layers
from depthprune.models.families import family_for

log = logging.getLogger(__name__)


def validate_removed(removed: Iterable[int], n_layers: int, protected: Iterable[int] = ()) -> tuple[int, ...]:
    """Sorted removed set, checked against the model's depth and the protected layers."""
    removed = parse_layers(removed)
    bad = [i for i in removed if not 0 <= i < n_layers]
    if bad:
        raise InputError(f"removed layers {bad} are outside 0..{n_layers - 1}")
    if len(removed) >= n_layers:
        raise InputError(f"cannot remove {len(removed)} of {n_layers} blocks: at least one must remain")
    hit = sorted(set(removed) & {int(p) for p in protected})
    if hit:
        raise InputError(f"removed set contains protected layers {hit} (option protected_layers)")
    return removed


def remove_blocks(model: nn.Module, removed: Iterable[int]) -> nn.Module:
    """Delete the given decoder blocks in place and make the model consistent again.

    transformers 5 indexes the KV cache by ``self_attn.layer_idx`` and slices ``layers`` by
    ``config.num_hidden_layers``; per-layer config lists (``layer_types``) must shrink too, or
    generation with a cache silently uses the wrong slots.
    """
    family = family_for(model)
    blocks = family.blocks(model)
    removed = validate_removed(removed, len(blocks))
    kept = [i for i in range(len(blocks)) if i not in set(removed)]
    new_blocks = nn.ModuleList([blocks[i] for i in kept])
    family.backbone(model).layers = new_blocks
    for new_idx, block in enumerate(new_blocks):
        attn = getattr(block, "self_attn", None)
        if attn is not None and hasattr(attn, "layer_idx"):
            attn.layer_idx = new_idx
        if hasattr(block, "layer_idx"):
            block.layer_idx = new_idx
    for config in {id(c): c for c in (model.config, family.text_config(model))}.values():
        config.num_hidden_layers = len(kept)
        for attr in family.per_layer_config:
            values = getattr(config, attr, None)
            if isinstance(values, (list, tuple)) and len(values) == len(blocks):
                setattr(config, attr, [values[i] for i in kept])
    pruned_from = getattr(model.config, "depthprune_removed_layers", None)
    # Record the removal in original indices so an exported checkpoint says what it is.
    original = _original_indices(pruned_from, len(blocks) + len(pruned_from or ()))
    model.config.depthprune_removed_layers = sorted(set(pruned_from or ()) | {original[i] for i in removed})
    log.info("removed %d blocks %s; %d remain", len(removed), format_layers(removed), len(kept))
    return model


def _original_indices(already_removed, original_depth: int) -> list[int]:
    gone = set(already_removed or ())
    return [i for i in range(original_depth) if i not in gone]


EXPORT_MARKER = "depthprune.json"  # written into every export; marks a folder export may replace


def check_export_target(out_dir: str | Path, overwrite: bool = False) -> Path:
    """Refuse to replace anything ``export`` did not create (checked before any model is loaded).

    An empty or missing folder is fine; so is a previous export (it holds ``depthprune.json``). Any
    other existing path needs ``--overwrite``; the current folder or one of its parents never.
    """
    out_dir = Path(out_dir)
    resolved = out_dir.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents or resolved == Path(resolved.anchor):
        raise InputError(f"--out {out_dir}: refusing to export over the current folder or one of its parents")
    if not (out_dir.exists() or out_dir.is_symlink()):
        return out_dir
    if not out_dir.is_dir():
        if overwrite:
            return out_dir
        raise InputError(f"--out {out_dir}: exists and is not a folder; pass --overwrite to replace it")
    if overwrite or not any(out_dir.iterdir()) or (out_dir / EXPORT_MARKER).is_file():
        return out_dir
    raise InputError(
        f"--out {out_dir}: folder exists, is not empty and is not a previous export (no {EXPORT_MARKER}); "
        "choose another folder or pass --overwrite to replace it"
    )


def export_pruned(model: nn.Module, tokenizer, out_dir: str | Path, overwrite: bool = False) -> Path:
    """Save weights, config and tokenizer so ``AutoModelForCausalLM.from_pretrained(out_dir)`` loads it.

    Written to a temporary sibling folder and swapped into place (``io.atomic_dir``), so a crash
    never leaves half a checkpoint and the old export stays until the new one is complete.
    """
    from depthprune.io import atomic_dir

    out_dir = check_export_target(out_dir, overwrite)
    with atomic_dir(out_dir, replace=True) as tmp:
        # A model loaded from GGUF carries a quantizer and quantization_config that describe the
        # GGUF file, not these (dequantised) weights; saving them would make the checkpoint unloadable.
        if getattr(model, "hf_quantizer", None) is not None:
            model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        atomic_write_json(
            tmp / EXPORT_MARKER,
            {"removed_layers": list(getattr(model.config, "depthprune_removed_layers", []) or [])},
        )
    return out_dir

"""Physical block removal and export of pruned checkpoints."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path

from torch import nn

from depthprune.budgets import PROTECT_MODES, protected_blocks  # noqa: F401  (re-exported: the search space)
from depthprune.errors import InputError
from depthprune.io import OwnedFolder, format_layers, parse_layers
from depthprune.models.families import family_for
from depthprune.models.fingerprint import FINGERPRINT_FILE

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


EXPORT_MARKER = "depthprune.json"  # written into every export, last: the removed layers and the files written
# An export holds only what export wrote (the marker lists it), so replacing a previous export loses
# nothing; a file the user added inside is named and the export refused (io.OwnedFolder).
# Beside them, the fingerprint cache that loading the export (evaluate) writes into it.
EXPORT_FOLDER = OwnedFolder(
    marker=EXPORT_MARKER,
    command="`depthprune export`",
    reserved=re.compile(re.escape(FINGERPRINT_FILE)),
    manifest=True,
)
_REPLACING = "export would replace this folder"
_REMEDY = "move them away, choose another folder or pass --overwrite to replace it all"


def check_export_target(out_dir: str | Path, overwrite: bool = False) -> Path:
    """Refuse to replace anything ``export`` did not create (checked before any model is loaded).

    A missing or empty folder is fine; so is a previous export holding only the files it lists in
    ``depthprune.json``. Anything else needs ``--overwrite``; the current folder or one of its
    parents never.
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
    if not overwrite:
        check_only_export(out_dir)
    return out_dir


def check_only_export(out_dir: Path) -> None:
    """InputError naming every entry of ``out_dir`` that a previous export did not write."""
    if not EXPORT_FOLDER.is_marked(out_dir) and any(out_dir.iterdir()):
        raise InputError(
            f"--out {out_dir}: folder exists, is not empty and is not a previous export (no {EXPORT_MARKER}); "
            "choose another folder or pass --overwrite to replace it"
        )
    EXPORT_FOLDER.check_only_ours(out_dir, "--out", _REPLACING, _REMEDY)


def export_pruned(model: nn.Module, tokenizer, out_dir: str | Path, overwrite: bool = False) -> Path:
    """Save weights, config and tokenizer so ``AutoModelForCausalLM.from_pretrained(out_dir)`` loads it.

    Written to a temporary sibling folder and swapped into place (``io.atomic_dir``), so a crash
    never leaves half a checkpoint and the old export stays until the new one is complete.
    """
    from depthprune.io import atomic_dir

    out_dir = check_export_target(out_dir, overwrite)
    # Checked again just before the swap: a file put into the old export while the model was saved.
    with atomic_dir(out_dir, replace=True, before_replace=None if overwrite else check_only_export) as tmp:
        # A model loaded from GGUF carries a quantizer and quantization_config that describe the
        # GGUF file, not these (dequantised) weights; saving them would make the checkpoint unloadable.
        if getattr(model, "hf_quantizer", None) is not None:
            model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        EXPORT_FOLDER.write_manifest(
            tmp, {"removed_layers": list(getattr(model.config, "depthprune_removed_layers", []) or [])}
        )
    return out_dir

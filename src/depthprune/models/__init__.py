"""Model loading, family adapters, block removal and export.

Names are imported lazily so that light sub-commands (``depthprune render``) never import torch.
"""

import importlib

# The --dtype choices of every model-loading command (loading.resolve_dtype reads them; "auto" picks
# per device). The workflow's config schema takes them from here (depthprune/config_schema.py).
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")

_EXPORTS = {
    "FAMILIES": "families",
    "Family": "families",
    "family_for": "families",
    "LoadedModel": "loading",
    "load_model": "loading",
    "materialise": "loading",
    "export_pruned": "pruning",
    "remove_blocks": "pruning",
    "validate_removed": "pruning",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"depthprune.models.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'depthprune.models' has no attribute {name!r}")

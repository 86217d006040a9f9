"""Model loading, family adapters, block removal and export."""

from depthprune.models.families import FAMILIES, Family, family_for
from depthprune.models.loading import LoadedModel, load_model, materialise
from depthprune.models.pruning import export_pruned, remove_blocks, validate_removed

__all__ = [
    "FAMILIES",
    "Family",
    "LoadedModel",
    "export_pruned",
    "family_for",
    "load_model",
    "materialise",
    "remove_blocks",
    "validate_removed",
]

"""One model setup: which model, under which name, in which precision and on which device, in one
frozen object built once at the CLI's edge (``cli_common.model_setup``) and passed down, as
``CalibrationSetup`` is for the calibration.

A light module: no torch and no transformers at import (loading.py is imported only when the setup
loads, resolves or fingerprints its model).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from depthprune.paths import MODEL_CACHE_DIR


def model_source_path(spec: str) -> str | None:
    """The user's file or folder that ``--model`` names (a local folder, a gguf: file), for the check
    that no output overwrites an input (``io.check_inputs_outputs``); None for a hub id and for
    tiny: and embedded: specs, whose folders the tool itself makes in --model-cache-dir."""
    kind, sep, rest = spec.partition(":")
    if sep and kind == "gguf":
        return rest
    if sep and kind in ("tiny", "embedded"):
        return None
    return spec if Path(spec).exists() else None


@dataclass(frozen=True)
class ModelSetup:
    model: str  # the spec: hub id, local folder, gguf:<file>, embedded:<name> or tiny:<family>-<blocks>
    name: str | None = None  # the alias in outputs (--name); None: the spec's short alias
    dtype: str = "auto"  # a models.DTYPE_CHOICES name; "auto" is resolved per device (resolved_dtype_name)
    device: str = "auto"  # auto, cpu, cuda or cuda:N
    cache_dir: str = MODEL_CACHE_DIR  # where converted checkpoints are kept (--model-cache-dir)

    @property
    def display_name(self) -> str:
        """The model's name in outputs: ``name``, else the spec's short alias (what ``load`` names it)."""
        from depthprune.models.loading import default_name

        return self.name or default_name(self.model)

    @property
    def source_path(self) -> str | None:
        """The user's file or folder the spec names (``model_source_path``)."""
        return model_source_path(self.model)

    def load(self):
        """The model and its tokenizer (models/loading.py:LoadedModel)."""
        from depthprune.models.loading import load_model

        return load_model(self.model, dtype=self.dtype, device=self.device, cache_dir=self.cache_dir, name=self.name)

    def local_path(self) -> str:
        """A folder to load the model from, or a hub id (loading.resolve_local: a clear error if neither)."""
        from depthprune.models.loading import resolve_local

        return resolve_local(self.model, self.cache_dir)

    def fingerprint(self) -> str:
        """The content fingerprint of the model's folder (what a prior's record holds)."""
        from depthprune.models.loading import model_fingerprint

        return model_fingerprint(self.local_path())

    def resolved_dtype_name(self) -> str:
        """The precision the model loads in on this machine ('auto' resolved for the device)."""
        from depthprune.models.loading import dtype_name, resolve_device, resolve_dtype

        return dtype_name(resolve_dtype(self.dtype, resolve_device(self.device)))

    def layers_without_loading(self) -> int | None:
        """Number of decoder blocks from the model's config file (no weights are read); None if unknown."""
        path = self.local_path()
        if not Path(path, "config.json").is_file():
            return None
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(path)
        text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
        return int(text_config.num_hidden_layers)

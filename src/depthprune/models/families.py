"""Family adapters: where each decoder-only architecture keeps its blocks, norm, rotary and head.

Block-level computation never re-implements a family's forward pass: the evaluator records the
keyword arguments each block receives from the model's own forward (masks, rotary embeddings) and
replays them. An adapter therefore only has to *find* things and know which config fields are
per-layer lists. Adding a family is one ``Family(...)`` line in ``FAMILIES``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]
    # Config fields holding one entry per decoder block; removing blocks must filter them too.
    per_layer_config: tuple[str, ...] = ("layer_types",)
    # Gemma 2 squashes logits with tanh softcapping; the loss must see the same logits as the model.
    logit_softcap_attr: str | None = None
    extra: dict = field(default_factory=dict)

    # --- locating modules -------------------------------------------------------------------
    def backbone(self, model: nn.Module) -> nn.Module:
        """The module holding ``layers``, ``norm`` and ``rotary_emb`` (``model.model`` for *ForCausalLM)."""
        inner = getattr(model, "model", model)
        # Multimodal wrappers (Gemma 3 ForConditionalGeneration) keep the text model one level down.
        if not hasattr(inner, "layers") and hasattr(inner, "language_model"):
            inner = inner.language_model
        if not hasattr(inner, "layers"):
            raise ValueError(f"family {self.name}: cannot find the decoder blocks of {type(model).__name__}")
        return inner

    def blocks(self, model: nn.Module) -> nn.ModuleList:
        return self.backbone(model).layers

    def final_norm(self, model: nn.Module) -> nn.Module:
        return self.backbone(model).norm

    def rotary(self, model: nn.Module) -> nn.Module:
        return self.backbone(model).rotary_emb

    def head(self, model: nn.Module) -> nn.Module:
        return model.get_output_embeddings()

    def text_config(self, model: nn.Module):
        config = model.config
        return config.get_text_config() if hasattr(config, "get_text_config") else config

    def logits(self, model: nn.Module, final_hidden: torch.Tensor) -> torch.Tensor:
        """Logits from hidden states leaving the last kept block (final norm, head, softcap)."""
        return self.head_logits(model, self.final_norm(model)(final_hidden))

    def head_logits(self, model: nn.Module, normed_hidden: torch.Tensor) -> torch.Tensor:
        """Logits from already-normed hidden states (the backbone's ``last_hidden_state``)."""
        logits = self.head(model)(normed_hidden)
        cap = getattr(self.text_config(model), self.logit_softcap_attr, None) if self.logit_softcap_attr else None
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return logits


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family("llama", ("llama",)),
        Family("mistral", ("mistral",)),
        Family("qwen2", ("qwen2",)),
        Family("qwen3", ("qwen3",)),
        Family("gemma2", ("gemma2",), logit_softcap_attr="final_logit_softcapping"),
        Family("gemma3", ("gemma3", "gemma3_text"), logit_softcap_attr="final_logit_softcapping"),
    )
}


def family_for(model: nn.Module) -> Family:
    """The adapter for ``model``; a clear error names the unsupported ``model_type``."""
    config = model.config
    model_type = getattr(config, "model_type", None)
    for family in FAMILIES.values():
        if model_type in family.model_types:
            return family
    known = sorted(t for f in FAMILIES.values() for t in f.model_types)
    raise ValueError(f"unknown model family (config.model_type={model_type!r}); supported: {', '.join(known)}")

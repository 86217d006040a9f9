"""Family adapters: where each decoder-only architecture keeps its blocks, norm, rotary and head.

Block-level computation never re-implements a family's forward pass: the evaluator records the
keyword arguments each block receives from the model's own forward (masks, rotary embeddings) and
replays them. An adapter therefore only has to *find* things and know which config fields are
per-layer lists. Adding a family is one ``Family(...)`` line in ``FAMILIES``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from depthprune.errors import InputError


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]
    # Config fields holding one entry per decoder block; removing blocks must filter them too.
    per_layer_config: tuple[str, ...] = ("layer_types",)
    # Gemma 2 squashes logits with tanh softcapping; the loss must see the same logits as the model.
    logit_softcap_attr: str | None = None
    # A tiny random model of the family (tests, the smoke preset; models/tiny.py): the transformers
    # config class and the settings that switch on every per-layer feature, given the block count.
    tiny_config_class: str = ""
    tiny_settings: Callable[[int], dict] = field(default=lambda n_layers: {})
    # The block's two residual branches: the submodules whose outputs are added to the residual
    # stream (attention, then MLP). CBO's gate scales each (engine/gate_fisher.py). Gemma adds a
    # norm after each branch: scaling before it would be undone by the norm.
    residual_branches: tuple[str, str] = ("self_attn", "mlp")

    # --- locating modules -------------------------------------------------------------------
    def backbone(self, model: nn.Module) -> nn.Module:
        """The module holding ``layers``, ``norm`` and ``rotary_emb`` (``model.model`` for *ForCausalLM)."""
        inner = getattr(model, "model", model)
        # Multimodal wrappers (Gemma 3 ForConditionalGeneration) keep the text model one level down.
        if not hasattr(inner, "layers") and hasattr(inner, "language_model"):
            inner = inner.language_model
        if not hasattr(inner, "layers"):
            raise InputError(f"family {self.name}: cannot find the decoder blocks of {type(model).__name__}")
        return inner

    def blocks(self, model: nn.Module) -> nn.ModuleList:
        return self.backbone(model).layers

    def branches(self, block: nn.Module) -> tuple[nn.Module, nn.Module]:
        """The block's attention and MLP branches (``residual_branches``)."""
        try:
            return tuple(getattr(block, name) for name in self.residual_branches)
        except AttributeError as error:
            raise InputError(
                f"family {self.name}: {type(block).__name__} has no {error.name!r} (residual_branches)"
            ) from None

    def final_norm(self, model: nn.Module) -> nn.Module:
        return self.backbone(model).norm

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
        Family(
            "llama", ("llama",), tiny_config_class="LlamaConfig", tiny_settings=lambda n: {"tie_word_embeddings": True}
        ),
        Family(
            "mistral", ("mistral",), tiny_config_class="MistralConfig", tiny_settings=lambda n: {"sliding_window": 32}
        ),
        # Qwen2: alternate sliding and full layers, so per-layer config lists matter.
        Family(
            "qwen2",
            ("qwen2",),
            tiny_config_class="Qwen2Config",
            tiny_settings=lambda n: {"use_sliding_window": True, "sliding_window": 32, "max_window_layers": n // 2},
        ),
        Family("qwen3", ("qwen3",), tiny_config_class="Qwen3Config"),
        Family(
            "gemma2",
            ("gemma2",),
            logit_softcap_attr="final_logit_softcapping",
            residual_branches=("post_attention_layernorm", "post_feedforward_layernorm"),
            tiny_config_class="Gemma2Config",
            tiny_settings=lambda n: {
                "sliding_window": 32,
                "final_logit_softcapping": 30.0,
                "query_pre_attn_scalar": 16,
            },
        ),
        Family(
            "gemma3",
            ("gemma3", "gemma3_text"),
            logit_softcap_attr="final_logit_softcapping",
            residual_branches=("post_attention_layernorm", "post_feedforward_layernorm"),
            tiny_config_class="Gemma3TextConfig",
            tiny_settings=lambda n: {"sliding_window": 32, "query_pre_attn_scalar": 16},
        ),
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
    raise InputError(f"unknown model family (config.model_type={model_type!r}); supported: {', '.join(known)}")

"""Tiny randomly initialised checkpoints (any supported family) for tests and the smoke preset."""

from __future__ import annotations

import re
from pathlib import Path

import torch

from depthprune.paths import MODEL_CACHE_DIR

TINY_DIMS = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}


def parse_tiny_spec(spec: str) -> tuple[str, int]:
    match = re.fullmatch(r"tiny:([a-z0-9]+)(?:-(\d+))?", spec)
    if not match:
        raise ValueError(f"model {spec!r}: expected tiny:<family>[-<blocks>], e.g. tiny:llama-8")
    return match.group(1), int(match.group(2) or 8)


def tiny_config(family: str = "llama", n_layers: int = 8, vocab_size: int = 49152, **overrides):
    """A small config of ``family`` with every per-layer feature of the family switched on."""
    from transformers import (
        Gemma2Config,
        Gemma3TextConfig,
        LlamaConfig,
        MistralConfig,
        Qwen2Config,
        Qwen3Config,
    )

    common = dict(TINY_DIMS, num_hidden_layers=n_layers, vocab_size=vocab_size, max_position_embeddings=2048)
    common.update(overrides)
    if family == "llama":
        return LlamaConfig(**common, tie_word_embeddings=True)
    if family == "mistral":
        return MistralConfig(**common, sliding_window=32)
    if family == "qwen2":
        # Alternate sliding/full layers so per-layer config lists matter.
        return Qwen2Config(**common, use_sliding_window=True, sliding_window=32, max_window_layers=n_layers // 2)
    if family == "qwen3":
        return Qwen3Config(**common)
    if family == "gemma2":
        return Gemma2Config(**common, sliding_window=32, final_logit_softcapping=30.0, query_pre_attn_scalar=16)
    if family == "gemma3":
        return Gemma3TextConfig(**common, sliding_window=32, query_pre_attn_scalar=16)
    raise ValueError(
        f"unknown model family {family!r} for a tiny model; known: llama mistral qwen2 qwen3 gemma2 gemma3"
    )


def make_tiny_model(
    out_dir: str | Path,
    family: str = "llama",
    n_layers: int = 8,
    seed: int = 0,
    tokenizer_cache_dir: str | Path = MODEL_CACHE_DIR,
):
    """Write a deterministic random checkpoint with SmolLM2's real tokenizer to ``out_dir``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from depthprune.models.loading import materialise

    tokenizer = AutoTokenizer.from_pretrained(materialise("embedded:smollm2-135m", tokenizer_cache_dir))
    config = tiny_config(family, n_layers, vocab_size=len(tokenizer))
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Random init gives near-uniform predictions; scale the residual branches up a little so
    # removing a block visibly changes the loss (tests need distinguishable subsets).
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                param.mul_(8.0)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir

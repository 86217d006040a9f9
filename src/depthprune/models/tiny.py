"""Tiny randomly initialised checkpoints (any supported family) for tests and the smoke preset."""

from __future__ import annotations

import re
from pathlib import Path

from depthprune.errors import InputError

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
        raise InputError(f"model {spec!r}: expected tiny:<family>[-<blocks>], e.g. tiny:llama-8")
    n_layers = int(match.group(2) or 8)
    if n_layers < 1:  # a model without blocks has nothing to prune; the prior failed on it
        raise InputError(f"model {spec!r}: a tiny model needs at least 1 block, e.g. tiny:llama-8")
    return match.group(1), n_layers


def tiny_config(family: str = "llama", n_layers: int = 8, vocab_size: int = 49152, **overrides):
    """A small config of ``family`` with every per-layer feature of the family switched on (the
    settings live on the family's adapter, ``models/families.py``)."""
    import transformers

    from depthprune.models.families import FAMILIES

    if family not in FAMILIES:
        raise InputError(f"unknown model family {family!r} for a tiny model; known: {' '.join(FAMILIES)}")
    adapter = FAMILIES[family]
    settings = dict(TINY_DIMS, num_hidden_layers=n_layers, vocab_size=vocab_size, max_position_embeddings=2048)
    settings.update(overrides)
    return getattr(transformers, adapter.tiny_config_class)(**settings, **adapter.tiny_settings(n_layers))


def make_tiny_model(
    out_dir: str | Path,
    tokenizer_dir: str | Path,
    family: str = "llama",
    n_layers: int = 8,
    seed: int = 0,
):
    """Write a deterministic random checkpoint to ``out_dir`` with the tokenizer of ``tokenizer_dir``
    (the loader passes SmolLM2's real one)."""
    # torch here, not at the top: the workflow's plan-time checks read a tiny spec's depth
    # (parse_tiny_spec) when the Snakefile is parsed, and must not pay for importing torch.
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
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

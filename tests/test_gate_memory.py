"""CBO's gate derivatives fit one GPU at 8B (issue 38): their peak on the meta device for the
paper's models at 64 x 2048 calibration tokens (bfloat16 model, float32 derivative copy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from depthprune.engine import gate_memory

CONFIGS = Path(__file__).resolve().parents[1] / "src" / "depthprune" / "models" / "configs"
GIB = 1 << 30


@pytest.mark.parametrize("model", ["meta-llama--Meta-Llama-3-8B", "Qwen--Qwen3-8B"])
def test_blockwise_peak_fits_80_gib(model):
    config = json.loads((CONFIGS / model / "config.json").read_text())
    peak = gate_memory.blockwise_peak_bytes(config, seq_len=2048, model_bytes_per_param=2)
    embeddings = 64 * 2048 * config["hidden_size"] * 2  # the evaluator's captured embeddings (bfloat16)
    assert (peak + embeddings) / GIB < 80
    # the former whole-graph computation did not fit even one row per micro-batch
    assert gate_memory.whole_graph_bytes(config, rows=1, seq_len=2048) / GIB > 130


def test_saved_bytes_grow_with_the_rows():
    """Affine in the rows: the activations grow with them; the block's weights, which autograd
    saves once per graph (aliases of the parameters, counted as an upper bound), do not."""
    config = json.loads((CONFIGS / "meta-llama--Meta-Llama-3-8B" / "config.json").read_text())
    one, two, three = (gate_memory.block_double_backward_bytes(config, rows, 256) for rows in (1, 2, 3))
    assert two - one == three - two > 0
    # float32 q, o, k, v, the MLP's three matrices, the two RMSNorm weights, and the gate α itself
    weights = 4 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096 + 1)
    assert one - (two - one) == weights

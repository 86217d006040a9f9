"""The embedded real models (SmolLM2-135M, Gemma 3 270M): masked = physically pruned = exported.

Marked ``embedded``; each model is skipped when its wheel is missing. The first run converts the
GGUF once into the model cache (SmolLM2: seconds; Gemma 3: 1-2 min of dequantising on 2 cores).
Also marked ``slow``: real model sizes (135M and 270M parameters), about 2 minutes together.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from depthprune.calibration import CalibrationSetup
from depthprune.engine.evaluator import SubsetEvaluator
from depthprune.engine.scoring import forward_loss
from depthprune.models import export_pruned, load_model, remove_blocks
from depthprune.models.loading import EMBEDDED

pytestmark = [pytest.mark.embedded, pytest.mark.slow]

# model key -> (blocks, a removed set spread over the depth, including a full-attention layer for Gemma 3)
CASES = {
    "smollm2-135m": (30, (3, 4, 14, 17, 26)),
    "gemma3-270m": (18, (2, 5, 9, 16)),
}


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


@pytest.fixture(scope="module", params=sorted(CASES))
def embedded(request, model_cache_dir):
    key = request.param
    embedded_model = EMBEDDED[key]
    if (
        importlib.util.find_spec(embedded_model.package) is None
        and not (model_cache_dir / key / "depthprune-ready").exists()
    ):
        pytest.skip(f"embedded:{key} needs its wheel ({embedded_model.install})")
    return key, load_model(f"embedded:{key}", dtype="float32", device="cpu", cache_dir=model_cache_dir)


@pytest.mark.parametrize("calibration", ["ppl_c4", "tlm_cs170k"])
def test_embedded_masked_equals_pruned_equals_exported(embedded, calibration, data_dir, model_cache_dir, tmp_path):
    key, loaded = embedded
    n_blocks, removed = CASES[key]
    assert loaded.model.config.num_hidden_layers == n_blocks
    setup = CalibrationSetup(calibration, data_dir=data_dir, n_samples=4, seq_len=64, seed=0)
    objective = setup.build_objective(loaded.tokenizer, token_budget=256)
    evaluator = SubsetEvaluator(loaded, objective, calibration=calibration)
    masked = evaluator.evaluate([removed])[0]

    pruned = load_model(f"embedded:{key}", dtype="float32", device="cpu", cache_dir=model_cache_dir)
    remove_blocks(pruned.model, removed)
    assert pruned.model.config.num_hidden_layers == n_blocks - len(removed)
    physical_loss, physical_acc = forward_loss(pruned.model, objective)
    assert relative(masked.loss, physical_loss) <= 1e-5

    out = export_pruned(pruned.model, pruned.tokenizer, tmp_path / "pruned")
    del pruned
    reloaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    assert reloaded.config.num_hidden_layers == n_blocks - len(removed)
    assert json.loads((out / "depthprune.json").read_text())["removed_layers"] == list(removed)
    if hasattr(reloaded.config, "layer_types"):  # Gemma 3: the kept blocks keep their attention kind
        kept = [i for i in range(n_blocks) if i not in removed]
        assert reloaded.config.layer_types == [loaded.model.config.layer_types[i] for i in kept]
    exported_loss, exported_acc = forward_loss(reloaded, objective)
    assert relative(masked.loss, exported_loss) <= 1e-5
    assert masked.accuracy == physical_acc == exported_acc

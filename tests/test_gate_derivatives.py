"""CBO's gate derivatives block by block (engine/gate_derivatives.py) equal the whole-graph
reference on the tiny model, for both objectives (TLM with its shared-context tree rows), in float64
(to the last digits) and float32; and their peak memory at Llama-3-8B's size (meta device)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from depthprune.calibration import CalibrationSetup
from depthprune.engine.gate_derivatives import (
    blockwise_derivatives,
    full_graph_derivatives,
    gate_derivatives,
    row_batches,
)
from depthprune.models import family_for, load_model


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return load_model(str(tiny_model_dir), device="cpu")


@pytest.mark.parametrize("calibration", ["ppl_c4", "tlm_cs170k"])
@pytest.mark.parametrize("precision,tolerance", [("float64", 1e-6), ("float32", 1e-3)])
def test_blockwise_equals_full_graph(tiny, data_dir, calibration, precision, tolerance):
    # small sizes (the float64 double backward is slow on a shared 2-core CPU); ppl_c4: 2 rows per batch
    size = {"ppl_c4": {"n_samples": 2, "seq_len": 16}, "tlm_cs170k": {"n_samples": 1, "seq_len": 40}}
    token_budget = {"ppl_c4": 32, "tlm_cs170k": 8192}[calibration]  # ppl_c4: 2 rows of 16 per micro-batch
    objective = CalibrationSetup(calibration, data_dir=data_dir, seed=1, **size[calibration]).build_objective(
        tiny.tokenizer, token_budget=token_budget
    )
    if calibration == "ppl_c4":
        assert any(batch.input_ids.shape[0] > 1 for batch in objective.batches)  # rows are split
    model = copy.deepcopy(tiny.model).double() if precision == "float64" else tiny.model
    family = family_for(model)
    g_ref, h_ref, _ = full_graph_derivatives(model, family, objective, model.device)
    g, h, dtype = blockwise_derivatives(model, family, objective, model.device)
    assert str(dtype) == f"torch.{precision}"
    scale_g, scale_h = np.abs(g_ref).max(), np.abs(h_ref).max()
    assert np.abs(g - g_ref).max() <= tolerance * scale_g
    assert np.abs(h - h_ref).max() <= tolerance * scale_h
    assert np.array_equal(h, h.T)


def test_row_batches_partition_the_scored_positions(tiny, data_dir):
    setup = CalibrationSetup("ppl_c4", data_dir=data_dir, n_samples=4, seq_len=16)
    objective = setup.build_objective(tiny.tokenizer, token_budget=32)
    for batch in objective.batches:
        rows = row_batches(batch)
        assert sum(len(r.targets) for r in rows) == len(batch.targets)
        assert float(sum(r.coefficients.sum() for r in rows)) == pytest.approx(float(batch.coefficients.sum()))
        assert all(r.input_ids.shape[0] == 1 for r in rows)


def test_the_method_is_chosen_by_name_and_full_graph_is_the_default(tiny, data_dir):
    objective = CalibrationSetup("ppl_c4", data_dir=data_dir, n_samples=2, seq_len=16, seed=1).build_objective(
        tiny.tokenizer
    )
    family = family_for(tiny.model)
    reference = full_graph_derivatives(tiny.model, family, objective, tiny.model.device)
    default = gate_derivatives(tiny.model, family, objective, tiny.model.device)
    assert np.array_equal(default[0], reference[0]) and np.array_equal(default[1], reference[1])
    blockwise = gate_derivatives(tiny.model, family, objective, tiny.model.device, method="blockwise")
    assert np.allclose(blockwise[1], reference[1], rtol=0, atol=1e-3 * np.abs(reference[1]).max())
    with pytest.raises(ValueError, match="derivatives 'exact'"):
        gate_derivatives(tiny.model, family, objective, tiny.model.device, method="exact")

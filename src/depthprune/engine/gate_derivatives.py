"""Gate derivatives for CBO: g = ∂L/∂α and H = ∂²L/∂α² at α = 1 (docs/method.md §4.6).

Every block gets a gate, h ← h + α_i·f_i(h). L is a sum of per-batch terms, so g and H are
accumulated batch by batch; H takes N Hessian-vector products (one backward pass per row) per batch.

Always at least float32: in bfloat16 or float16 the second derivatives of a loss of order 10 lose
most of their digits (the default profile's bfloat16 CBO chose blocks 0-3, the worst set of every
perplexity cell). A model running in a 16-bit dtype is therefore copied to float32 for this one
computation (model memory x3 for a bfloat16 model, freed afterwards), and its inputs (embeddings,
attention masks, rotary tables) are re-captured by a float32 forward pass of the copy, so the
derivatives are those of the float32 model with the same (16-bit-rounded) weights. A float32 or
float64 model is used as it is.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

import numpy as np
import torch

from depthprune.calibration.objectives import Objective
from depthprune.engine.dense_capture import capture_dense
from depthprune.engine.scoring import scored_logprobs

log = logging.getLogger(__name__)


def derivative_dtype(model_dtype: torch.dtype) -> torch.dtype:
    """The dtype the derivatives are computed in: the model's if float32/float64, else float32."""
    return model_dtype if model_dtype in (torch.float32, torch.float64) else torch.float32


def gate_derivatives(
    model: torch.nn.Module, family: Any, objective: Objective, device: torch.device, head_chunk: int = 2048
) -> tuple[np.ndarray, np.ndarray, torch.dtype]:
    """(g, H, dtype used) for ``model`` on ``objective``'s calibration batches."""
    model_dtype = next(model.parameters()).dtype
    dtype = derivative_dtype(model_dtype)
    work = model if dtype == model_dtype else copy.deepcopy(model).to(dtype=dtype)
    started = time.perf_counter()
    try:
        blocks = family.blocks(work)
        n = len(blocks)
        grad = torch.zeros(n, dtype=torch.float64)
        hess = torch.zeros(n, n, dtype=torch.float64)
        # Double backward needs the plain-math attention kernel (fused kernels lack it).
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.MATH):
            for batch in objective.batches:
                # Block inputs exactly as the evaluator runs them (shared-context rows: their
                # positions and tree masks), captured from the working copy's own forward pass.
                capture = capture_dense(work, family, [batch], device)
                embeddings, kwargs = capture.embeddings[0], capture.block_kwargs[0]
                alpha = torch.ones(n, dtype=dtype, device=device, requires_grad=True)
                hidden = embeddings
                for j, block in enumerate(blocks):
                    update = block(hidden, **kwargs[j]) - hidden
                    hidden = hidden + alpha[j].to(hidden.dtype) * update
                term = objective.batch_loss(batch, scored_logprobs(work, family, batch, hidden, device, head_chunk))
                (g,) = torch.autograd.grad(term, alpha, create_graph=True)
                rows = [torch.autograd.grad(g[i], alpha, retain_graph=i < n - 1)[0] for i in range(n)]
                grad += g.detach().double().cpu()
                hess += torch.stack(rows).detach().double().cpu()
    finally:
        if work is not model:
            del work
            if device.type == "cuda":
                torch.cuda.empty_cache()
    log.info(
        "gate derivatives (%s): %d Hessian rows in %.1fs",
        str(dtype).replace("torch.", ""),
        n,
        time.perf_counter() - started,
    )
    hess = 0.5 * (hess + hess.T)  # symmetric up to float error
    return grad.numpy(), hess.numpy(), dtype

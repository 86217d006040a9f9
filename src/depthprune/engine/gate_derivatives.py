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

Memory (issue 38). Differentiating the whole gated forward twice keeps every block's saved tensors
of a double backward alive at once: 2.94 GiB per block and 2048-token row for Llama-3-8B in float32
(meta device, engine/gate_memory.py), 94 GiB per row for its 32 blocks. ``gate_derivatives`` therefore
works one calibration row and one block at a time, with the exact second-order adjoint recurrences
of the chain h_{k+1} = h_k + α_k f_k(h_k) (docs/method.md §4.6): with λ_k = ∂L/∂h_k and, for a
direction α_j, the tangents ḣ_k = ∂h_k/∂α_j and λ̇_k = ∂λ_k/∂α_j (all at α = 1),

    g_k    = λ_{k+1}·f_k(h_k)
    λ_k    = λ_{k+1} + J_kᵀλ_{k+1}
    ḣ_{j+1} = f_j(h_j),   ḣ_{k+1} = ḣ_k + J_k ḣ_k                        (k > j)
    λ̇_N    = ∇²ℓ(h_N) ḣ_N,   λ̇_k = λ̇_{k+1} + J_kᵀλ̇_{k+1} + ∇_h(λ_{k+1}·J_k ḣ_k)   (k > j)
    H_kj   = λ̇_{k+1}·f_k(h_k) + λ_{k+1}·J_k ḣ_k                          (k ≥ j; H symmetric)

Each product (J v, Jᵀu, the second-order term) is one block's autograd graph, built and freed at
once; what stays are the row's hidden states h_k, the adjoints λ_k and one direction's tangents
ḣ_k (3 (N+1) row states) and the LM head's graph of the row. ``full_graph_derivatives`` is the
other computation (the whole graph, N Hessian-vector products per batch): the default, which made
every committed study's CBO sets, and the reference the blockwise one is tested against
(tests/test_gate_derivatives.py). CBO's ``derivatives`` hyper-parameter chooses; config/paper.yaml
takes ``blockwise``.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from depthprune.calibration.objectives import Batch, Objective
from depthprune.devices import release_cached_memory
from depthprune.engine.dense_capture import capture_dense
from depthprune.engine.scoring import scored_logprobs
from depthprune.errors import InputError

log = logging.getLogger(__name__)


def derivative_dtype(model_dtype: torch.dtype) -> torch.dtype:
    """The dtype the derivatives are computed in: the model's if float32/float64, else float32."""
    return model_dtype if model_dtype in (torch.float32, torch.float64) else torch.float32


def on_working_copy(model: torch.nn.Module, device: torch.device, compute: Callable[[torch.nn.Module], Any]) -> Any:
    """``compute(work)`` under the plain-math attention kernel (fused kernels have no double
    backward), where ``work`` is ``model`` itself in float32/float64, else its float32 copy, which
    is freed, with the accelerator's cached memory, as soon as ``compute`` returns."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    model_dtype = next(model.parameters()).dtype
    dtype = derivative_dtype(model_dtype)
    work = model if dtype == model_dtype else copy.deepcopy(model).to(dtype=dtype)
    try:
        with sdpa_kernel(SDPBackend.MATH):
            return compute(work)
    finally:
        if work is not model:
            del work
            release_cached_memory(device)


def full_graph_derivatives(
    model: torch.nn.Module, family: Any, objective: Objective, device: torch.device, head_chunk: int = 2048
) -> tuple[np.ndarray, np.ndarray, torch.dtype]:
    """(g, H, dtype used) by a double backward through the whole gated forward of each batch (the
    reference; its memory grows with the depth times the batch's tokens)."""
    dtype = derivative_dtype(next(model.parameters()).dtype)
    started = time.perf_counter()

    def compute(work: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
        blocks = family.blocks(work)
        n = len(blocks)
        grad = torch.zeros(n, dtype=torch.float64)
        hess = torch.zeros(n, n, dtype=torch.float64)
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
        return grad, hess

    grad, hess = on_working_copy(model, device, compute)
    log.info(
        "gate derivatives (%s): %d Hessian rows in %.1fs",
        str(dtype).replace("torch.", ""),
        len(grad),
        time.perf_counter() - started,
    )
    hess = 0.5 * (hess + hess.T)  # symmetric up to float error
    return grad.numpy(), hess.numpy(), dtype


def row_batches(batch: Batch) -> list[Batch]:
    """``batch`` split into one Batch per row (L is a sum over rows: coefficients are global)."""
    n_rows, length = batch.input_ids.shape
    rows = []
    for r in range(n_rows):
        scored = (batch.flat_positions >= r * length) & (batch.flat_positions < (r + 1) * length)
        if not bool(scored.any()):
            continue
        tree = {
            name: getattr(batch, name)[r : r + 1]
            for name in ("position_ids", "branch_ids", "root_ids")
            if getattr(batch, name) is not None
        }
        rows.append(
            Batch(
                input_ids=batch.input_ids[r : r + 1],
                attention_mask=batch.attention_mask[r : r + 1],
                flat_positions=batch.flat_positions[scored] - r * length,
                targets=batch.targets[scored],
                coefficients=batch.coefficients[scored],
                sequence_ids=batch.sequence_ids[scored],
                **tree,
            )
        )
    return rows


def _dot(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() * b.double()).sum())


def row_derivatives(
    work: torch.nn.Module, family: Any, objective: Objective, row: Batch, device: torch.device, head_chunk: int
) -> tuple[np.ndarray, np.ndarray]:
    """(g, H) of one row's share of L, block by block (the recurrences of the module docstring)."""
    capture = capture_dense(work, family, [row], device)
    embeddings, kwargs = capture.embeddings[0], capture.block_kwargs[0]
    blocks = family.blocks(work)
    n = len(blocks)

    def update(k: int, h: torch.Tensor) -> torch.Tensor:  # f_k(h)
        return blocks[k](h, **kwargs[k]) - h

    def leaf(h: torch.Tensor) -> torch.Tensor:
        return h.detach().requires_grad_(True)

    with torch.no_grad():  # h_0 .. h_N of the dense model (α = 1)
        hs = [embeddings.to(device)]
        for k in range(n):
            hs.append(blocks[k](hs[-1], **kwargs[k]))
    steps = [hs[k + 1] - hs[k] for k in range(n)]  # f_k(h_k)

    h_last = leaf(hs[n])  # the head's graph of this row is kept for the n head HVPs below
    loss = objective.batch_loss(row, scored_logprobs(work, family, row, h_last, device, head_chunk))
    (lam_last,) = torch.autograd.grad(loss, h_last, create_graph=True)

    lams: list[torch.Tensor | None] = [None] * (n + 1)  # λ_k = ∂L/∂h_k
    lams[n] = lam_last.detach()
    for k in range(n - 1, 0, -1):
        h = leaf(hs[k])
        (vjp,) = torch.autograd.grad(update(k, h), h, lams[k + 1])
        lams[k] = lams[k + 1] + vjp
    grad = np.array([_dot(lams[k + 1], steps[k]) for k in range(n)])

    hess = np.zeros((n, n))
    for j in range(n):
        # forward tangents ḣ_k = ∂h_k/∂α_j (zero up to j); J_k v as a double vjp (w ↦ J_kᵀw is linear)
        dots: list[torch.Tensor | None] = [None] * (n + 1)
        dots[j + 1] = steps[j]
        for k in range(j + 1, n):
            h = leaf(hs[k])
            y = update(k, h)
            w = torch.zeros_like(y, requires_grad=True)
            (u,) = torch.autograd.grad(y, h, w, create_graph=True)
            (jvp,) = torch.autograd.grad(u, w, dots[k])
            dots[k + 1] = dots[k] + jvp
        (lam_dot,) = torch.autograd.grad(lam_last, h_last, dots[n], retain_graph=True)  # ∇²ℓ ḣ_N
        lam_dot = lam_dot.detach()
        for k in range(n - 1, j - 1, -1):
            hess[k, j] = _dot(lam_dot, steps[k])
            if k == j:
                break
            hess[k, j] += _dot(lams[k + 1], dots[k + 1] - dots[k])  # λ_{k+1}·J_k ḣ_k
            h = leaf(hs[k])
            y = update(k, h)
            (u,) = torch.autograd.grad(y, h, lams[k + 1], create_graph=True)  # J_kᵀλ_{k+1}(h)
            (second,) = torch.autograd.grad(u, h, dots[k], retain_graph=True)  # ∇_h(λ_{k+1}·J_k ḣ_k)
            (vjp,) = torch.autograd.grad(y, h, lam_dot)
            lam_dot = lam_dot + vjp + second
            del y, u
        del dots
    lower = np.tril(hess)
    return grad, lower + np.tril(hess, -1).T


def blockwise_derivatives(
    model: torch.nn.Module, family: Any, objective: Objective, device: torch.device, head_chunk: int = 2048
) -> tuple[np.ndarray, np.ndarray, torch.dtype]:
    """(g, H, dtype used) for ``model`` on ``objective``'s calibration batches, row by row and
    block by block (module docstring): the peak is one row's, whatever the depth and the batch."""
    dtype = derivative_dtype(next(model.parameters()).dtype)
    started = time.perf_counter()

    def compute(work: torch.nn.Module) -> tuple[np.ndarray, np.ndarray]:
        n = len(family.blocks(work))
        grad, hess = np.zeros(n), np.zeros((n, n))
        for batch in objective.batches:
            for row in row_batches(batch):
                g, h = row_derivatives(work, family, objective, row, device, head_chunk)
                grad += g
                hess += h
        return grad, hess

    grad, hess = on_working_copy(model, device, compute)
    log.info(
        "gate derivatives (%s, block by block): %d Hessian columns in %.1fs",
        str(dtype).replace("torch.", ""),
        len(grad),
        time.perf_counter() - started,
    )
    return grad, hess, dtype


# CBO's ``derivatives`` hyper-parameter: the same g and H (equal to float32's resolution; tests/test_gate_derivatives.py).
# full_graph keeps every score the committed studies were made with; blockwise is what fits a GPU at 8B.
DERIVATIVE_METHODS = {"full_graph": full_graph_derivatives, "blockwise": blockwise_derivatives}


def gate_derivatives(
    model: torch.nn.Module,
    family: Any,
    objective: Objective,
    device: torch.device,
    head_chunk: int = 2048,
    method: str = "full_graph",
) -> tuple[np.ndarray, np.ndarray, torch.dtype]:
    """(g, H, dtype used) by ``method`` (``DERIVATIVE_METHODS``)."""
    if method not in DERIVATIVE_METHODS:
        raise InputError(f"cbo derivatives {method!r}: expected one of {', '.join(DERIVATIVE_METHODS)}")
    return DERIVATIVE_METHODS[method](model, family, objective, device, head_chunk)

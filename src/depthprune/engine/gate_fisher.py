"""CBO as Jansen et al. (2026) wrote it: per-sample gate gradients and their Fisher energy
(docs/method.md §4.6; issue 67).

Their gate: one α_k per block scales the block's two residual branches, the attention output and,
separately, the MLP output (whose input already holds α_k · attention):

    h' = h + α_k · attn(h),        h'' = h' + α_k · mlp(h')

so α_k = 1 is the dense block and α_k = 0 removes it exactly. ``branch_gates`` installs it with
forward hooks on the family's two branch modules (``Family.residual_branches``), so no family's
forward is re-implemented.

Their energy: row s of A is the gradient, at α = 1, of calibration sample s's loss with respect
to the N gates (one first-order backward per sample); H = AᵀA / m is an empirical Fisher, positive
semi-definite, and E(x) = xᵀHx (x_i = 1 for a removed block) is the mean over the samples of the
squared first-order loss change. There is no linear term: the paper assumes the gradient of the
mean loss is about zero for a trained model. Following the reproduced paper (its §4.2: "we replace
their original scoring functions with our unified calibration metric"), the samples are those of
the calibration configuration's own loss L: ℓ_s = m × sample s's share of L
(``Objective.sample_shares``), so that L is their mean: one row per C4 sequence under perplexity,
one per item under TLM. With m samples, A has rank at most m.

Precision: the model runs in its own dtype; each branch output is promoted to float32 (or the
model's float64) before it is multiplied by α, so the product, and the reduction over tokens that
gives ∂ℓ_s/∂α_k, are in float32 or better. Memory: first-order backwards only, one calibration row
at a time (the saved activations of one row's forward, as in training with batch 1).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from depthprune.calibration.objectives import Objective
from depthprune.engine.dense_capture import capture_dense
from depthprune.engine.gate_derivatives import row_batches
from depthprune.engine.scoring import scored_logprobs

log = logging.getLogger(__name__)


def _gated(output: Any, alpha: torch.Tensor) -> Any:
    """``output`` (a tensor, or an attention module's tuple whose first entry is the output) scaled
    by ``alpha`` in float32 or better, returned in its own dtype."""
    if isinstance(output, tuple):
        return (_gated(output[0], alpha), *output[1:])
    wide = torch.promote_types(output.dtype, torch.float32)
    return (alpha.to(wide) * output.to(wide)).to(output.dtype)


@contextlib.contextmanager
def branch_gates(blocks: Sequence[torch.nn.Module], family: Any, alpha: torch.Tensor) -> Iterator[None]:
    """Within the block, scale both residual branches of block k by ``alpha[k]`` (their gate)."""
    handles = []
    try:
        for k, block in enumerate(blocks):
            for branch in family.branches(block):
                handles.append(branch.register_forward_hook(lambda _m, _a, out, k=k: _gated(out, alpha[k])))
        yield
    finally:
        for handle in handles:
            handle.remove()


def gated_hidden(
    model: torch.nn.Module, family: Any, batch: Any, alpha: torch.Tensor, device: torch.device
) -> torch.Tensor:
    """The final hidden state of ``batch`` (the input of the final norm) with every block gated by
    ``alpha``; the blocks are called with the keyword arguments the model's own forward gives them."""
    capture = capture_dense(model, family, [batch], device)
    hidden, kwargs = capture.embeddings[0], capture.block_kwargs[0]
    blocks = family.blocks(model)
    with branch_gates(blocks, family, alpha):
        for k, block in enumerate(blocks):
            out = block(hidden, **kwargs[k])
            hidden = out[0] if isinstance(out, tuple) else out
    return hidden


def fisher_rows(
    model: torch.nn.Module, family: Any, objective: Objective, device: torch.device, head_chunk: int = 2048
) -> np.ndarray:
    """A (m, N), float64: row s = ∂ℓ_s/∂α at α = 1, ℓ_s = m × sample s's share of L (module
    docstring), samples in id order. A sample split over several rows sums its rows' gradients."""
    started = time.perf_counter()
    n_blocks = len(family.blocks(model))
    m = objective.n_samples
    rows: dict[int, np.ndarray] = {}
    wide = torch.promote_types(next(model.parameters()).dtype, torch.float32)
    with torch.enable_grad():
        for batch in objective.batches:
            for row in row_batches(batch):
                alpha = torch.ones(n_blocks, dtype=wide, device=device, requires_grad=True)
                hidden = gated_hidden(model, family, row, alpha, device)
                shares = objective.sample_shares(row, scored_logprobs(model, family, row, hidden, device, head_chunk))
                for i, (sample, share) in enumerate(shares.items()):
                    (grad,) = torch.autograd.grad(share, alpha, retain_graph=i < len(shares) - 1)
                    rows[sample] = rows.get(sample, 0.0) + m * grad.detach().double().cpu().numpy()
    a = np.stack([rows[s] for s in sorted(rows)]) if rows else np.zeros((0, n_blocks))
    log.info(
        "gate Fisher rows: %d samples x %d blocks (rank %d) in %.1fs",
        a.shape[0],
        n_blocks,
        np.linalg.matrix_rank(a) if a.size else 0,
        time.perf_counter() - started,
    )
    return a


def fisher_matrix(a: np.ndarray) -> np.ndarray:
    """H = AᵀA / m: positive semi-definite by construction."""
    return a.T @ a / a.shape[0]


def fisher_energy(a: np.ndarray, removed: np.ndarray) -> np.ndarray:
    """E(x) = xᵀHx = mean over samples of (A_s · x)², for x (..., N) with x_i = 1 for a removed block."""
    return np.mean((np.asarray(removed, dtype=float) @ a.T) ** 2, axis=-1)

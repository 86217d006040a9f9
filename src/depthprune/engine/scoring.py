"""LM-head scoring: log-probabilities at the scored positions only (docs/method.md §5).

One head path for every scorer: the subset evaluator and the gate derivatives (calibration
batches), the plain-forward reference ``forward_loss``, the lm-eval class (evaluation/engine_lm.py)
and the perplexity windows (evaluation/perplexity.py). The head runs only at the positions asked
for, in chunks, so no [batch, length, vocabulary] tensor is ever made; log-probabilities are taken
in at least float32 (float64 stays float64).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import pairwise

import torch

from depthprune.calibration.objectives import Objective
from depthprune.engine.tree_attention import backbone_forward, tree_masks
from depthprune.models.families import family_for
from depthprune.models.pruning import remove_blocks


def head_target_logprobs(
    model,
    family,
    hidden: torch.Tensor,
    positions: torch.Tensor,
    targets: torch.Tensor,
    device,
    head_chunk: int = 2048,
    normed: bool = False,
    argmax: bool = False,
) -> Iterator[tuple[int, torch.Tensor, torch.Tensor | None]]:
    """(start, log p(target) [rows], target is the argmax [rows] bool, or None without ``argmax``) for
    ``positions[start : start + head_chunk]`` of ``hidden`` (flattened to [tokens, H]), chunk after
    chunk; ``targets`` are the positions' next tokens.

    ``hidden`` leaves the last kept block (the final norm is applied here), or with ``normed`` it is
    the backbone's ``last_hidden_state`` (already normed). Differentiable: gate derivatives use it.

    log p(target) = logit(target) - logsumexp(logits), not torch.log_softmax: the latter's float32
    CPU kernel sums the vocabulary's exponentials in running sums that drop the smallest terms, and
    overstates every token's log-likelihood by about 9e-6 nat on SmolLM2's 49k vocabulary (1e-4
    over an 18-token answer, against float64); logsumexp's tree-shaped sum is within float rounding
    of the float64 value (7e-6 on the same answer). Nothing of size [rows, vocabulary] is made
    besides the logits (``vocabulary_logsumexp`` works a few rows at a time).
    """
    flat = hidden.reshape(-1, hidden.shape[-1])
    positions = positions.to(flat.device)
    targets = targets.to(device)
    head = family.head_logits if normed else family.logits
    for start in range(0, len(positions), head_chunk):
        logits = head(model, flat[positions[start : start + head_chunk]].to(device))
        dtype = torch.promote_types(logits.dtype, torch.float32)
        if logits.requires_grad:  # the gate derivatives: one upcast, so both terms' gradients add up in `dtype`
            logits = logits.to(dtype)
        chunk_targets = targets[start : start + len(logits)]
        picked = logits.gather(1, chunk_targets[:, None]).squeeze(1).to(dtype) - vocabulary_logsumexp(logits, dtype)
        # argmax only where asked (lm-eval's greedy flags): over 49k logits it took 0.43 s per 2047 positions
        # on SmolLM2 (one thread), 3.5 % of a WikiText-2 perplexity pass
        yield start, picked, (logits.argmax(dim=-1) == chunk_targets) if argmax else None


# Rows per block of vocabulary_logsumexp on a CPU: 8 rows of a 49k vocabulary are 1.5 MB in float32,
# within a core's L2 cache (measured on the Intel VM, two threads: best at 4-8 rows; 16+ spill).
# 0: one call (`timing normaliser` compares the two).
LOGSUMEXP_BLOCK_ROWS = 8


def vocabulary_logsumexp(logits: torch.Tensor, dtype: torch.dtype, block_rows: int | None = None) -> torch.Tensor:
    """``torch.logsumexp(logits.to(dtype), dim=-1)``, bit for bit, a few rows at a time on a CPU.

    torch's logsumexp makes four passes over its input (max, subtract, exponentiate, sum), and the
    upcast of bfloat16 logits a fifth; over a [512, 49k] float32 chunk each pass streams 100 MB
    through memory (a torch.profiler profile put the normaliser at 13 % of a `ppl_c4` 8 x 64
    calibration evaluation of SmolLM2 in float32 and 44 % in bfloat16). Blocks of a few rows stay in
    cache: 0.36 of the one-call time in bfloat16 (AMX) and 0.68 in float32 (AVX2), one thread
    (`depthprune timing normaliser`; docs/method.md §5). Each row is reduced in the same order
    whatever the rows beside it, except a lone row, which ATen splits across threads; so a last
    block of one row joins the block before it, and every value equals the one-call value
    (tests/test_scoring.py). It stays one call on an accelerator, and where a gradient is wanted
    (the gate derivatives): the backward of many row slices would build a full-size gradient per slice.
    """
    rows = logits.shape[0]
    block_rows = LOGSUMEXP_BLOCK_ROWS if block_rows is None else block_rows
    wants_gradient = logits.requires_grad and torch.is_grad_enabled()
    if not block_rows or rows <= block_rows or logits.device.type != "cpu" or wants_gradient:
        return torch.logsumexp(logits.to(dtype), dim=-1)
    starts = list(range(0, rows, block_rows))
    if rows - starts[-1] == 1:
        starts.pop()
    return torch.cat([torch.logsumexp(logits[low:high].to(dtype), dim=-1) for low, high in pairwise([*starts, rows])])


def scored_logprobs(
    model, family, batch, hidden: torch.Tensor, device, head_chunk: int = 2048, normed: bool = False
) -> torch.Tensor:
    """log p(target) at ``batch``'s scored positions (``flat_positions``, ``targets``)."""
    return torch.cat(
        [
            picked
            for _, picked, _ in head_target_logprobs(
                model, family, hidden, batch.flat_positions, batch.targets, device, head_chunk, normed
            )
        ]
    )


@torch.no_grad()
def forward_loss(model: torch.nn.Module, objective: Objective) -> tuple[float, float | None]:
    """L of ``model`` by its plain forward pass (no caches, no hooks but the tree masks): the
    reference that masked evaluation must reproduce, and how a physically pruned or exported model
    is scored."""
    family = family_for(model)
    device = next(model.parameters()).device
    logprobs = []
    with tree_masks(model, family, family.blocks(model), objective.batches) as tree:
        for batch in objective.batches:
            hidden = backbone_forward(family.backbone(model), batch, device, tree).last_hidden_state
            logprobs.append(scored_logprobs(model, family, batch, hidden, device, normed=True))
    return objective.reduce(logprobs)


def score_heldout(loaded, objective, removed) -> dict:
    """The held-out loss (and TLM accuracy) of the model without blocks ``removed``: the blocks are
    removed from ``loaded.model`` in place (called once a search is done with the model), and the
    pruned model is scored by its plain forward pass, as an exported pruned model would be."""
    started = time.perf_counter()
    remove_blocks(loaded.model, removed)
    loss, accuracy = forward_loss(loaded.model, objective)
    return {
        "loss": float(loss),
        "accuracy": None if accuracy is None else float(accuracy),
        "n_tokens": objective.n_tokens,
        "data_hash": objective.data_hash,
        "seconds": time.perf_counter() - started,
    }

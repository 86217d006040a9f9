"""The dense capture: one forward pass of the model, recording what each decoder block receives.

Blocks are then called exactly as the model's forward calls them: a forward pre-hook records the
keyword arguments each block receives (attention masks, rotary embeddings for its layer type,
shared-context tree masks) and they are replayed. No family's forward is re-implemented.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from depthprune.engine.tree_attention import backbone_forward, tree_masks

State = list  # one hidden-state tensor [B, T, H] per calibration micro-batch


@dataclass
class DenseCapture:
    embeddings: State  # input of block 0, per batch
    block_kwargs: list[list[dict]]  # [batch][block] -> keyword arguments replayed into the block
    states: dict[int, State] = field(default_factory=dict)  # dense input of the kept blocks j ≥ 1
    final: State = field(default_factory=list)  # input of the final norm, per batch


@torch.no_grad()
def capture_dense(model, family, batches, device, state_device=None, keep=frozenset()) -> DenseCapture:
    """Run the model's own forward on each batch; keep the dense input of blocks ``keep`` (on
    ``state_device``, default ``device``), of block 0 and of the final norm, and every block's
    keyword arguments."""
    blocks = family.blocks(model)
    state_device = device if state_device is None else state_device
    dense_states: dict[int, State] = {j: [] for j in set(keep) | {0}}
    captured: list[dict] = []
    final: State = []  # scored after the hooks are gone (the head calls the final norm again)

    def block_hook(index):
        def hook(module, args, kwargs):
            if index in dense_states:
                hidden = args[0] if args else kwargs["hidden_states"]
                dense_states[index].append(hidden.to(state_device))
            captured[-1][index] = {k: v for k, v in kwargs.items() if k != "hidden_states"}

        return hook

    def norm_hook(module, args):
        final.append(args[0])

    # Shared-context rows: the tree mask replaces the model's mask first, so it is also what is
    # captured and replayed (hooks run in registration order).
    with tree_masks(model, family, blocks, batches) as tree:
        handles = [blk.register_forward_pre_hook(block_hook(j), with_kwargs=True) for j, blk in enumerate(blocks)]
        handles.append(family.final_norm(model).register_forward_pre_hook(norm_hook))
        try:
            for batch in batches:
                captured.append({})
                backbone_forward(family.backbone(model), batch, device, tree)
        finally:
            for handle in handles:
                handle.remove()
    embeddings = dense_states.pop(0)
    block_kwargs = [[per_batch[j] for j in range(len(blocks))] for per_batch in captured]
    return DenseCapture(embeddings, block_kwargs, dense_states, final)

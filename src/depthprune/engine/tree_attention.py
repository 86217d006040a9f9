"""Shared-context scoring: one packed sequence per context, continuations as branches of a tree.

The candidates of a multiple-choice item share their context. Instead of one sequence per candidate,
a row holds the shared prefix once, then every candidate's remaining tokens (its branch)::

    tokens    [ c0 c1 c2 c3 | a0 a1 | b0 b1 b2 | d0 d1 | e0 | f0 ]
    branch      0  0  0  0    1  1    2  2  2    3  3    4    5     (-1: padding)
    root        0  0  0  0    0  0    0  0  0    3  3    3    3     (branch id of the tree's prefix)
    position    0  1  2  3    4  5    4  5  6    0  1    2    2     (a branch continues from its prefix)

(two trees in one row: short items share rows, so that little of a micro-batch is padding).

A token attends to the prefix and to the earlier tokens of its own branch, at the positions it has
in its own separate sequence, so each branch computes exactly what its separate sequence computes
(docs/method.md §5: the shared context is computed once). Sliding-window layers limit attention by
*position* distance, as in the separate sequence (the physical distance across other branches would
be wrong).

The mask is installed by forward pre-hooks on the decoder blocks, which replace the
``attention_mask`` keyword the model's own forward built: no family's forward is re-implemented,
and the evaluator replays the replaced keyword like every other captured one. ``tree_masks`` and
``backbone_forward`` run the model's own forward on such rows; the subset evaluator's dense capture,
the gate derivatives, the plain-forward reference and the lm-eval class all go through them.
"""

from __future__ import annotations

import contextlib

import torch

from depthprune.errors import InputError


def tree_attention_mask(
    position_ids: torch.Tensor,
    branch_ids: torch.Tensor,
    root_ids: torch.Tensor | None = None,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Boolean mask [B, 1, T, T], True where query t may attend to key s.

    ``root_ids`` (default: 0 everywhere, one tree per row) is, per token, the branch id of its
    tree's shared prefix: several trees can share a row when their branch ids differ.
    """
    length = branch_ids.shape[-1]
    index = torch.arange(length, device=branch_ids.device)
    if root_ids is None:
        root_ids = torch.zeros_like(branch_ids)
    q_branch, kv_branch = branch_ids[:, :, None], branch_ids[:, None, :]
    mask = (index[None, :, None] >= index[None, None, :]) & (q_branch >= 0) & (kv_branch >= 0)
    mask &= (kv_branch == root_ids[:, :, None]) | (kv_branch == q_branch)
    if sliding_window is not None:
        distance = position_ids[:, :, None] - position_ids[:, None, :]
        mask &= distance < sliding_window  # as transformers' sliding_window_overlay, in positions
    # Padding queries attend to themselves only: no all-masked row (NaN in SDPA); never scored.
    mask |= (q_branch < 0) & (index[None, :, None] == index[None, None, :])
    return mask[:, None]


def layer_windows(text_config, n_layers: int) -> list[int | None]:
    """The sliding window of each decoder block (None: full attention), as the model's config says."""
    window = getattr(text_config, "sliding_window", None)
    types = getattr(text_config, "layer_types", None)
    if types is None:  # Mistral: every layer slides when a window is set; Llama: none does
        return [window] * n_layers
    return [window if kind == "sliding_attention" else None for kind in types[:n_layers]]


def model_mask(mask: torch.Tensor, like) -> torch.Tensor:
    """``mask`` in the form the model's attention expects: additive float if it built a float mask
    (eager attention), else boolean (SDPA)."""
    if isinstance(like, torch.Tensor) and like.is_floating_point():
        additive = torch.zeros(mask.shape, dtype=like.dtype, device=mask.device)
        return additive.masked_fill_(~mask, torch.finfo(like.dtype).min)
    return mask


class TreeMaskHooks:
    """Forward pre-hooks giving each block the tree mask of the batch being run (see module doc)."""

    def __init__(self, blocks, text_config):
        implementation = str(getattr(text_config, "_attn_implementation", "sdpa") or "sdpa")
        if "flash" in implementation or "flex" in implementation:
            raise InputError(f"shared-context scoring needs sdpa or eager attention; the model uses {implementation!r}")
        self.blocks = list(blocks)
        self.windows = layer_windows(text_config, len(self.blocks))
        self._masks: dict[int | None, torch.Tensor] = {}
        self._batch = None
        self._handles = []

    def set_batch(self, batch, device) -> None:
        """The batch about to run (a calibration Batch or None); plain rows keep the model's mask."""
        self._masks = {}
        if batch is None or batch.branch_ids is None:
            self._batch = None
        else:
            self._batch = (batch.position_ids.to(device), batch.branch_ids.to(device), batch.root_ids.to(device))

    def _mask(self, window: int | None) -> torch.Tensor:
        if window not in self._masks:
            self._masks[window] = tree_attention_mask(*self._batch, sliding_window=window)
        return self._masks[window]

    def __enter__(self) -> TreeMaskHooks:
        def hook(index):
            def replace(module, args, kwargs):
                if self._batch is None:
                    return None
                kwargs = dict(kwargs)
                kwargs["attention_mask"] = model_mask(self._mask(self.windows[index]), kwargs.get("attention_mask"))
                return args, kwargs

            return replace

        self._handles = [blk.register_forward_pre_hook(hook(j), with_kwargs=True) for j, blk in enumerate(self.blocks)]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []


@contextlib.contextmanager
def tree_masks(model, family, blocks, batches):
    """Tree-mask hooks on ``blocks`` when any batch holds shared-context rows, else nothing."""
    if not any(batch.branch_ids is not None for batch in batches):
        yield None
        return
    with TreeMaskHooks(blocks, family.text_config(model)) as hooks:
        yield hooks


def backbone_forward(backbone, batch, device, tree):
    """The model's own forward on one batch (shared-context rows: their positions and tree mask)."""
    extra = {}
    if tree is not None:
        tree.set_batch(batch, device)
    if batch.branch_ids is not None:
        extra["position_ids"] = batch.position_ids.to(device)
    return backbone(
        input_ids=batch.input_ids.to(device), attention_mask=batch.attention_mask.to(device), use_cache=False, **extra
    )

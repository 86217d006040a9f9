"""Scoring the same rows for a group of removed sets at once (docs/method.md §5, evaluation).

Benchmark evaluation scores the same requests on every pruned model of a study. The state entering
block j of the model without S depends only on S ∩ [0, j), so the group's sets are walked as a trie
over per-block keep/remove decisions (``states.PrefixStates.walk``), batch after batch: the blocks
below a set's first removed block run once for the whole group, and each (prefix, block) node of the
trie runs once however many sets share it. Nothing is kept between batches: evaluation rows are
many and each is scored once per set, so the trie of one batch is all the sharing there is (the
calibration evaluator, whose rows are few and scored thousands of times, caches states instead).

Every block is called with the keyword arguments the model's own forward gives it (masks, rotary
embeddings of its layer type, shared-context tree masks), recorded by ``capture_block_inputs`` with
the blocks' computation skipped, so no family's forward is re-implemented and the scores are those
of the physically pruned model (tests/test_set_group.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from depthprune.engine.dense_capture import DenseCapture
from depthprune.engine.records import EvaluatorStats, RemovedSet
from depthprune.engine.scoring import head_target_logprobs
from depthprune.engine.states import PrefixStates, StateCache
from depthprune.models.families import family_for
from depthprune.models.pruning import validate_removed


@torch.no_grad()
def capture_block_inputs(model, family, run_backbone: Callable[[], object]) -> DenseCapture:
    """Block 0's input and every block's keyword arguments for the rows ``run_backbone()`` runs,
    without running any block: each block's ``forward`` is swapped, for the call, for one that
    records what it receives and passes the hidden states through (pre-hooks, such as the tree
    masks, still run first, so what they install is what is recorded)."""
    blocks = family.blocks(model)
    embeddings: list[torch.Tensor] = []
    received: list[dict] = [{} for _ in blocks]

    def passthrough(index):
        def forward(*args, **kwargs):
            hidden = args[0] if args else kwargs["hidden_states"]
            if index == 0:
                embeddings.append(hidden)
            received[index] = {k: v for k, v in kwargs.items() if k != "hidden_states"}
            return hidden

        return forward

    for j, block in enumerate(blocks):
        block.forward = passthrough(j)
    try:
        run_backbone()
    finally:
        for block in blocks:
            del block.forward  # the class's forward again
    return DenseCapture(embeddings=embeddings, block_kwargs=[received])


class SetGroupScorer:
    """Log-probabilities of scored positions for every set of a group, one batch of rows at a time.

    ``model`` is the unpruned model; ``sets`` the removed sets (``()`` is the dense model).
    ``stats`` counts the blocks run (``naive_blocks``: what scoring each set on its own would run).
    """

    def __init__(self, model, sets: Iterable[Iterable[int]], head_chunk: int = 2048):
        self.model = model
        self.family = family_for(model)
        self.blocks = self.family.blocks(model)
        self.device = next(model.parameters()).device
        self.sets: list[RemovedSet] = sorted(dict.fromkeys(validate_removed(s, len(self.blocks)) for s in sets))
        if not self.sets:
            raise ValueError("a set group needs at least one removed set")
        self.head_chunk = head_chunk
        self.stats = EvaluatorStats()

    @torch.no_grad()
    def score(
        self,
        run_backbone: Callable[[], object],
        positions: torch.Tensor,
        targets: torch.Tensor,
        n_tokens: int,
        argmax: bool = True,
    ) -> dict[RemovedSet, tuple[torch.Tensor, torch.Tensor | None]]:
        """Per set: (log p(target) float64 [P], target is the argmax bool [P], or None without
        ``argmax``) at ``positions`` of the flattened [B*T] rows that ``run_backbone()`` feeds the
        model (one batch)."""
        capture = capture_block_inputs(self.model, self.family, run_backbone)
        # A zero-byte cache keeps nothing: the walk hands each node's state to its children only.
        states = PrefixStates(self.blocks, capture, StateCache(0), self.device, self.device, self.stats, n_tokens)
        scores = {}
        for key, (hidden,) in states.walk(self.sets):
            picked, is_max = [], []
            for _, chunk_picked, chunk_is_max in head_target_logprobs(
                self.model, self.family, hidden, positions, targets, self.device, self.head_chunk, argmax=argmax
            ):
                picked.append(chunk_picked.double().cpu())
                if argmax:
                    is_max.append(chunk_is_max.cpu())
            scores[key] = (torch.cat(picked), torch.cat(is_max) if argmax else None)
        self.stats.naive_blocks += sum(len(self.blocks) - len(key) for key in self.sets)
        self.stats.distinct_evaluations += len(self.sets)
        return scores

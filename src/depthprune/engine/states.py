"""Prefix states: the hidden states entering block j of pruned models (docs/method.md §5).

The state entering block ``j`` of the model without S depends only on the removed layers below
``j``, so states are cached under ``(S ∩ [0, j), j)``. The dense model's states (∅, j) come from the
dense capture and are kept with priority. A set whose smallest removed layer is k therefore starts
at block k, and sets sharing a longer removed prefix (greedy/beam steps) start from that partial
model's state. The cache is an LRU bounded in bytes, on a configurable device; an evicted state is
recomputed from its nearest cached ancestor, so a small budget costs time, never correctness or
memory.

``PrefixStates.walk`` walks a batch of sets as a trie over per-block keep/remove decisions, so each
(prefix, block) node runs once per walk however many sets share it. ``NullStateCache``
(``--no-cache``) keeps nothing and walks every request on its own: the naive cost.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from depthprune.devices import state_budget
from depthprune.engine.dense_capture import DenseCapture, State
from depthprune.engine.records import EvaluatorStats, RemovedSet

log = logging.getLogger(__name__)

StateKey = tuple[frozenset, int]  # (removed layers below j, j)


class StateCache:
    """LRU of hidden states bounded in bytes; pinned (dense) entries are evicted last."""

    def __init__(self, budget_bytes: int):
        self.budget = budget_bytes
        self.bytes = 0
        self._entries: OrderedDict[StateKey, tuple[State, int, bool]] = OrderedDict()

    def get(self, key: StateKey) -> State | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: StateKey, state: State, pinned: bool = False) -> None:
        if key in self._entries:
            return
        size = sum(t.numel() * t.element_size() for t in state)
        if size > self.budget:
            return
        self._entries[key] = (state, size, pinned)
        self.bytes += size
        while self.bytes > self.budget:
            self._evict()

    def _evict(self) -> None:
        victim = next((k for k, (_, _, p) in self._entries.items() if not p), None)
        if victim is None:
            victim = next(iter(self._entries))
        self.bytes -= self._entries.pop(victim)[1]

    def clear(self) -> None:
        """Drop every state, the dense ones too (PrefixStates.state_at then starts from the
        embeddings): frees the accelerator for CBO's gate derivatives."""
        self._entries.clear()
        self.bytes = 0

    def __iter__(self) -> Iterator[StateKey]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def dense_checkpoints(self, n_layers: int, state_bytes: int) -> set[int]:
        """Blocks j in 1..N−1 whose dense input state is kept: all of them if half the cache holds
        them, else evenly spaced ones (the others are recomputed from the nearest kept one), so the
        capture itself cannot exhaust the memory of an 8B model's tens of GiB of states."""
        fits = int(self.budget // 2 // max(state_bytes, 1))
        inner = n_layers - 1
        if fits >= inner:
            return set(range(1, n_layers))
        if fits <= 0:
            return set()
        log.warning("state cache holds %d of %d dense states; the others are recomputed when needed", fits, inner)
        return {round(x) for x in np.linspace(1, inner, fits)}

    def walks(self, keys: Sequence[RemovedSet]) -> list[list[RemovedSet]]:
        """The sets computed in one trie walk: all of them (their shared prefixes run once)."""
        return [list(keys)]


class NullStateCache(StateCache):
    """The state cache of ``--no-cache``: keeps nothing, and every request is walked on its own
    from the embeddings (repeats included), as a naive implementation would run it."""

    def __init__(self):
        super().__init__(0)

    def put(self, key: StateKey, state: State, pinned: bool = False) -> None:
        pass

    def dense_checkpoints(self, n_layers: int, state_bytes: int) -> set[int]:
        return set()

    def walks(self, keys: Sequence[RemovedSet]) -> list[list[RemovedSet]]:
        return [[key] for key in keys]


def default_state_budget(state_device: torch.device, cuda_memory=None) -> int:
    """Half of the free accelerator memory, or an eighth of RAM (at most 8 GiB) on the CPU
    (devices.state_budget; ``cuda_memory`` replaces torch.cuda.mem_get_info in tests)."""
    return state_budget(state_device, cuda_memory=cuda_memory)


class PrefixStates:
    """States of pruned models, from the dense capture through the cache; counts blocks in ``stats``."""

    def __init__(
        self,
        blocks,
        capture: DenseCapture,
        cache: StateCache,
        device: torch.device,
        state_device: torch.device,
        stats: EvaluatorStats,
        tokens_per_block: int,
    ):
        self.blocks = blocks
        self.n_layers = len(blocks)
        self.embeddings = capture.embeddings
        self.block_kwargs = capture.block_kwargs
        self.cache = cache
        self.device = device
        self.state_device = state_device
        self.stats = stats
        self.tokens_per_block = tokens_per_block
        for j, state in sorted(capture.states.items()):
            cache.put((frozenset(), j), state, pinned=True)

    def run_block(self, j: int, state: State) -> State:
        block = self.blocks[j]
        out = []
        for b, hidden in enumerate(state):
            result = block(hidden.to(self.device), **self.block_kwargs[b][j])
            out.append(result.to(self.state_device))
        self.stats.blocks_run += 1
        self.stats.tokens += self.tokens_per_block
        return out

    def state_at(self, prefix: frozenset, j: int) -> State:
        """State entering block j of the model without ``prefix`` (all < j), from the nearest cache."""
        start, state = 0, None
        for jj in range(j, -1, -1):
            state = self.cache.get((frozenset(x for x in prefix if x < jj), jj))
            if state is not None:
                start = jj
                break
        if state is None:
            start, state = 0, self.embeddings
        for k in range(start, j):
            if k in prefix:
                continue
            state = self.run_block(k, state)
            self.cache.put((frozenset(x for x in prefix if x <= k), k + 1), state)
        return state

    def walk(self, keys: Sequence[RemovedSet]) -> Iterator[tuple[RemovedSet, State]]:
        """(set, state leaving its last kept block) for each of ``keys`` (distinct), in sorted order."""
        yield from self._visit(0, frozenset(), sorted(keys), None)

    def _visit(self, j: int, prefix: frozenset, group: list[RemovedSet], state: State | None):
        if j == self.n_layers:
            (key,) = group  # sets that agree on every decision are the same set
            yield key, state if state is not None else self.state_at(prefix, j)
            return
        keep = [s for s in group if j not in s]
        drop = [s for s in group if j in s]
        if keep:
            following = self.cache.get((prefix, j + 1))
            if following is None:
                current = state if state is not None else self.state_at(prefix, j)
                following = self.run_block(j, current)
                self.cache.put((prefix, j + 1), following)
            yield from self._visit(j + 1, prefix, keep, following)
        if drop:
            yield from self._visit(j + 1, prefix | {j}, drop, state)

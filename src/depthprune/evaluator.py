"""The subset evaluator: L(S) for any removed set S, as cheaply as exactness allows (docs/method.md §5).

Three mechanisms, all exact (the same block calls on the same tensors as the plain forward pass):

1. **Memo** – a set already evaluated (in this process or, with ``memo``, by any earlier job
   sharing the SQLite file) is answered without running a block.
2. **State cache** – the hidden states entering block ``j`` of a pruned model depend only on the
   removed layers below ``j``. States are cached under ``(S ∩ [0, j), j)``; the dense model's
   states (∅, j) are computed once by the model's own forward pass and kept with priority. A set
   whose smallest removed layer is k therefore starts at block k, and sets sharing a longer
   removed prefix (greedy/beam steps) start from that partial model's state. The cache is an LRU
   bounded in bytes, on a configurable device; an evicted state is recomputed from its nearest
   cached ancestor, so a small budget costs time, never correctness or memory.
3. **Batch trie** – ``evaluate(sets)`` walks the sets as a trie over per-block keep/remove
   decisions, so each (prefix, block) node runs once per batch however many sets share it.

Blocks are called exactly as the model's forward calls them: a forward pre-hook records the keyword
arguments each block receives (attention masks, rotary embeddings for its layer type) during the
dense pass, and they are replayed. No family's forward is re-implemented here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from depthprune.calibration.objectives import Objective
from depthprune.models.families import family_for
from depthprune.models.loading import LoadedModel, dtype_name
from depthprune.models.pruning import validate_removed
from depthprune.tree_attention import TreeMaskHooks

log = logging.getLogger(__name__)

State = list  # one hidden-state tensor [B, T, H] per calibration micro-batch


@dataclass(frozen=True)
class EvalRecord:
    removed: tuple[int, ...]
    loss: float
    accuracy: float | None
    memo_hit: bool
    blocks_run: int
    seconds: float
    # Compute seconds this loss cost when it was first computed (by any job sharing the memo): a
    # search's stand-alone cost does not depend on which search happened to compute a set first.
    cost_seconds: float = 0.0


@dataclass
class EvaluatorStats:
    distinct_evaluations: int = 0
    memo_hits: int = 0
    blocks_run: int = 0
    naive_blocks: int = 0  # what running every requested set from scratch would have cost
    tokens: int = 0  # tokens pushed through blocks
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


class StateCache:
    """LRU of hidden states bounded in bytes; pinned (dense) entries are evicted last."""

    def __init__(self, budget_bytes: int):
        self.budget = budget_bytes
        self.bytes = 0
        self._entries: OrderedDict[tuple, tuple[State, int, bool]] = OrderedDict()

    def get(self, key: tuple) -> State | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: tuple, state: State, pinned: bool = False) -> None:
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

    def __len__(self) -> int:
        return len(self._entries)


def default_state_budget(state_device: torch.device) -> int:
    """Half of the free accelerator memory, or an eighth of RAM (at most 8 GiB) on the CPU."""
    if state_device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(state_device)
        return int(free * 0.5)
    try:
        import os

        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    return int(min(total // 8, 8 << 30))


# Recorded in describe() for people and for search's prior check, but no part of the memo key: a
# loss depends on the model's content (model_fingerprint), not on its spec or path, and protecting a
# layer changes which sets are allowed, not their losses.
_NOT_IN_KEY = ("model", "model_path", "protected")


def memo_key(description: dict) -> str:
    """The memo key: SHA-256 of the description without the fields in ``_NOT_IN_KEY``."""
    keyed = {k: v for k, v in description.items() if k not in _NOT_IN_KEY}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:20]


class SubsetEvaluator:
    def __init__(
        self,
        loaded: LoadedModel,
        objective: Objective,
        *,
        calibration: str,
        settings: dict | None = None,
        protected: Iterable[int] = (),
        use_cache: bool = True,
        memo_path: str | None = None,
        memo_read: bool = True,
        memo_journal: str = "wal",
        state_device: str = "auto",
        state_cache_gib: float | None = None,
        head_chunk: int = 2048,
    ):
        self.loaded = loaded
        self.model = loaded.model
        self.model.requires_grad_(False)  # only gates ever need gradients
        self.family = family_for(self.model)
        self.blocks = self.family.blocks(self.model)
        self.n_layers = len(self.blocks)
        self.objective = objective
        self.objective_kind = objective.kind
        self.calibration = calibration
        self.settings = dict(settings or {})
        self.protected = frozenset(int(p) for p in protected)
        bad = sorted(p for p in self.protected if not 0 <= p < self.n_layers)
        if bad:
            raise ValueError(f"protected_layers {bad} are outside 0..{self.n_layers - 1}")
        self.use_cache = use_cache
        self.head_chunk = head_chunk
        self.device = loaded.device
        self.state_device = self.device if state_device == "auto" else torch.device(state_device)
        budget = (
            default_state_budget(self.state_device) if state_cache_gib is None else int(state_cache_gib * (1 << 30))
        )
        self.states = StateCache(budget if use_cache else 0)
        self.stats = EvaluatorStats()
        self._memo: dict[tuple[int, ...], tuple[float, float | None, float]] = {}
        self._gate_derivatives: tuple[np.ndarray, np.ndarray] | None = None
        self._blocks_this_call = 0  # blocks run for the evaluation now in progress
        self.progress = None  # a depthprune.progress.Progress set by the caller (prior, search) to log
        self._started = time.perf_counter()
        self._tokens_per_block = objective.n_tokens
        self.config_key = memo_key(self.describe())
        self._sqlite = None
        # memo_read=False (--recompute): every loss is computed again and overwrites the stored one.
        self.memo_read = memo_read
        if memo_path and use_cache:
            from depthprune.memo import SqliteMemo

            self._sqlite = SqliteMemo(memo_path, self.config_key, self.describe(), journal=memo_journal)
        self._embeddings: State = []
        self._block_kwargs: list[list[dict]] = []  # [batch][block] -> kwargs replayed into the block
        self._dense_record = self._capture_dense()

    # ------------------------------------------------------------------ public interface
    def describe(self) -> dict:
        """Everything that changes a loss (hashed into the memo key), plus where the model came from
        and the protected layers (recorded in prior.json, checked by search; not part of the key)."""
        import transformers

        from depthprune.versions import SCORING_VERSION

        return {
            "model": self.loaded.spec,
            "model_path": self.loaded.path,
            "model_fingerprint": self.loaded.fingerprint,
            "scoring_version": SCORING_VERSION,
            "protected": sorted(self.protected),
            "calibration": self.calibration,
            "objective": self.objective_kind,
            "data_hash": self.objective.data_hash,
            "n_layers": self.n_layers,
            "dtype": dtype_name(self.loaded.dtype),
            "device_type": self.device.type,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            **{k: v for k, v in self.settings.items() if k not in ("token_budget",)},
        }

    def loss(self, removed: Iterable[int]) -> float:
        return self.evaluate([removed])[0].loss

    def evaluate(self, sets: Sequence[Iterable[int]]) -> list[EvalRecord]:
        """Records for ``sets`` in order; unseen sets are computed together through the trie."""
        keys = [validate_removed(s, self.n_layers, self.protected) for s in sets]
        if not self.use_cache:
            self.stats.naive_blocks += sum(self.n_layers - len(key) for key in keys)
            return [self._compute([key])[key] for key in keys]
        records: dict[tuple[int, ...], EvalRecord] = {}
        todo: list[tuple[int, ...]] = []
        out: list[EvalRecord] = []
        for key in keys:
            self.stats.naive_blocks += self.n_layers - len(key)
            known = self._lookup(key)
            if known is not None or key in todo:
                continue
            todo.append(key)
        if todo:
            records.update(self._compute(todo))
        seen_in_batch: set[tuple[int, ...]] = set()
        for key in keys:
            fresh = records.get(key)
            if fresh is not None and key not in seen_in_batch:
                seen_in_batch.add(key)
                out.append(fresh)
                continue
            loss, acc, cost = self._lookup(key)
            self.stats.memo_hits += 1
            if self.progress is not None:
                self.progress.step(blocks_run=self.stats.blocks_run)
            out.append(EvalRecord(key, loss, acc, memo_hit=True, blocks_run=0, seconds=0.0, cost_seconds=cost))
        return out

    @torch.no_grad()
    def sequence_logliks(self, removed: Iterable[int]) -> np.ndarray:
        """Σ log p of each scored sequence (candidate) of the objective, for the model without
        ``removed`` (float64, indexed by sequence id): what separate-sequence scoring would give."""
        key = validate_removed(removed, self.n_layers, self.protected)
        final_state = self._state_at(frozenset(key), self.n_layers)
        n_seq = 1 + max(int(b.sequence_ids.max()) for b in self.objective.batches if len(b.sequence_ids))
        sums = torch.zeros(n_seq, dtype=torch.float64)
        for b, hidden in enumerate(final_state):
            ids = self.objective.batches[b].sequence_ids
            sums.index_add_(0, ids, self._token_logprobs(b, hidden).double().cpu())
        return sums.numpy()

    def empty_record(self) -> EvalRecord:
        """L(∅), computed by the capture pass."""
        return self._dense_record

    def gate_derivatives(self) -> tuple[np.ndarray, np.ndarray]:
        """g = ∂L/∂α and H = ∂²L/∂α² at α = 1 for gated blocks h ← h + α_i f_i(h) (docs/method.md §4.6),
        computed in float32 at least (see depthprune.gate_derivatives)."""
        if self._gate_derivatives is not None:  # independent of M: every budget reuses it
            return self._gate_derivatives
        from depthprune.gate_derivatives import gate_derivatives

        grad, hess, _ = gate_derivatives(self.model, self.family, self.objective, self.device, self.head_chunk)
        self.stats.blocks_run += self.n_layers  # one gated forward pass (plus its backward passes)
        self._gate_derivatives = (grad, hess)
        return self._gate_derivatives

    # ------------------------------------------------------------------ memo
    def _lookup(self, key: tuple[int, ...]) -> tuple[float, float | None, float] | None:
        found = self._memo.get(key)
        if found is None and self._sqlite is not None and self.memo_read:
            found = self._sqlite.get(key)
            if found is not None:
                self._memo[key] = found
        return found

    def _remember(self, key: tuple[int, ...], loss: float, accuracy: float | None, seconds: float) -> None:
        if not self.use_cache:
            return  # naive mode: nothing is remembered, every request runs from scratch
        self._memo[key] = (loss, accuracy, seconds)
        if self._sqlite is not None:
            self._sqlite.put(key, loss, accuracy, seconds, replace=not self.memo_read)

    # ------------------------------------------------------------------ computation
    @torch.no_grad()
    def _capture_dense(self) -> EvalRecord:
        """Run the model's own forward once per batch, recording block inputs and kwargs.

        Only the dense states that fit in half the state cache are kept (evenly spaced; the rest
        are recomputed from the nearest kept one when needed), so the capture itself cannot exhaust
        the memory of an 8B model's tens of GiB of states.
        """
        started = time.perf_counter()
        backbone = self.family.backbone(self.model)
        final_norm = self.family.final_norm(self.model)
        keep = self._dense_checkpoints()
        dense_states: dict[int, State] = {j: [] for j in keep | {0}}
        captured: list[dict] = []
        final_states: State = []  # one state: scored after the hooks are gone (the head calls the norm)

        def block_hook(index):
            def hook(module, args, kwargs):
                if index in dense_states:
                    hidden = args[0] if args else kwargs["hidden_states"]
                    dense_states[index].append(hidden.to(self.state_device))
                captured[-1][index] = {k: v for k, v in kwargs.items() if k != "hidden_states"}

            return hook

        def norm_hook(module, args):
            final_states.append(args[0])

        # Shared-context rows: the tree mask replaces the model's mask first, so it is also what is
        # captured and replayed (hooks run in registration order).
        with tree_masks(self.model, self.family, self.blocks, self.objective.batches) as tree:
            handles = [
                blk.register_forward_pre_hook(block_hook(j), with_kwargs=True) for j, blk in enumerate(self.blocks)
            ]
            handles.append(final_norm.register_forward_pre_hook(norm_hook))
            try:
                for batch in self.objective.batches:
                    captured.append({})
                    backbone_forward(backbone, batch, self.device, tree)
            finally:
                for handle in handles:
                    handle.remove()
        self._block_kwargs = [[per_batch[j] for j in range(self.n_layers)] for per_batch in captured]
        self._embeddings = dense_states.pop(0)
        for j, state in sorted(dense_states.items()):
            self.states.put((frozenset(), j), state, pinned=True)
        loss, acc = self._loss_of_state(final_states)
        seconds = time.perf_counter() - started
        self.stats.blocks_run += self.n_layers
        self.stats.naive_blocks += self.n_layers
        self.stats.tokens += self.n_layers * self._tokens_per_block
        self.stats.distinct_evaluations += 1
        self.stats.seconds += seconds
        self._remember((), loss, acc, seconds)
        return EvalRecord(
            (), loss, acc, memo_hit=False, blocks_run=self.n_layers, seconds=seconds, cost_seconds=seconds
        )

    def _dense_checkpoints(self) -> set[int]:
        """Blocks j in 1..N−1 whose dense input state is kept: all of them if half the cache holds them."""
        if not self.use_cache:
            return set()
        hidden = self.family.text_config(self.model).hidden_size
        per_state = sum(b.input_ids.numel() for b in self.objective.batches) * hidden * self.loaded.dtype.itemsize
        fits = int(self.states.budget // 2 // max(per_state, 1))
        inner = self.n_layers - 1
        if fits >= inner:
            return set(range(1, self.n_layers))
        if fits <= 0:
            return set()
        log.warning("state cache holds %d of %d dense states; the others are recomputed when needed", fits, inner)
        return {round(x) for x in np.linspace(1, inner, fits)}

    def _run_block(self, j: int, state: State) -> State:
        block = self.blocks[j]
        out = []
        for b, hidden in enumerate(state):
            result = block(hidden.to(self.device), **self._block_kwargs[b][j])
            out.append(result.to(self.state_device))
        self.stats.blocks_run += 1
        self.stats.tokens += self._tokens_per_block
        self._blocks_this_call += 1
        return out

    def _state_at(self, prefix: frozenset, j: int) -> State:
        """State entering block j of the model without ``prefix`` (all < j), from the nearest cache."""
        start, state = 0, None
        for jj in range(j, -1, -1):
            state = self.states.get((frozenset(x for x in prefix if x < jj), jj))
            if state is not None:
                start = jj
                break
        if state is None:
            start, state = 0, self._embeddings
        for k in range(start, j):
            if k in prefix:
                continue
            state = self._run_block(k, state)
            self.states.put((frozenset(x for x in prefix if x <= k), k + 1), state)
        return state

    @torch.no_grad()
    def _compute(self, sets: list[tuple[int, ...]]) -> dict[tuple[int, ...], EvalRecord]:
        results: dict[tuple[int, ...], EvalRecord] = {}
        if not self.use_cache:
            for key in sets:  # naive: embeddings → every kept block → loss, per set
                self._blocks_this_call = 0
                started = time.perf_counter()
                state = self._embeddings
                for j in range(self.n_layers):
                    if j not in key:
                        state = self._run_block(j, state)
                results[key] = self._finish(key, state, started)
            return results

        def visit(j: int, prefix: frozenset, group: list[tuple[int, ...]], state: State | None) -> None:
            if j == self.n_layers:
                (key,) = group  # sets that agree on every decision are the same set
                if state is None:
                    state = self._state_at(prefix, j)
                results[key] = self._finish(key, state, self._started)
                self._started = time.perf_counter()
                self._blocks_this_call = 0
                return
            keep = [s for s in group if j not in s]
            drop = [s for s in group if j in s]
            if keep:
                following = self.states.get((prefix, j + 1))
                if following is None:
                    current = state if state is not None else self._state_at(prefix, j)
                    following = self._run_block(j, current)
                    self.states.put((prefix, j + 1), following)
                visit(j + 1, prefix, keep, following)
            if drop:
                visit(j + 1, prefix | {j}, drop, state)

        self._started = time.perf_counter()
        self._blocks_this_call = 0
        visit(0, frozenset(), sorted(sets), None)
        return results

    def _finish(self, key: tuple[int, ...], final_state: State, started: float) -> EvalRecord:
        loss, acc = self._loss_of_state(final_state)
        seconds = time.perf_counter() - started
        self.stats.distinct_evaluations += 1
        self.stats.seconds += seconds
        self._remember(key, loss, acc, seconds)
        if self.progress is not None:
            self.progress.step(blocks_run=self.stats.blocks_run)
        return EvalRecord(
            key, loss, acc, memo_hit=False, blocks_run=self._blocks_this_call, seconds=seconds, cost_seconds=seconds
        )

    def _token_logprobs(self, b: int, final_hidden: torch.Tensor) -> torch.Tensor:
        """log p(target) at the scored positions of batch b; the LM head runs only there."""
        return scored_logprobs(
            self.model, self.family, self.objective.batches[b], final_hidden, self.device, self.head_chunk
        )

    def _loss_of_state(self, final_state: State) -> tuple[float, float | None]:
        logprobs = [self._token_logprobs(b, hidden) for b, hidden in enumerate(final_state)]
        return self.objective.reduce(logprobs)


@torch.no_grad()
def forward_loss(model: torch.nn.Module, objective: Objective) -> tuple[float, float | None]:
    """L of ``model`` by its plain forward pass (no caches, no hooks): the reference that masked
    evaluation must reproduce, and how a physically pruned or exported model is scored."""
    family = family_for(model)
    device = next(model.parameters()).device
    logprobs = []
    with tree_masks(model, family, family.blocks(model), objective.batches) as tree:
        for batch in objective.batches:
            hidden = backbone_forward(family.backbone(model), batch, device, tree).last_hidden_state
            # last_hidden_state is already normed; apply only the head (and softcap) at scored positions.
            flat = hidden.reshape(-1, hidden.shape[-1])[batch.flat_positions.to(device)]
            logits = family.head_logits(model, flat)
            lp = torch.log_softmax(logits.float(), dim=-1).gather(1, batch.targets.to(device)[:, None]).squeeze(1)
            logprobs.append(lp)
    return objective.reduce(logprobs)


def scored_logprobs(model, family, batch, final_hidden: torch.Tensor, device, head_chunk: int) -> torch.Tensor:
    """log p(target) at ``batch``'s scored positions, the LM head run only there, in chunks;
    log-softmax in at least float32 (float64 stays). Differentiable: gate derivatives use it too."""
    flat = final_hidden.reshape(-1, final_hidden.shape[-1])
    positions = batch.flat_positions.to(flat.device)
    targets = batch.targets.to(device)
    pieces = []
    for start in range(0, len(positions), head_chunk):
        logits = family.logits(model, flat[positions[start : start + head_chunk]].to(device))
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
        pieces.append(torch.log_softmax(logits, dim=-1).gather(1, targets[start : start + head_chunk, None]).squeeze(1))
    return torch.cat(pieces)


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

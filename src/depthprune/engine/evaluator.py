"""The subset evaluator: L(S) for any removed set S, as cheaply as exactness allows (docs/method.md §5).

Three mechanisms, all exact (the same block calls on the same tensors as the plain forward pass),
each in its own module of this package:

1. **Memo** (``memo``) – a set already evaluated (in this process or, with ``memo_path``, by any
   earlier job sharing the SQLite file) is answered without running a block.
2. **State cache** (``states``) – states entering block j are cached under (S ∩ [0, j), j),
   starting from the dense states of one capture pass (``dense_capture``).
3. **Batch trie** (``states.PrefixStates.walk``) – each (prefix, block) node of a batch runs once.

The LM head runs only at scored positions (``scoring``). ``use_cache=False`` (``--no-cache``) swaps
in the null memo and null state cache: every request runs from the embeddings on its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence

import numpy as np
import torch

from depthprune.allocator import give_back_free_memory
from depthprune.calibration.objectives import Objective
from depthprune.devices import release_cached_memory
from depthprune.engine.dense_capture import State, capture_dense
from depthprune.engine.memo import Memo, NullMemo, SqliteMemo, memo_key
from depthprune.engine.records import EvalRecord, Evaluator, EvaluatorStats, GateDerivatives, MemoEntry, RemovedSet
from depthprune.engine.scoring import scored_logprobs
from depthprune.engine.states import NullStateCache, PrefixStates, StateCache, default_state_budget
from depthprune.errors import InputError
from depthprune.models.families import family_for
from depthprune.models.loading import LoadedModel, dtype_name
from depthprune.models.pruning import validate_removed

log = logging.getLogger(__name__)


class SubsetEvaluator(Evaluator):
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
            raise InputError(f"protected_layers {bad} are outside 0..{self.n_layers - 1}")
        self.head_chunk = head_chunk
        self.device = loaded.device
        self.stats = EvaluatorStats()
        self.progress = None  # a depthprune.progress.Progress set by the caller (prior, search) to log
        # Seconds the derivatives cost when some earlier call or job computed them, if the last
        # gate_derivatives() read them from the memo; 0 if that call computed them (its wall time).
        self.gate_derivatives_memo_seconds = 0.0
        self._fisher_rows: np.ndarray | None = None  # CBO's per-sample gate gradients (gate_fisher_rows)
        self.config_key = memo_key(self.describe())
        state_device = self.device if state_device == "auto" else torch.device(state_device)
        if use_cache:
            budget = default_state_budget(state_device) if state_cache_gib is None else int(state_cache_gib * (1 << 30))
            cache = StateCache(budget)
            sqlite = SqliteMemo(memo_path, self.config_key, self.describe(), memo_journal) if memo_path else None
            # memo_read=False (--recompute): every loss is computed again and overwrites the stored one.
            self.memo = Memo(sqlite, read_sqlite=memo_read)
        else:
            cache, self.memo = NullStateCache(), NullMemo()
        self._dense_record = self._capture_dense(cache, state_device)

    def _capture_dense(self, cache: StateCache, state_device: torch.device) -> EvalRecord:
        """L(∅) by one forward pass of the model, whose dense states seed the state cache."""
        started = time.perf_counter()
        hidden = self.family.text_config(self.model).hidden_size
        state_bytes = sum(b.input_ids.numel() for b in self.objective.batches) * hidden * self.loaded.dtype.itemsize
        keep = cache.dense_checkpoints(self.n_layers, state_bytes)
        self.capture = capture_dense(self.model, self.family, self.objective.batches, self.device, state_device, keep)
        n_tokens = self.objective.n_tokens
        self.states = PrefixStates(self.blocks, self.capture, cache, self.device, state_device, self.stats, n_tokens)
        self.stats.blocks_run += self.n_layers
        self.stats.naive_blocks += self.n_layers
        self.stats.tokens += self.n_layers * n_tokens
        return self._finish((), self.capture.final, started, self.n_layers)

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
            "calibration_tokens": self.objective.n_tokens,  # real tokens of the calibration rows
            "n_layers": self.n_layers,
            "dtype": dtype_name(self.loaded.dtype),
            "device_type": self.device.type,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            **{k: v for k, v in self.settings.items() if k not in ("token_budget",)},
        }

    def evaluate(self, sets: Sequence[Iterable[int]]) -> list[EvalRecord]:
        """Records for ``sets`` in order; unseen sets are computed together through the trie."""
        keys = [validate_removed(s, self.n_layers, self.protected) for s in sets]
        self.stats.naive_blocks += sum(self.n_layers - len(key) for key in keys)
        records = [record for walk in self.states.cache.walks(keys) for record in self._evaluate_walk(walk)]
        give_back_free_memory()  # bounds a long search's heap when freed memory is kept
        return records

    def _evaluate_walk(self, keys: list[RemovedSet]) -> list[EvalRecord]:
        """The sets of one trie walk: each unseen set computed once, the others (and repeats) from the memo."""
        fresh = self._compute(list(dict.fromkeys(key for key in keys if self.memo.get(key) is None)))
        return [fresh.pop(key) if key in fresh else self._memo_hit(key) for key in keys]

    def recompute(self, sets: Sequence[Iterable[int]]) -> list[EvalRecord]:
        """Records for ``sets``, every one computed again whatever the memo holds (it keeps totals;
        a prior that keeps per-item losses needs them computed)."""
        keys = [validate_removed(s, self.n_layers, self.protected) for s in sets]
        records = {}
        for walk in self.states.cache.walks(keys):
            records.update(self._compute(list(dict.fromkeys(walk))))
        give_back_free_memory()
        return [records[key] for key in keys]

    @torch.no_grad()
    def sequence_logliks(self, removed: Iterable[int]) -> np.ndarray:
        """Σ log p of each scored sequence (candidate) of the objective, for the model without
        ``removed`` (float64, indexed by sequence id): what separate-sequence scoring would give."""
        key = validate_removed(removed, self.n_layers, self.protected)
        final_state = self.states.state_at(frozenset(key), self.n_layers)
        n_seq = 1 + max(int(b.sequence_ids.max()) for b in self.objective.batches if len(b.sequence_ids))
        sums = torch.zeros(n_seq, dtype=torch.float64)
        for b, hidden in enumerate(final_state):
            sums.index_add_(0, self.objective.batches[b].sequence_ids, self.logprobs(b, hidden).double().cpu())
        return sums.numpy()

    def empty_record(self) -> EvalRecord:
        """L(∅), computed by the capture pass."""
        return self._dense_record

    def gate_fisher_rows(self) -> np.ndarray:
        """A (m, N): per calibration sample, the gradient of its loss with respect to Jansen et al.'s
        block gates at α = 1 (engine/gate_fisher.py). Independent of M: computed once per evaluator."""
        if self._fisher_rows is None:
            from depthprune.engine.gate_fisher import fisher_rows

            self._fisher_rows = fisher_rows(self.model, self.family, self.objective, self.device, self.head_chunk)
            self.stats.blocks_run += self.n_layers  # one gated forward pass per row (plus one backward per sample)
        return self._fisher_rows

    def gate_derivatives(self, method: str = "full_graph") -> tuple[np.ndarray, np.ndarray]:
        """g = ∂L/∂α and H = ∂²L/∂α² at α = 1 for gated blocks h ← h + α_i f_i(h)
        (docs/method.md §4.6), computed in float32 at least by ``method`` (engine/gate_derivatives.py).
        They do not depend on M: the memo keeps them, so every budget's CBO reuses one computation
        (whichever method computed them: the two agree to float32's resolution)."""
        stored = self.memo.get_derivatives()
        if stored is not None:
            self.gate_derivatives_memo_seconds = stored.cost_seconds
            log.info("gate derivatives (%s) from the memo (they cost %.1fs)", stored.dtype, stored.cost_seconds)
            return stored.grad, stored.hess
        from depthprune.engine.gate_derivatives import gate_derivatives

        if method == "blockwise":
            # The memory-bound path frees the state cache first (up to half the GPU, dense states
            # included): the float32 copy and the block-local graphs need the room at 8B; later
            # evaluations rebuild the states they need from the embeddings.
            self.states.cache.clear()
            release_cached_memory(self.device)
        started = time.perf_counter()
        grad, hess, dtype = gate_derivatives(
            self.model, self.family, self.objective, self.device, self.head_chunk, method=method
        )
        self.stats.blocks_run += self.n_layers  # one gated forward pass (plus its backward passes)
        self.memo.put_derivatives(GateDerivatives(grad, hess, dtype_name(dtype), time.perf_counter() - started))
        self.gate_derivatives_memo_seconds = 0.0
        return grad, hess

    def logprobs(self, b: int, final_hidden: torch.Tensor) -> torch.Tensor:
        """log p(target) at the scored positions of batch b, from the state leaving the last kept block."""
        batch = self.objective.batches[b]
        return scored_logprobs(self.model, self.family, batch, final_hidden, self.device, self.head_chunk)

    @torch.no_grad()
    def _compute(self, keys: list[RemovedSet]) -> dict[RemovedSet, EvalRecord]:
        records: dict[RemovedSet, EvalRecord] = {}
        started, blocks_before = time.perf_counter(), self.stats.blocks_run
        for key, final_state in self.states.walk(keys):
            records[key] = self._finish(key, final_state, started, self.stats.blocks_run - blocks_before)
            started, blocks_before = time.perf_counter(), self.stats.blocks_run
        return records

    @torch.no_grad()
    def _finish(self, key: RemovedSet, final_state: State, started: float, blocks_run: int) -> EvalRecord:
        loss, acc, items = self.objective.scores([self.logprobs(b, hidden) for b, hidden in enumerate(final_state)])
        seconds = time.perf_counter() - started
        self.stats.distinct_evaluations += 1
        self.stats.seconds += seconds
        self.memo.put(key, MemoEntry(loss, acc, seconds))
        self._step()
        return EvalRecord(
            key, loss, acc, memo_hit=False, blocks_run=blocks_run, seconds=seconds, cost_seconds=seconds, items=items
        )

    def _memo_hit(self, key: RemovedSet) -> EvalRecord:
        loss, acc, cost = self.memo.get(key)
        self.stats.memo_hits += 1
        self._step()
        return EvalRecord(key, loss, acc, memo_hit=True, blocks_run=0, seconds=0.0, cost_seconds=cost)

    def _step(self) -> None:
        if self.progress is not None:
            self.progress.step(blocks_run=self.stats.blocks_run)

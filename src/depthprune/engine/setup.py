"""One evaluator setup: how the subset evaluator runs (micro-batch size, caches, memo, protected
blocks), in one frozen object built once at the CLI's edge (``cli_common.evaluator_setup``) and
passed down, as ``CalibrationSetup`` is for the calibration and ``ModelSetup`` for the model.

``check`` refuses everything about the three setups that can be wrong before the model is loaded
(an 8B model takes minutes) and returns the calibration sample; ``build`` puts model, objective and
evaluator together. A light module: torch only when an evaluator is built.
"""

from __future__ import annotations

from dataclasses import dataclass

from depthprune.budgets import check_protected, protected_blocks
from depthprune.calibration.setup import CalibrationSetup
from depthprune.errors import InputError
from depthprune.io import parse_layers
from depthprune.models.setup import ModelSetup


@dataclass(frozen=True)
class EvaluatorSetup:
    token_budget: int = 16384  # max padded tokens per forward micro-batch (--token-budget)
    state_device: str = "auto"  # where cached hidden states live (--state-device)
    state_cache_gib: float | None = None  # state cache size; None: from the free memory (--state-cache-gib)
    memo: str | None = None  # the SQLite memo shared by searches (--memo); None: in memory only
    no_cache: bool = False  # naive mode: every set from scratch, no memo (--no-cache)
    protected: str = ""  # layers never removed, as the user wrote them (--protected, e.g. "0 29")
    protect: str = "none"  # budgets.PROTECT_MODES: boundary also protects the first and last block
    memo_journal: str = "wal"  # SQLite journal of the memo: wal or delete (--memo-journal)
    recompute: bool = False  # compute again without reading the memo (--recompute)

    def protected_for(self, n_layers: int) -> tuple[int, ...]:
        """``protected`` plus what ``protect`` adds (boundary: blocks 0 and n_layers − 1), for a model of
        ``n_layers`` blocks: the one protected set every search, the prior and the evaluator use."""
        layers = parse_layers(self.protected)
        check_protected(layers, n_layers)
        return protected_blocks(layers, self.protect, n_layers)

    def batch_tokens(self, seq_len: int) -> int:
        """Padded tokens per forward micro-batch: ``token_budget``, at least one sequence."""
        return max(self.token_budget, seq_len)

    def check(self, model: ModelSetup, calibration: CalibrationSetup, n_layers: int | None = None):
        """Everything about the setups that can be wrong, checked before any model is loaded: sizes,
        protected layers (for ``n_layers`` blocks; None: the model's config file says, if it can), and
        the data itself (read, sampled and parsed; errors name file, 1-based line and field). Returns
        the calibration sample for ``build``."""
        calibration.check_sizes()
        if self.token_budget < 1:
            raise InputError(f"--token-budget must be positive (got {self.token_budget})")
        if not self.no_cache:
            from depthprune.engine.memo import check_memo_file

            check_memo_file(self.memo)  # a corrupt memo: one line naming it, not a traceback after the load
        known_layers = n_layers if n_layers is not None else model.layers_without_loading()
        if known_layers is None:
            check_protected(parse_layers(self.protected), None)
        else:
            self.protected_for(known_layers)
        return calibration.load_samples()

    def build(self, model: ModelSetup, calibration: CalibrationSetup, loaded=None, samples=None):
        """Model + calibration objective + evaluator (``loaded``: the model if already loaded;
        ``samples``: from ``check``, which reads and checks the data before the model is loaded)."""
        from depthprune.engine.evaluator import SubsetEvaluator
        from depthprune.models.families import family_for
        from depthprune.seeding import seed_everything

        seed_everything(calibration.seed)
        if samples is None:
            samples = self.check(model, calibration)
        loaded = loaded or model.load()
        objective = calibration.build_objective(loaded.tokenizer, self.batch_tokens(calibration.seq_len), samples)
        return SubsetEvaluator(
            loaded,
            objective,
            calibration=calibration.name,
            settings=calibration.record(),
            protected=self.protected_for(len(family_for(loaded.model).blocks(loaded.model))),
            use_cache=not self.no_cache,
            memo_path=self.memo,
            memo_read=not self.recompute,
            memo_journal=self.memo_journal,
            state_device=self.state_device,
            state_cache_gib=self.state_cache_gib,
        )

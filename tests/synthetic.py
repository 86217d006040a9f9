"""A synthetic subset evaluator with a known objective, for the tests (``from synthetic import ...``).

L(S) = base + Σ_{i∈S} u_i + Σ_{i<j∈S} P_ij: additive when P = 0, with pairwise interactions
otherwise. It implements the evaluator interface (depthprune.engine.records.Evaluator: evaluate,
loss, n_layers, protected, stats, gate_derivatives, gate_fisher_rows, describe) with the engine's
records, stats and in-memory memo, so the search algorithms run on it unchanged, and no torch is
imported. In gate space (α = 1 − x) the objective is exactly quadratic: g = ∂L/∂α = −u and
H = ∂²L/∂α² = P, so ``cbo_taylor``'s energy −gᵀx + ½xᵀHx equals L(S) − L(∅). Its one calibration
sample's gate gradient is −u, so ``cbo``'s Fisher energy is (uᵀx)²: with P = 0 a monotone function
of L(S) − L(∅), which it ranks exactly.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from depthprune.engine.memo import Memo
from depthprune.engine.records import EvalRecord, Evaluator, EvaluatorStats, MemoEntry
from depthprune.io import parse_layers


@dataclass
class SyntheticEvaluator(Evaluator):
    unary: np.ndarray
    pairwise: np.ndarray | None = None
    base: float = 1.0
    protected: frozenset[int] = frozenset()
    objective_kind: str = "perplexity"
    delay: float = 0.0  # seconds of sleep per computed (non-memo) evaluation, to simulate cost
    stats: EvaluatorStats = field(default_factory=EvaluatorStats)

    def __post_init__(self) -> None:
        self.unary = np.asarray(self.unary, dtype=np.float64)
        n = len(self.unary)
        pairwise = np.zeros((n, n)) if self.pairwise is None else np.asarray(self.pairwise, dtype=np.float64)
        pairwise = np.triu(pairwise, 1)
        self.pairwise = pairwise + pairwise.T  # symmetric, zero diagonal
        self.protected = frozenset(int(i) for i in self.protected)
        self.memo = Memo()
        self.gate_derivative_calls = 0

    @property
    def n_layers(self) -> int:
        return len(self.unary)

    def true_loss(self, removed: Iterable[int]) -> float:
        idx = list(parse_layers(removed))
        return float(self.base + self.unary[idx].sum() + 0.5 * self.pairwise[np.ix_(idx, idx)].sum())

    def evaluate(self, sets: Sequence[Iterable[int]]) -> list[EvalRecord]:
        records = []
        for s in sets:
            key = parse_layers(s)
            bad = [i for i in key if i < 0 or i >= self.n_layers or i in self.protected]
            if bad or len(set(key)) != len(key):
                raise ValueError(f"removed set {key}: layers {bad} are protected or outside [0, {self.n_layers})")
            start = time.perf_counter()
            naive = self.n_layers - len(key)
            self.stats.naive_blocks += naive
            hit = key in self.memo
            if not hit:
                if self.delay:
                    time.sleep(self.delay)
                loss = self.true_loss(key)
                accuracy = 1.0 / (1.0 + loss - self.base) if self.objective_kind == "tlm" else None
                self.memo.put(key, MemoEntry(loss, accuracy, time.perf_counter() - start))
                self.stats.distinct_evaluations += 1
                self.stats.blocks_run += naive
            else:
                self.stats.memo_hits += 1
            loss, accuracy, cost = self.memo.get(key)  # a hit reports what the set cost when computed
            seconds = time.perf_counter() - start
            self.stats.seconds += seconds
            records.append(EvalRecord(key, loss, accuracy, hit, 0 if hit else naive, seconds, cost_seconds=cost))
        return records

    def gate_derivatives(self, method: str = "full_graph") -> tuple[np.ndarray, np.ndarray]:
        self.gate_derivative_calls += 1
        return -self.unary.copy(), self.pairwise.copy()

    def gate_fisher_rows(self) -> np.ndarray:
        return -self.unary[None, :].copy()  # one sample: ∂L/∂α, whatever P (the first order only)

    def describe(self) -> dict:
        return {"model": "synthetic", "n_layers": self.n_layers, "objective_kind": self.objective_kind}

    def prior(self) -> np.ndarray:
        """s_i = L({i}) for every layer (NaN for protected ones), as `depthprune prior` computes it."""
        return np.array([np.nan if i in self.protected else self.true_loss([i]) for i in range(self.n_layers)])


def random_objective(
    n_layers: int,
    seed: int,
    interaction: float = 0.0,
    protected: Iterable[int] = (),
    **kwargs,
) -> SyntheticEvaluator:
    """Positive unary costs in [0.1, 1.1) plus, if ``interaction`` > 0, pair terms N(0, interaction²)."""
    rng = np.random.default_rng(seed)
    unary = 0.1 + rng.random(n_layers)
    pairwise = interaction * rng.standard_normal((n_layers, n_layers)) if interaction else None
    return SyntheticEvaluator(unary, pairwise, protected=frozenset(protected), **kwargs)

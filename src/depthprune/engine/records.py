"""What a subset evaluator answers, and the interface the prior and the searches rely on.

No torch import: the tests' synthetic evaluator (tests/synthetic.py) and other tests reuse these without
loading a model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

RemovedSet = tuple[int, ...]  # sorted layer indices


class ItemScores(NamedTuple):
    """A TLM loss item by item (Objective.item_scores): L = mean(losses), accuracy = mean(correct)."""

    losses: np.ndarray  # float64, one per item, in draw order
    correct: np.ndarray  # bool: the gold candidate has the highest mean log-probability


@dataclass(frozen=True)
class EvalRecord:
    removed: RemovedSet
    loss: float
    accuracy: float | None  # TLM calibration accuracy; None for perplexity
    memo_hit: bool
    blocks_run: int  # 0 on a memo hit
    seconds: float
    # Compute seconds this loss cost when it was first computed (by any job sharing the memo): a
    # search's stand-alone cost does not depend on which search happened to compute a set first.
    cost_seconds: float = 0.0
    # TLM, when the set was computed in this process (not on a memo hit): its loss item by item
    items: ItemScores | None = None


class MemoEntry(NamedTuple):
    """What the memo keeps of a computed set (equal to the plain tuple it replaced)."""

    loss: float
    accuracy: float | None
    cost_seconds: float


class GateDerivatives(NamedTuple):
    """CBO's gate derivatives (docs/method.md §4.6) as the memo keeps them."""

    grad: np.ndarray  # g = ∂L/∂α, shape N
    hess: np.ndarray  # H = ∂²L/∂α², N × N
    dtype: str  # the dtype they were computed in (float32 at least)
    cost_seconds: float  # what computing them cost, charged to every search that reads them


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


@runtime_checkable
class Evaluator(Protocol):
    """The subset-evaluator interface of docs/architecture.md, met by ``SubsetEvaluator`` (the
    model), ``SyntheticEvaluator`` (a known objective) and ``TracingEvaluator`` (a search's view).
    A class that names it as a base inherits ``loss``."""

    n_layers: int
    protected: frozenset[int]
    objective_kind: str  # "perplexity" | "tlm"
    stats: EvaluatorStats

    def evaluate(self, sets: Sequence[Iterable[int]]) -> list[EvalRecord]:
        """Records for ``sets`` in order (a batch: the evaluator may share work inside it)."""
        ...

    def gate_derivatives(self, method: str = "full_graph") -> tuple[np.ndarray, np.ndarray]:
        """g = ∂L/∂α (shape N) and H = ∂²L/∂α² (N × N) at α = 1 (docs/method.md §4.6), computed by
        ``method`` (engine/gate_derivatives.py:DERIVATIVE_METHODS; the same values)."""
        ...

    def gate_fisher_rows(self) -> np.ndarray:
        """A (samples × N): per calibration sample, the gradient of its loss with respect to Jansen et
        al.'s block gates at α = 1 (docs/method.md §4.6; engine/gate_fisher.py)."""
        ...

    def describe(self) -> dict:
        """Everything that changes a loss, plus where the model came from."""
        ...

    def loss(self, removed: Iterable[int]) -> float:
        return self.evaluate([removed])[0].loss

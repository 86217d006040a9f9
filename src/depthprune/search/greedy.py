"""Greedy iterative pruning (SLEB, docs/method.md §4.2): grow the removed set one layer at a time.

Each step evaluates S ∪ {i} for every remaining allowed layer i, all in one batch (the evaluator
shares the prefix S between them), and keeps the best. Cost: Σ_{t<M} (N' − t) evaluations.
"""

from __future__ import annotations

from depthprune.io import parse_layers
from depthprune.search.base import SearchAlgorithm, SearchProblem, record_key


def extend(removed: tuple[int, ...], allowed: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Every set one allowed layer larger than ``removed``."""
    return [parse_layers(removed + (i,)) for i in allowed if i not in removed]


class Greedy(SearchAlgorithm):
    name = "greedy"
    display_name = "Greedy"
    marker = "s"  # matplotlib marker in the figures
    defaults: dict = {}

    def expected_requests(self, n_allowed: int, budget: int, params: dict) -> int:
        return sum(n_allowed - t for t in range(budget))

    def uses_prior(self, params: dict) -> bool:
        return False  # its first step evaluates the single-layer sets itself (memo hits, charged as such)

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        current: tuple[int, ...] = ()
        for _ in range(problem.budget):
            records = problem.evaluator.evaluate(extend(current, problem.allowed))
            current = parse_layers(min(records, key=record_key).removed)
        return current

"""One-shot pruning: remove the M layers whose single-layer ablation hurts least (docs/method.md §4.1).

Cost: the prior only (plus the one evaluation of the chosen set that reports its loss).
"""

from __future__ import annotations

from depthprune.search.base import SearchAlgorithm, SearchProblem


class OneShot(SearchAlgorithm):
    name = "one_shot"
    display_name = "One-shot"
    marker = "o"  # matplotlib marker in the figures
    defaults: dict = {}

    def expected_requests(self, n_allowed: int, budget: int, params: dict) -> int:
        return 1  # the prior's top M, evaluated by the runner to report its loss

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        return problem.prior_top()

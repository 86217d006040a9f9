"""Beam search (docs/method.md §4.3): greedy growth that keeps the B best sets of each size.

Each step extends every beam by one allowed layer, deduplicates the candidates as sets, evaluates
them in one batch and keeps the B lowest losses (ties broken by the sorted set). With B = 1 this is
greedy.
"""

from __future__ import annotations

from depthprune.errors import InputError
from depthprune.io import parse_layers
from depthprune.search.base import POSITIVE, SearchAlgorithm, SearchProblem, record_key
from depthprune.search.greedy import extend


class Beam(SearchAlgorithm):
    name = "beam"
    display_name = "Beam"
    marker = "^"  # matplotlib marker in the figures
    defaults = {"beam_width": 5}
    ranges = {"beam_width": POSITIVE}

    requests_exact = False  # extensions of different beams can coincide (each is requested once)

    def expected_requests(self, n_allowed: int, budget: int, params: dict) -> int:
        # At most: the first step extends ∅; each later one extends beam_width sets (duplicates merge).
        return n_allowed + sum(params["beam_width"] * (n_allowed - t) for t in range(1, budget))

    def uses_prior(self, params: dict) -> bool:
        return False  # its first step evaluates the single-layer sets itself (memo hits, charged as such)

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        width = params["beam_width"]
        if width < 1:
            raise InputError(f"search algorithm 'beam': beam_width must be at least 1, got {width}")
        beams: list[tuple[int, ...]] = [()]
        for _ in range(problem.budget):
            # Sorted: deterministic, and sets sharing a removed prefix sit next to each other.
            candidates = sorted({c for b in beams for c in extend(b, problem.allowed)})
            records = sorted(problem.evaluator.evaluate(candidates), key=record_key)
            beams = [parse_layers(r.removed) for r in records[:width]]
        return beams[0]

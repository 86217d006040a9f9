"""Exhaustive search: every M-subset of the removable layers, the true optimum as ground truth.

Not one of the paper's seven searches: it answers how far they are from the optimum of Eq. (1)
where C(N', M) is affordable (docs/method.md §4). Subsets are generated in lexicographic order,
which is a depth-first walk of the keep/remove trie, and sent to the evaluator in batches of
``batch_size``: inside a batch the evaluator's trie runs each shared (prefix, block) node once,
and consecutive batches continue from the prefix states its cache still holds. Above ``max_sets``
subsets the search refuses to start, with an error naming that parameter.
"""

from __future__ import annotations

import itertools
import logging
import math

from tqdm.auto import tqdm

from depthprune.errors import InputError
from depthprune.io import parse_layers
from depthprune.search.base import POSITIVE, SearchAlgorithm, SearchProblem, record_key

log = logging.getLogger(__name__)


class Exhaustive(SearchAlgorithm):
    name = "exhaustive"
    display_name = "Exhaustive"
    marker = "p"  # matplotlib marker in the figures
    in_paper = False  # a control: kept out of the statistics behind the paper's claims
    defaults = {"max_sets": 10_000, "batch_size": 256}
    ranges = {"max_sets": POSITIVE, "batch_size": POSITIVE}

    def expected_requests(self, n_allowed: int, budget: int, params: dict) -> int:
        return math.comb(n_allowed, budget)

    def uses_prior(self, params: dict) -> bool:
        return False

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        if params["batch_size"] < 1:
            raise InputError(
                f"search algorithm 'exhaustive': batch_size must be at least 1, got {params['batch_size']}"
            )
        n_sets = count_subsets(problem)
        if n_sets > params["max_sets"]:
            raise InputError(
                f"search algorithm 'exhaustive': C({len(problem.allowed)}, {problem.budget}) = {n_sets} subsets "
                f"exceed max_sets={params['max_sets']}; raise the parameter max_sets "
                f"(--param max_sets={n_sets}, or search_params.exhaustive.max_sets) to enumerate them"
            )
        log.info("exhaustive: %d subsets of %d removable layers, M=%d", n_sets, len(problem.allowed), problem.budget)
        subsets = itertools.combinations(problem.allowed, problem.budget)
        best = None
        with tqdm(total=n_sets, desc="exhaustive subsets", leave=False, disable=None) as progress:
            while batch := list(itertools.islice(subsets, params["batch_size"])):
                for record in problem.evaluator.evaluate(batch):
                    if best is None or record_key(record) < record_key(best):
                        best = record
                progress.update(len(batch))
        problem.diagnostics["subsets"] = n_sets
        return parse_layers(best.removed)


def count_subsets(problem: SearchProblem) -> int:
    return math.comb(len(problem.allowed), problem.budget)

"""The seven layer-subset search algorithms (spec §4), one module each, and their registry."""

from __future__ import annotations

from depthprune.search.base import SearchAlgorithm, SearchProblem, TracingEvaluator
from depthprune.search.beam import Beam
from depthprune.search.bo import BayesianOptimisation
from depthprune.search.cbo import ConstrainedBinaryOptimisation
from depthprune.search.fast_block_select import FastBlockSelect
from depthprune.search.ga import GeneticAlgorithm
from depthprune.search.greedy import Greedy
from depthprune.search.one_shot import OneShot

# In the paper's order (figures and tables list the algorithms this way).
ALGORITHMS: dict[str, type[SearchAlgorithm]] = {
    cls.name: cls
    for cls in (
        OneShot,
        Greedy,
        Beam,
        GeneticAlgorithm,
        BayesianOptimisation,
        ConstrainedBinaryOptimisation,
        FastBlockSelect,
    )
}


def get_algorithm(name: str) -> SearchAlgorithm:
    try:
        return ALGORITHMS[name]()
    except KeyError:
        raise ValueError(f"unknown search algorithm {name!r} (known: {', '.join(ALGORITHMS)})") from None


__all__ = ["ALGORITHMS", "SearchAlgorithm", "SearchProblem", "TracingEvaluator", "get_algorithm"]

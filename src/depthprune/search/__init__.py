"""The layer-subset search algorithms (docs/method.md §4), one module each, and their registry.

The paper's seven, in its order, then the random-initialisation controls of GA and BO (the paper's
limitation 2), CBO's controls (its second-order expansion, issue 67, and its exact pairs, issue 56) and the exhaustive ground truth (not in the
default study: it is affordable for small M only)."""

from __future__ import annotations

from depthprune.errors import InputError
from depthprune.search.base import SearchAlgorithm, SearchProblem, TracingEvaluator
from depthprune.search.beam import Beam
from depthprune.search.bo import BayesianOptimisation, RandomInitBayesianOptimisation
from depthprune.search.cbo import ConstrainedBinaryOptimisation, ExactPairsCBO, TaylorCBO
from depthprune.search.exhaustive import Exhaustive
from depthprune.search.fast_block_select import FastBlockSelect
from depthprune.search.ga import GeneticAlgorithm, RandomInitGeneticAlgorithm
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
        RandomInitGeneticAlgorithm,
        RandomInitBayesianOptimisation,
        TaylorCBO,
        ExactPairsCBO,
        Exhaustive,
    )
}
# The searches of a study by default (everything but the exhaustive ground truth).
STUDY_ALGORITHMS: tuple[str, ...] = tuple(name for name in ALGORITHMS if name != "exhaustive")


def get_algorithm(name: str) -> SearchAlgorithm:
    try:
        return ALGORITHMS[name]()
    except KeyError:
        raise InputError(f"unknown search algorithm {name!r} (known: {', '.join(ALGORITHMS)})") from None


__all__ = ["ALGORITHMS", "STUDY_ALGORITHMS", "SearchAlgorithm", "SearchProblem", "TracingEvaluator", "get_algorithm"]

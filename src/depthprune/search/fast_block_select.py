"""Fast block select (after MI-Prun; spec §4.7), with the unified loss and history tracking.

Layers are ranked by the prior s_i. The prune pool P starts as the top M, the alternative pool A as
the next M. Each iteration:

1. forms every contiguous run of layers inside P ∪ A and each of its sub-runs of length 1..M
   ("groups"), scores each group from the prior, and evaluates the true loss of the ``top_k`` best
   groups (one batch);
2. greedily assembles non-overlapping groups of total size M in order of true loss increase per
   removed layer, (L(G) − L(∅)) / |G|, filling any shortfall with the best remaining layers by s_i;
3. evaluates the assembled set; P becomes that set and A the next M layers by s_i outside P;
   the loop stops when P does not change or after ``max_iters`` iterations.

History tracking (paper §4.2): the best M-set ever evaluated, including the starting P, is returned,
so refinement never ends worse than where it started.

Choice: group scores use the increase over the dense model, Δs_i = s_i − L(∅). With
``group_score: per_layer`` (default) a group scores mean(Δs_i), on the same per-layer footing as the
assembly step; ``group_score: sum`` scores Σ Δs_i as the spec's literal wording. Because Δs_i is
almost always positive, a sum ranks every group below its own members, so the top-k would be single
layers only and the search would collapse to one-shot; the per-layer score lets contiguous blocks,
whose joint removal is where non-additivity shows, reach the evaluation.
"""

from __future__ import annotations

import logging

import numpy as np

from depthprune.search.base import POSITIVE, SearchAlgorithm, SearchProblem, loss_key, normalise_set, record_key

log = logging.getLogger(__name__)


class FastBlockSelect(SearchAlgorithm):
    name = "fast_block_select"
    defaults = {"max_iters": 10, "top_k": 8, "group_score": "per_layer"}
    choices = {"group_score": ("per_layer", "sum")}
    ranges = {"max_iters": POSITIVE, "top_k": POSITIVE}

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        if params["top_k"] < 1 or params["max_iters"] < 1:
            raise ValueError("search algorithm 'fast_block_select': top_k and max_iters must be at least 1")
        budget, ranking, ev = problem.budget, problem.ranking, problem.evaluator
        prune = problem.prior_top()
        dense, start = ev.evaluate([(), prune])
        increase = problem.prior - dense.loss  # Δs_i; NaN for protected layers, never used
        best = start
        for iteration in range(params["max_iters"]):
            alternative = next_layers(ranking, prune, budget)
            groups = contiguous_groups(sorted(set(prune) | set(alternative)), budget)
            groups.sort(key=lambda g: loss_key(group_score(increase, g, params["group_score"]), g))
            records = ev.evaluate(groups[: params["top_k"]])
            per_layer = {normalise_set(r.removed): (r.loss - dense.loss) / len(r.removed) for r in records}
            candidate = assemble(per_layer, ranking, budget)
            record = ev.evaluate([candidate])[0]
            for r in records + [record]:  # a group of size M is a candidate as well
                if len(r.removed) == budget and record_key(r) < record_key(best):
                    best = r
            log.debug("fast_block_select: iteration %d set %s loss %.6g", iteration, candidate, record.loss)
            if candidate == prune:
                break
            prune = candidate
        return normalise_set(best.removed)


def next_layers(ranking: tuple[int, ...], exclude: tuple[int, ...], count: int) -> tuple[int, ...]:
    """The first ``count`` layers of ``ranking`` that are not in ``exclude``."""
    excluded = set(exclude)
    return tuple([i for i in ranking if i not in excluded][:count])


def contiguous_groups(pool: list[int], max_len: int) -> list[tuple[int, ...]]:
    """Every run of consecutive layer indices inside ``pool`` of length 1..max_len."""
    runs: list[list[int]] = []
    for layer in pool:
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    return [
        tuple(run[start : start + length])
        for run in runs
        for length in range(1, min(max_len, len(run)) + 1)
        for start in range(len(run) - length + 1)
    ]


def group_score(increase: np.ndarray, group: tuple[int, ...], how: str) -> float:
    total = float(np.sum(increase[list(group)]))
    return total / len(group) if how == "per_layer" else total


def assemble(per_layer: dict[tuple[int, ...], float], ranking: tuple[int, ...], budget: int) -> tuple[int, ...]:
    """Non-overlapping groups, best true loss per layer first, up to M layers; then fill by prior."""
    chosen: set[int] = set()
    for group in sorted(per_layer, key=lambda g: loss_key(per_layer[g], g)):
        if len(chosen) == budget:
            break
        if chosen.isdisjoint(group) and len(chosen) + len(group) <= budget:
            chosen.update(group)
    for layer in ranking:
        if len(chosen) == budget:
            break
        chosen.add(layer)
    return normalise_set(chosen)

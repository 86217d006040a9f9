"""Fast-block-select (after MI-Prun's Fast-Block-Select, Zhang et al. 2026, arXiv 2601.07212;
docs/method.md §4.7), with the unified calibration loss and history tracking (paper §4.2).

Candidates are contiguous blocks of layers (runs of 1..``max_block_len`` consecutive removable
layers). Each candidate is scored by the true calibration loss of removing the whole block,
L(block), in one batch at the start, so a block's score already contains the interactions inside
it (MI-Prun's point: a contiguous block's importance is not the sum of its layers').

The current set P starts at the prior's top M (the one-shot set). Each iteration:

1. splits P into its blocks: every contiguous sub-run of P of length ≤ ``max_block_len`` and, for
   each length k ≥ 2, the k weakest single layers of P taken together (P is rarely contiguous, and
   without these a scattered P could only ever swap single layers for single layers);
2. orders them from weakest to strongest: the weakest block is the one whose own removal costs the
   most per layer, (L(b) − L(∅)) / |b| (for the group of k single layers, the mean of theirs);
3. for the weakest block b, forms the swaps P − b + c for the ``top_k`` best candidate blocks c of
   the same length (ranked by L(c); c disjoint from P − b), evaluates them in one batch and moves
   to the best if it beats L(P); otherwise tries the next weakest block;
4. stops when no block of P has an improving swap, or after ``max_iters`` moves.

History tracking: the best M-set ever evaluated is returned (here the final P, as moves only
improve, but kept explicit as the paper's adaptation).
"""

from __future__ import annotations

import logging

from depthprune.errors import InputError
from depthprune.io import parse_layers
from depthprune.search.base import POSITIVE, SearchAlgorithm, SearchProblem, loss_key, record_key

log = logging.getLogger(__name__)


class FastBlockSelect(SearchAlgorithm):
    name = "fast_block_select"
    display_name = "Fast-block-select"
    marker = "X"  # matplotlib marker in the figures
    defaults = {"max_iters": 10, "top_k": 8, "max_block_len": 3}
    ranges = {"max_iters": POSITIVE, "top_k": POSITIVE, "max_block_len": POSITIVE}
    requests_exact = False  # it stops at the first move that no swap improves

    def expected_requests(self, n_allowed: int, budget: int, params: dict) -> int:
        # ∅, every candidate block and the prior's top M; then at most max_iters moves, each trying every
        # block of the current set (its contiguous runs of each length k, and the group of its k weakest
        # layers) with up to top_k swaps for candidates of the same length other than the block.
        max_len = min(params["max_block_len"], budget)
        candidates = sum(n_allowed - k + 1 for k in range(1, max_len + 1))
        per_move = sum((budget - k + 1 + (k >= 2)) * min(params["top_k"], n_allowed - k) for k in range(1, max_len + 1))
        return 2 + candidates + params["max_iters"] * per_move

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        if params["top_k"] < 1 or params["max_iters"] < 1 or params["max_block_len"] < 1:
            raise InputError(
                "search algorithm 'fast_block_select': top_k, max_iters and max_block_len must be at least 1"
            )
        ev, budget = problem.evaluator, problem.budget
        max_len = min(params["max_block_len"], budget)
        candidates = contiguous_blocks(problem.allowed, max_len)
        records = ev.evaluate([()] + candidates + [problem.prior_top()])
        dense, block_records, current = records[0], records[1:-1], records[-1]
        block_loss = {parse_layers(r.removed): r.loss for r in block_records}
        best = current
        for iteration in range(params["max_iters"]):
            moved = None
            for block in weakest_first(current.removed, max_len, block_loss, dense.loss):
                rest = set(current.removed) - set(block)
                swaps = [
                    parse_layers(rest | set(c))
                    for c in sorted(candidates, key=lambda c: loss_key(block_loss[c], c))
                    if len(c) == len(block) and c != block and rest.isdisjoint(c)
                ][: params["top_k"]]
                if not swaps:
                    continue
                found = min(ev.evaluate(swaps), key=record_key)
                if record_key(found) < record_key(current):
                    moved = (block, found)
                    break
            if moved is None:
                log.info("fast_block_select: no improving block swap after %d moves", iteration)
                break
            block, current = moved
            log.info(
                "fast_block_select: move %d swaps out %s -> %s loss %.6g",
                iteration + 1,
                block,
                current.removed,
                current.loss,
            )
            if record_key(current) < record_key(best):
                best = current
        return parse_layers(best.removed)


def contiguous_blocks(layers, max_len: int) -> list[tuple[int, ...]]:
    """Every run of 1..max_len consecutive indices inside ``layers`` (sorted by length, then start)."""
    pool = sorted(int(i) for i in layers)
    runs: list[list[int]] = []
    for layer in pool:
        if runs and layer == runs[-1][-1] + 1:
            runs[-1].append(layer)
        else:
            runs.append([layer])
    return [
        tuple(run[start : start + length])
        for length in range(1, max_len + 1)
        for run in runs
        for start in range(len(run) - length + 1)
    ]


def weakest_first(removed, max_len: int, block_loss: dict, dense_loss: float) -> list[tuple[int, ...]]:
    """The blocks of ``removed`` (see the module docstring), highest removal cost per layer first."""
    cost = {b: (block_loss[b] - dense_loss) / len(b) for b in contiguous_blocks(removed, max_len)}
    singles = sorted((b for b in cost if len(b) == 1), key=lambda b: loss_key(-cost[b], b))
    for k in range(2, min(max_len, len(singles)) + 1):
        group = parse_layers(i for b in singles[:k] for i in b)
        cost.setdefault(group, sum(cost[(i,)] for i in group) / k)
    return sorted(cost, key=lambda b: loss_key(-cost[b], b))

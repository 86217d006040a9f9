"""Numbers of removed blocks (M) per model: absolute counts or fractions of the model's depth.

The paper removes M ∈ {7, 9} blocks of its 32- to 36-block models (docs/method.md §8, paper §4.4). A model of another depth
keeps the paper's *fractions* of depth, 7/32 and 9/32: M = round(f · N), rounding halves up, computed
exactly. For the project's models that gives

    N = 18 (Gemma 3 270M):   7/32 · 18 = 3.94 -> 4,   9/32 · 18 = 5.06 -> 5
    N = 30 (SmolLM2-135M):   7/32 · 30 = 6.56 -> 7,   9/32 · 30 = 8.44 -> 8
    N = 32 (Llama 3 8B):     7, 9 (the paper's own budgets)

A budget is an integer (that many blocks, whatever the depth) or a string "p/q" (that fraction of the
depth). Used by the workflow (workflow/rules/common.smk) to plan the searches of each model.

The other half of the search space is ``protected_blocks``: the blocks no search may remove.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from fractions import Fraction

from depthprune.errors import InputError

PAPER_FRACTIONS = ("7/32", "9/32")
_FRACTION = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def parse_budget(value, where: str = "budgets") -> int | Fraction:
    """An absolute M (int) or a fraction of depth (``"7/32"`` -> Fraction(7, 32)); errors name ``where``."""
    if isinstance(value, bool):
        raise InputError(f"{where}: {value!r} is not a budget (an integer M or a fraction of depth such as '7/32')")
    if isinstance(value, int):
        if value < 1:
            raise InputError(f"{where}: budget {value} must be at least 1")
        return value
    match = _FRACTION.match(str(value))
    if not match or int(match.group(2)) == 0:
        raise InputError(f"{where}: {value!r} is not a budget (an integer M or a fraction of depth such as '7/32')")
    fraction = Fraction(int(match.group(1)), int(match.group(2)))
    if not 0 < fraction < 1:
        raise InputError(f"{where}: fraction {value!r} must lie strictly between 0 and 1")
    return fraction


def budget_for_depth(fraction: Fraction, n_layers: int) -> int:
    """round(fraction · n_layers), halves rounded up (exact rational arithmetic, no float ties)."""
    return math.floor(fraction * n_layers + Fraction(1, 2))


def resolve_budgets(budgets: Iterable, n_layers: int | None, where: str = "budgets") -> list[int]:
    """Sorted distinct absolute budgets for a model of ``n_layers`` blocks.

    Fractions need ``n_layers``; every budget must leave at least one block (1 <= M < N when N is known).
    """
    resolved = set()
    for value in budgets:
        budget = parse_budget(value, where)
        if isinstance(budget, Fraction):
            if n_layers is None:
                raise InputError(
                    f"{where}: budget {value!r} is a fraction of depth; give the model's number of blocks "
                    "(n_layers in its models: entry) or use absolute budgets"
                )
            budget = max(1, budget_for_depth(budget, n_layers))
        if n_layers is not None and budget >= n_layers:
            raise InputError(f"{where}: budget {budget} would remove all {n_layers} blocks (need M < {n_layers})")
        resolved.add(budget)
    if not resolved:
        raise InputError(f"{where}: no budgets")
    return sorted(resolved)


# ``protect`` settings: which blocks a search never removes beside ``protected_layers``. boundary is
# the search space of the paper's reference [22] (PuDDing's public code runs its greedy search with
# early_barrier=1, latter_barrier=1: the first and the last block always stay; docs/method.md §4).
PROTECT_MODES = ("none", "boundary")


def check_protected(protected: tuple[int, ...], n_layers: int | None) -> None:
    """Every protected block is a block of the model (0..n_layers − 1); unknown depth checks nothing."""
    if n_layers is None:
        return
    bad = [p for p in protected if not 0 <= p < n_layers]
    if bad:
        raise InputError(f"protected_layers {bad} (option --protected) are outside 0..{n_layers - 1}")


def protected_blocks(protected: Iterable[int], protect: str, n_layers: int) -> tuple[int, ...]:
    """The blocks no search may remove: ``protected`` plus, under ``protect: boundary``, the first
    and the last block (0 and n_layers − 1). Every search, the prior, CBO's enumeration and the
    exhaustive optimum read this one set (the evaluator's ``protected``)."""
    if protect not in PROTECT_MODES:
        raise InputError(f"protect {protect!r} (option --protect / model_table protect): expected none or boundary")
    blocks = {int(p) for p in protected}
    if protect == "boundary":
        if n_layers < 3:
            raise InputError(f"protect: boundary keeps blocks 0 and {n_layers - 1}: needs at least 3 blocks")
        blocks |= {0, n_layers - 1}
    return tuple(sorted(blocks))

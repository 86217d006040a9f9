"""Per-model budgets: fractions of depth resolve per model, and the workflow plans them."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import pytest

from depthprune.budgets import PAPER_FRACTIONS, budget_for_depth, parse_budget, resolve_budgets
from test_workflow import planned_jobs, run_snakemake


@pytest.mark.parametrize(
    "n_layers, expected",
    [(18, [4, 5]), (30, [7, 8]), (32, [7, 9]), (36, [8, 10]), (8, [2, 2])],
)
def test_paper_fractions_of_depth(n_layers, expected):
    assert [budget_for_depth(parse_budget(f), n_layers) for f in PAPER_FRACTIONS] == expected


def test_halves_round_up_exactly():
    assert budget_for_depth(Fraction(1, 4), 2) == 1  # 0.5 -> 1
    assert budget_for_depth(Fraction(3, 4), 2) == 2  # 1.5 -> 2
    assert budget_for_depth(Fraction(1, 4), 6) == 2  # 1.5 -> 2


def test_resolve_mixes_integers_and_fractions():
    assert resolve_budgets([9, "7/32", " 9 / 32 "], 32) == [7, 9]  # duplicates merge
    assert resolve_budgets([3, 5], None) == [3, 5]  # integers need no depth


@pytest.mark.parametrize(
    "budgets, n_layers, message",
    [
        (["7/32"], None, "n_layers"),
        ([18], 18, "remove all 18 blocks"),
        (["3/2"], 18, "between 0 and 1"),
        (["seven"], 18, "not a budget"),
        ([0], 18, "at least 1"),
        ([True], 18, "not a budget"),
    ],
)
def test_bad_budgets_are_named(budgets, n_layers, message):
    with pytest.raises(ValueError, match=message) as err:
        resolve_budgets(budgets, n_layers, "models.gemma.budgets")
    assert "models.gemma.budgets" in str(err.value)


def searches_per_model(*config_args):
    jobs = planned_jobs(run_snakemake("-n", "--config", *config_args).stdout)
    budgets = defaultdict(set)
    for rule, wildcards in jobs:
        if rule == "search":
            budgets[wildcards["model"]].add(int(wildcards["budget"]))
    return dict(budgets)


def test_workflow_plans_each_models_own_budgets():
    two = (
        "model_table={smol: {spec: 'embedded:smollm2-135m', n_layers: 30},"
        " gemma: {spec: 'embedded:gemma3-270m', n_layers: 18},"
        " fixed: {spec: 'tiny:llama-8', budgets: [2, 3]}}"
    )
    chosen = "models=[smol, gemma, fixed]"
    fractions = 'budgets=["7/32", "9/32"]'
    assert searches_per_model(two, chosen, fractions, "calibrations=[ppl_c4]") == {
        "smol": {7, 8},
        "gemma": {4, 5},
        "fixed": {2, 3},
    }
    # integers at the top level (the default) apply to every model without budgets of its own
    assert searches_per_model(two, chosen, "calibrations=[ppl_c4]") == {
        "smol": {7, 9},
        "gemma": {7, 9},
        "fixed": {2, 3},
    }


def test_workflow_names_a_fraction_without_depth():
    proc = run_snakemake(
        "-n", "--config", "model_table={m: {spec: 'tiny:llama-8'}}", "models=[m]", 'budgets=["7/32"]', check=False
    )
    assert proc.returncode != 0
    assert "budgets (for model m)" in proc.stdout + proc.stderr and "n_layers" in proc.stdout + proc.stderr

"""The search algorithms on synthetic objectives whose optimum is known by brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from depthprune.search import ALGORITHMS, get_algorithm
from depthprune.search.base import SearchProblem, TracingEvaluator
from depthprune.search.cbo import anneal_lowest, energies, exact_lowest, gradient_energy
from depthprune.search.fast_block_select import contiguous_blocks, weakest_first
from depthprune.search.runner import run_search
from synthetic import SyntheticEvaluator, random_objective

# Small settings that keep every algorithm fast on N <= 12 (defaults otherwise).
FAST = {
    "bo": {"n_trials": 40},
    "ga": {"generations": 5},
    "bo_random": {"n_trials": 40},
    "ga_random": {"generations": 5},
}
# The random-initialisation controls carry no guarantee of finding an additive optimum in a small budget.
GUIDED = [name for name in ALGORITHMS if name not in ("ga_random", "bo_random")]


def brute_force(ev: SyntheticEvaluator, budget: int) -> tuple[tuple[int, ...], float]:
    allowed = [i for i in range(ev.n_layers) if i not in ev.protected]
    best = min(itertools.combinations(allowed, budget), key=lambda s: (ev.true_loss(s), s))
    return best, ev.true_loss(best)


def search(ev, name, budget, tmp_path, seed=0, **params):
    return run_search(
        ev, name, budget, ev.prior(), seed=seed, workdir=tmp_path / name, params={**FAST.get(name, {}), **params}
    )


def greedy_trap() -> SyntheticEvaluator:
    """N = 10, M = 3: layer 0 is the best single layer but clashes with every other layer, while
    layers 1, 2, 3 are cheap together. Greedy takes 0 first and is stuck; beam (B = 5) keeps 1..4."""
    unary = np.array([0.1, 1.0, 1.01, 1.02, 1.03, 1.5, 1.6, 1.7, 1.8, 1.9])
    pairwise = np.zeros((10, 10))
    pairwise[0, 1:] = 5.0
    for i, j in itertools.combinations((1, 2, 3), 2):
        pairwise[i, j] = -0.8
    return SyntheticEvaluator(unary, pairwise)


@pytest.mark.parametrize("name", GUIDED)
@pytest.mark.parametrize("budget", [1, 4, 11])  # M = 1 and M = N - 1 included
def test_additive_objective_every_algorithm_finds_the_optimum(name, budget, tmp_path):
    ev = random_objective(12, seed=5)
    optimum, loss = brute_force(ev, budget)
    result = search(ev, name, budget, tmp_path)
    assert result.removed == optimum
    assert result.loss == pytest.approx(loss)


def test_greedy_is_suboptimal_and_beam_optimal_with_interactions(tmp_path):
    ev = greedy_trap()
    optimum, loss = brute_force(ev, 3)
    assert optimum == (1, 2, 3)
    greedy = search(ev, "greedy", 3, tmp_path)
    beam = search(ev, "beam", 3, tmp_path)
    assert greedy.loss > loss + 1.0  # provably worse: brute force knows better
    assert beam.removed == optimum
    # Beam with width 1 is greedy.
    assert search(ev, "beam", 3, tmp_path, beam_width=1).removed == greedy.removed


@pytest.mark.parametrize("coefficients", ["gradient", "ablation"])
def test_cbo_finds_the_optimum_when_the_energy_is_exact(coefficients, tmp_path):
    # A pairwise objective is exactly quadratic in the gates, so both energies are exact.
    ev = random_objective(11, seed=2, interaction=0.4)
    optimum, _ = brute_force(ev, 4)
    assert search(ev, "cbo", 4, tmp_path, coefficients=coefficients).removed == optimum
    # Forcing simulated annealing on the same problem (C(11, 4) = 330 > exact_limit).
    assert search(ev, "cbo", 4, tmp_path, coefficients=coefficients, exact_limit=10).removed == optimum


def test_cbo_fisher_energy_finds_the_additive_optimum(tmp_path):
    # Without interactions the Fisher energy (uᵀx)² of the synthetic objective's one sample is a
    # monotone function of the loss: its ground state is the optimum, by enumeration and by annealing.
    ev = random_objective(11, seed=2)
    optimum, _ = brute_force(ev, 4)
    assert search(ev, "cbo", 4, tmp_path, rerank=1).removed == optimum
    assert search(ev, "cbo", 4, tmp_path, rerank=1, exact_limit=10).removed == optimum


def test_cbo_ablation_costs_all_pairs_in_one_batch(tmp_path):
    ev = random_objective(9, seed=2, interaction=0.4)
    calls = []
    original = ev.evaluate
    ev.evaluate = lambda sets: calls.append(len(sets)) or original(sets)
    result = search(ev, "cbo", 3, tmp_path, coefficients="ablation")
    assert calls[0] == 1 + 9 + 9 * 8 // 2  # ∅, singles, pairs
    assert result.distinct_evaluations >= 9 * 8 // 2


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_same_seed_same_output(name, tmp_path):
    ev_a = random_objective(12, seed=9, interaction=0.3)
    ev_b = random_objective(12, seed=9, interaction=0.3)
    a = run_search(ev_a, name, 5, ev_a.prior(), seed=3, workdir=tmp_path / "a", params=FAST.get(name))
    b = run_search(ev_b, name, 5, ev_b.prior(), seed=3, workdir=tmp_path / "b", params=FAST.get(name))
    assert a.removed == b.removed
    assert [(e.removed, e.loss, e.memo_hit) for e in a.trace] == [(e.removed, e.loss, e.memo_hit) for e in b.trace]


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_protected_layers_are_never_removed(name, tmp_path):
    protected = {0, 4, 11}
    ev = random_objective(12, seed=1, interaction=0.3, protected=protected)
    # Make the protected layers the most attractive ones, so ignoring the constraint would show.
    ev.unary[list(protected)] = -5.0
    for budget in (1, 4, 8):  # 8 = N − |protected| − 1
        result = search(ev, name, budget, tmp_path / str(budget))
        assert len(result.removed) == budget
        assert protected.isdisjoint(result.removed)
        assert all(protected.isdisjoint(e.removed) for e in result.trace)


@pytest.mark.parametrize("budget", [0, 9, 12])
def test_budget_out_of_range_is_a_clear_error(budget, tmp_path):
    ev = random_objective(12, seed=1, protected={0, 11, 5})
    with pytest.raises(ValueError, match="--budget"):
        run_search(ev, "greedy", budget, ev.prior(), seed=0, workdir=tmp_path)


def test_unknown_or_mistyped_parameter_names_the_valid_ones():
    with pytest.raises(ValueError, match=r"'ga' has no parameter 'popsize'.*elitism.*population"):
        get_algorithm("ga").resolve_params({"popsize": 8})
    with pytest.raises(ValueError, match="'beam_width' expects int"):
        get_algorithm("beam").resolve_params({"beam_width": 2.5})
    with pytest.raises(ValueError, match="coefficients"):
        get_algorithm("cbo").resolve_params({"coefficients": "hessian"})
    assert get_algorithm("ga").resolve_params({"mutation": 1})["mutation"] == 1.0
    assert get_algorithm("bo").resolve_params({}) == {
        "n_trials": 200,
        "n_startup_trials": 10,
        "prior_guided": True,
        "prior_key": 0.75,
        "multivariate": True,
        "n_ei_candidates": 24,
    }


def test_paper_defaults():
    assert get_algorithm("beam").defaults["beam_width"] == 5
    ga = get_algorithm("ga").defaults
    assert (ga["population"], ga["elitism"], ga["mutation"], ga["generations"]) == (16, 0.2, 0.15, 10)
    cbo = get_algorithm("cbo").defaults
    assert (cbo["exact_limit"], cbo["rerank"]) == (100_000_000, 16)  # every M of the paper's models exactly
    # the controls keep the limit their committed runs used
    assert get_algorithm("cbo_taylor").defaults["exact_limit"] == get_algorithm("cbo_ablation").defaults["exact_limit"]
    assert get_algorithm("cbo_taylor").defaults["exact_limit"] == 5_000_000


def test_batches_one_call_per_step_or_generation(tmp_path):
    ev = random_objective(10, seed=4, interaction=0.2)
    calls: list[int] = []
    original = ev.evaluate
    ev.evaluate = lambda sets: calls.append(len(sets)) or original(sets)
    greedy = search(ev, "greedy", 3, tmp_path)
    assert calls == [10, 9, 8]
    assert greedy.distinct_evaluations == 27
    calls.clear()
    search(ev, "ga", 3, tmp_path, generations=4)
    assert calls == [16, 13, 13, 13, 13]  # initial population, then 16 − round(0.2·16) children
    calls.clear()
    search(ev, "beam", 3, tmp_path)
    assert len(calls) == 3 and calls[0] == 10


def test_tracer_counts_repeats_within_the_search_as_memo_hits():
    ev = random_objective(6, seed=0)
    ev.evaluate([(1, 2)])  # known to the shared memo before this search starts
    tracer = TracingEvaluator(ev)
    tracer.evaluate([(2, 1), (3,), (1, 2)])
    tracer.evaluate([(3,)])
    assert [e.memo_hit for e in tracer.entries] == [False, False, True, True]
    assert [e.order for e in tracer.entries] == [0, 1, 2, 3]
    assert tracer.distinct_evaluations == 2 and tracer.memo_hits == 2
    assert tracer.blocks_run == 6 - 1  # (1, 2) came from the shared memo; (3,) ran 5 blocks once
    assert tracer.naive_blocks == 4 + 5 + 4 + 5
    assert tracer.best().removed == min([(1, 2), (3,)], key=ev.true_loss)


def test_one_shot_costs_one_evaluation(tmp_path):
    ev = random_objective(12, seed=5)
    result = search(ev, "one_shot", 4, tmp_path)
    assert result.distinct_evaluations == 1 and result.memo_hits == 0


def test_fast_block_select_never_ends_worse_than_one_shot(tmp_path):
    for seed in range(5):
        ev = random_objective(12, seed=seed, interaction=0.5)
        one_shot = search(ev, "one_shot", 4, tmp_path)
        fbs = search(ev, "fast_block_select", 4, tmp_path)
        assert fbs.loss <= one_shot.loss


def test_fast_block_select_blocks_and_weakest_first():
    assert contiguous_blocks([1, 2, 3, 7, 8], max_len=2) == [(1,), (2,), (3,), (7,), (8,), (1, 2), (2, 3), (7, 8)]
    block_loss = {(1,): 1.5, (2,): 1.2, (5,): 1.9, (1, 2): 2.0}
    # per-layer cost over L(∅) = 1: (5,) 0.9, (1,) 0.5, (1, 2) 0.5, (2,) 0.2; the two weakest single
    # layers {1, 5} together: (0.5 + 0.9) / 2 = 0.7
    assert weakest_first((1, 2, 5), 2, block_loss, 1.0) == [(5,), (1, 5), (1,), (1, 2), (2,)]


def test_cbo_energy_sign_matches_removing_gates():
    """E(x) = −gᵀx + ½xᵀHx must equal L(α = 1 − x) − L(α = 1) for a quadratic L(α)."""
    rng = np.random.default_rng(0)
    n = 7
    a = rng.standard_normal(n)
    b = rng.standard_normal((n, n))
    b = b + b.T

    def loss(alpha):
        return 1.0 + a @ alpha + 0.5 * alpha @ b @ alpha

    g, h = a + b @ np.ones(n), b  # ∂L/∂α and ∂²L/∂α² at α = 1

    class GateStub:
        n_layers, protected, stats = n, frozenset(), None

        def gate_derivatives(self, method="full_graph"):
            return g, h

    problem = SearchProblem(TracingEvaluator(GateStub()), 3, np.zeros(n), 0, frozenset(), None)
    linear, quadratic = gradient_energy(problem, np.arange(n))
    combos = np.array(list(itertools.combinations(range(n), 3)))
    for combo, energy in zip(combos, energies(linear, quadratic, combos)):
        x = np.zeros(n)
        x[combo] = 1
        assert energy == pytest.approx(loss(np.ones(n) - x) - loss(np.ones(n)))


def test_exact_enumeration_matches_brute_force_across_chunks():
    rng = np.random.default_rng(1)
    n, m, k = 12, 4, 10
    linear = rng.standard_normal(n)
    quadratic = rng.standard_normal((n, n))
    combos = list(itertools.combinations(range(n), m))
    reference = sorted(zip(energies(linear, quadratic, np.array(combos)).tolist(), combos))[:k]
    found = exact_lowest(linear, quadratic, m, k, chunk_size=7)
    assert [c for _, c in found] == [c for _, c in reference]
    assert [e for e, _ in found] == pytest.approx([e for e, _ in reference])


def test_annealing_reaches_the_exact_minimum():
    rng = np.random.default_rng(2)
    n, m = 16, 5
    linear = rng.standard_normal(n)
    quadratic = rng.standard_normal((n, n))
    exact = exact_lowest(linear, quadratic, m, 16, chunk_size=1000)
    annealed = anneal_lowest(
        linear, quadratic, m, 16, np.random.default_rng(0), restarts=8, steps=3000, final_ratio=1e-3
    )
    assert annealed[0][1] == exact[0][1]
    assert len({c for _, c in annealed}) == len(annealed) == 16
    assert [e for e, _ in annealed] == sorted(e for e, _ in annealed)


def test_search_time_includes_the_prior_for_searches_that_read_it(tmp_path):
    """One-shot's cost is the prior (docs/method.md §4); greedy pays the single-layer sets it evaluates itself."""
    prior_seconds = 100.0
    charged = {}
    for name in ("one_shot", "fast_block_select", "greedy"):
        ev = SyntheticEvaluator(unary=np.linspace(0.1, 1.0, 8), delay=0.01)
        ev.evaluate([()] + [(i,) for i in range(8)])  # the prior job filled the shared memo
        result = run_search(ev, name, 2, ev.prior(), seed=0, workdir=tmp_path / name, prior_seconds=prior_seconds)
        charged[name] = result
    assert charged["one_shot"].prior_seconds == prior_seconds
    assert prior_seconds <= charged["one_shot"].search_seconds < prior_seconds + 1.0
    # fast-block-select evaluates single layers too: memo hits already paid by the prior charge.
    fbs = charged["fast_block_select"]
    assert fbs.prior_seconds == prior_seconds and fbs.search_seconds < prior_seconds + 1.0
    greedy = charged["greedy"]
    assert greedy.prior_seconds == 0.0
    assert 8 * 0.01 <= greedy.search_seconds < 1.0  # its first step's 8 singletons, at their stored cost
    assert get_algorithm("cbo").uses_prior({"coefficients": "ablation"})
    assert not get_algorithm("cbo").uses_prior({"coefficients": "gradient"})

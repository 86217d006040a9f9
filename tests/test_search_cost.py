"""One cost model: the count `depthprune plan` predicts for a search is the count its class states
(SearchAlgorithm.expected_requests), and the search makes exactly that many requests, or at most
that many where it can stop early or merge coinciding candidates (``requests_exact`` False: beam,
CBO, fast-block-select)."""

from __future__ import annotations

import math

import pytest

from depthprune.plan import search_evaluations
from depthprune.search import ALGORITHMS, get_algorithm
from depthprune.search.runner import run_search
from synthetic import random_objective

# Small settings, so every algorithm runs in a moment; the defaults fill the rest.
SMALL = {
    "ga": {"population": 6, "generations": 3},
    "ga_random": {"population": 6, "generations": 3},
    "bo": {"n_trials": 12, "n_startup_trials": 4},
    "bo_random": {"n_trials": 12, "n_startup_trials": 4},
    "beam": {"beam_width": 3},
    "cbo": {"rerank": 4, "diagnostic_sets": 0},
    "cbo_taylor": {"rerank": 4, "diagnostic_sets": 0},
    "cbo_ablation": {"rerank": 4, "diagnostic_sets": 0},
    "fast_block_select": {"max_iters": 3, "top_k": 4},
}
# Other paths of the same searches: CBO's ablation energy and its annealing above exact_limit, GA
# without elitism, BO on a space smaller than n_trials (every subset).
VARIANTS = [
    ("cbo", {"coefficients": "ablation", "rerank": 4, "diagnostic_sets": 0}),
    ("cbo", {"exact_limit": 1, "rerank": 6, "sa_restarts": 2, "sa_steps": 200, "diagnostic_sets": 0}),
    ("ga", {"population": 5, "generations": 2, "elitism": 0.0}),
    ("bo", {"n_trials": 40, "n_startup_trials": 4}),
]
CASES = [(name, SMALL.get(name, {})) for name in ALGORITHMS] + VARIANTS


@pytest.mark.parametrize(("name", "params"), CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
@pytest.mark.parametrize("budget", [1, 3])
def test_the_planned_count_is_what_the_search_requests(name, params, budget, tmp_path):
    # N = 10 under protect: boundary (blocks 0 and 9 kept): 8 removable layers in one run.
    evaluator = random_objective(10, seed=3, interaction=0.3, protected=(0, 9))
    planned = search_evaluations(name, params, 8, budget)
    result = run_search(evaluator, name, budget, evaluator.prior(), seed=1, workdir=tmp_path / "work", params=params)
    requests = len(result.trace)
    if get_algorithm(name).requests_exact:
        assert requests == planned, f"{name} M={budget}: planned {planned}, requested {requests}"
    else:
        assert 0 < requests <= planned, f"{name} M={budget}: planned at most {planned}, requested {requests}"


def test_ga_counts_its_initial_population_and_each_generations_children():
    ga = get_algorithm("ga")
    params = ga.resolve_params({"population": 10, "generations": 4, "elitism": 0.2})
    assert search_evaluations("ga", {"population": 10, "generations": 4, "elitism": 0.2}, 8, 2) == 10 + 4 * 8
    assert ga.expected_requests(8, 2, params) == 42


def test_the_planner_takes_each_searchs_own_defaults():
    for name, cls in ALGORITHMS.items():
        assert search_evaluations(name, {}, 12, 3) == cls().expected_requests(12, 3, cls().resolve_params())
    assert search_evaluations("bo", {}, 12, 3) == min(get_algorithm("bo").defaults["n_trials"], math.comb(12, 3))


def test_the_planner_charges_gate_passes_by_the_searchs_resolved_coefficients():
    """A config entry may leave `coefficients` out: the search's default decides. cbo_ablation is
    charged its evaluations only; cbo_taylor the gate derivatives' passes on top (a forward, a
    backward and a double backward per Hessian row: (3 + 4N) dense passes); cbo (Fisher) one gated
    forward of the calibration and, per sample, a first-order backward through its row (about two
    forwards of seq_len tokens)."""
    from types import SimpleNamespace

    from depthprune.plan import search_cost

    names = ("cbo", "cbo_taylor", "cbo_ablation")
    study = SimpleNamespace(config={"search_params": {name: {} for name in names}}, fraction={})
    # one block over t tokens costs t / 64: the 64-token calibration's per_block is 1
    shape = SimpleNamespace(n_layers=10, head_flops=lambda tokens: 0.0, block_flops=lambda t, c: t / 64)
    model = SimpleNamespace(shape=shape, n_allowed=8, model_cfg={}, nbytes=4)
    cal = SimpleNamespace(scored=1, tokens=64, seq_len=16, samples=4)
    flops = {name: search_cost(study, model, cal, 1.0, 0.0, name, 3)[0] for name in names}
    evaluations = {name: search_evaluations(name, {}, 8, 3) * (10 - 3) for name in names}
    assert flops["cbo_ablation"] == evaluations["cbo_ablation"]
    assert flops["cbo_taylor"] == evaluations["cbo_taylor"] + (3 + 4 * 10) * 10
    assert flops["cbo"] == evaluations["cbo"] + 10 + 2 * 4 * 10 * 16 / 64


def test_the_fisher_rows_peak_is_one_rows_first_order_graph():
    """What `depthprune plan` charges cbo at 8B (Llama 3 8B, one 2048-token row, bfloat16): the
    loaded model and one row's saved activations, weights not counted twice; below the blockwise
    Taylor derivatives' peak minus their float32 model copy, and above the loaded model."""
    import json
    from pathlib import Path

    from depthprune.engine import gate_memory

    config = json.loads(
        (
            Path(__file__).parents[1] / "src/depthprune/models/configs/meta-llama--Meta-Llama-3-8B/config.json"
        ).read_text()
    )
    loaded, _ = gate_memory.model_copies_bytes(config, 2)
    peak = gate_memory.fisher_peak_bytes(config, 2048, 2)
    block = gate_memory.gated_block_bytes(config, 2048, 2)
    assert loaded < peak < loaded + 32 * (block + 1) + gate_memory.head_grad_bytes(config, 2048) + (1 << 24)
    assert block < gate_memory.block_step_bytes(config, 2048)  # first order, bfloat16: less than a Hessian step
    assert peak < 80 * gate_memory.GIB  # fits one 80 GiB GPU


def test_unknown_algorithm_is_named():
    with pytest.raises(ValueError, match="sleb"):
        search_evaluations("sleb", {}, 8, 2)

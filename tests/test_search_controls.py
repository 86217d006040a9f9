"""Searches that really search: BO's distinct budget, fast_block_select's block swaps, the
exhaustive ground truth, the random-initialisation controls, float32 CBO derivatives."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
import torch

from depthprune.search.runner import run_search, selection_document
from synthetic import SyntheticEvaluator, random_objective


def search(ev, name, budget, tmp_path, seed=0, **params):
    return run_search(ev, name, budget, ev.prior(), seed=seed, workdir=tmp_path / name, params=params)


# ----------------------------------------------------------------------------- BO
@pytest.mark.parametrize("name", ["bo", "bo_random"])
def test_bo_spends_its_budget_on_distinct_sets(name, tmp_path):
    ev = random_objective(16, seed=2, interaction=0.05)
    result = search(ev, name, 5, tmp_path, n_trials=40)
    d = result.diagnostics
    assert result.distinct_evaluations == d["distinct"] == d["trials"] == 40
    assert d["stopped"] == "n_trials reached"
    # every trial evaluates a new set: no repeats in the trace, none charged to the evaluator
    assert len(result.trace) == 40 and result.memo_hits == 0
    assert len({e.removed for e in result.trace}) == 40
    assert ev.stats.distinct_evaluations == 40 and ev.stats.memo_hits == 0
    assert selection_document(result, "m", "ppl_c4")["diagnostics"]["repaired"] == d["repaired"]


def test_repair_takes_the_cheapest_unseen_swap():
    from depthprune.search.bo import decode_keys, repair_keys

    keys = np.array([0.9, 0.8, 0.1, 0.7, 0.2])  # decodes to layers {0, 1, 3}
    allowed = (0, 1, 2, 3, 4)
    assert decode_keys(keys, allowed, 3) == (0, 1, 3)
    seen = {(0, 1, 3)}
    # swaps by k_out - k_in: 3 -> 4 costs 0.5, the cheapest
    assert repair_keys(keys, allowed, 3, lambda s: s if s in seen else None, (0, 1)) == (0, 1, 4)
    seen |= {(0, 1, 4), (0, 1, 2)}
    # next: 1 -> 4 (0.6)
    assert repair_keys(keys, allowed, 3, lambda s: s if s in seen else None, (0, 1)) == (0, 3, 4)
    # every single swap known: a seeded random unseen set, the same for the same seed
    every = {tuple(sorted(c)) for c in itertools.combinations(allowed, 3)} - {(2, 3, 4)}
    known = lambda s: s if s in every else None  # noqa: E731
    assert repair_keys(keys, allowed, 3, known, (0, 1)) == (2, 3, 4)


def test_bo_with_a_budget_covering_the_space_evaluates_all_of_it(tmp_path):
    ev = random_objective(6, seed=0)
    result = search(ev, "bo", 3, tmp_path, n_trials=25)
    assert result.distinct_evaluations == 20 and result.diagnostics["stopped"] == "every subset evaluated"


def test_bo_enqueues_the_prior_set_inside_the_interval(tmp_path):
    ev = random_objective(12, seed=1)
    result = search(ev, "bo", 4, tmp_path, n_trials=12)
    top = tuple(sorted(np.argsort(ev.prior(), kind="stable")[:4].tolist()))
    assert result.trace[0].removed == top  # the first trial is the prior's set
    random = search(ev, "bo_random", 4, tmp_path, n_trials=12)
    assert random.hyperparameters["prior_guided"] is False


# ----------------------------------------------------------------------------- random-init controls
@pytest.mark.parametrize("name", ["ga_random", "bo_random"])
def test_random_init_controls_are_deterministic_for_a_seed(name, tmp_path):
    runs = []
    for attempt in range(2):
        ev = random_objective(14, seed=5, interaction=0.2)
        params = {"n_trials": 25} if name == "bo_random" else {"generations": 3}
        result = search(ev, name, 4, tmp_path / str(attempt), seed=11, **params)
        runs.append((result.removed, [(e.removed, e.loss) for e in result.trace]))
    assert runs[0] == runs[1]
    assert runs[0][1] != [], name
    # no prior: the search time is not charged the prior's cost
    assert result.prior_seconds == 0.0


def test_ga_random_ignores_the_prior(tmp_path):
    ev = random_objective(14, seed=5, interaction=0.2)
    prior = ev.prior()
    reversed_prior = prior.max() + prior.min() - prior  # the worst layers look best
    a = run_search(ev, "ga_random", 4, prior, seed=3, workdir=tmp_path / "a", params={"generations": 2})
    b = run_search(
        random_objective(14, seed=5, interaction=0.2),
        "ga_random",
        4,
        reversed_prior,
        seed=3,
        workdir=tmp_path / "b",
        params={"generations": 2},
    )
    assert [e.removed for e in a.trace] == [e.removed for e in b.trace]
    guided = run_search(ev, "ga", 4, prior, seed=3, workdir=tmp_path / "c", params={"generations": 2})
    assert guided.trace[0].removed == tuple(sorted(np.argsort(prior, kind="stable")[:4].tolist()))


# ----------------------------------------------------------------------------- fast_block_select
def contiguous_objective() -> SyntheticEvaluator:
    """Single layers 1, 5, 9, 13 are the cheapest, but adjacent layers are much cheaper together."""
    n = 16
    unary = np.ones(n)
    unary[[1, 5, 9, 13]] = 0.5
    pairwise = np.zeros((n, n))
    for i in range(n - 1):
        pairwise[i, i + 1] = -0.8
    return SyntheticEvaluator(unary, pairwise)


def test_fast_block_select_leaves_the_one_shot_set_under_contiguous_interactions(tmp_path):
    ev = contiguous_objective()
    one_shot = search(ev, "one_shot", 4, tmp_path)
    assert one_shot.removed == (1, 5, 9, 13)
    fbs = search(ev, "fast_block_select", 4, tmp_path)
    assert fbs.removed != one_shot.removed
    assert fbs.loss < one_shot.loss - 0.5
    # contiguous blocks were scored by the true loss of removing them whole
    evaluated = {e.removed for e in fbs.trace}
    assert (4, 5, 6) in evaluated and (0, 1) in evaluated
    # history: never worse than where it started, and the returned set is the best it evaluated
    assert fbs.loss == min(e.loss for e in fbs.trace if len(e.removed) == 4)


def test_fast_block_select_keeps_a_local_optimum(tmp_path):
    ev = random_objective(12, seed=0)  # additive: the one-shot set is optimal, no swap improves it
    assert search(ev, "fast_block_select", 4, tmp_path).removed == search(ev, "one_shot", 4, tmp_path).removed


# ----------------------------------------------------------------------------- exhaustive
@pytest.mark.parametrize("protected", [(), (0, 7)])
def test_exhaustive_equals_brute_force(protected, tmp_path):
    ev = random_objective(10, seed=4, interaction=0.5, protected=protected)
    allowed = [i for i in range(10) if i not in protected]
    brute = min(itertools.combinations(allowed, 3), key=lambda s: (ev.true_loss(s), s))
    result = search(ev, "exhaustive", 3, tmp_path, batch_size=7)
    assert result.removed == brute and result.loss == pytest.approx(ev.true_loss(brute))
    assert result.distinct_evaluations == len(list(itertools.combinations(allowed, 3)))
    # lexicographic order = a depth-first walk of the trie
    assert [e.removed for e in result.trace] == list(itertools.combinations(allowed, 3))


def test_exhaustive_refuses_above_its_limit(tmp_path):
    ev = random_objective(20, seed=0)
    with pytest.raises(ValueError, match=r"C\(20, 6\) = 38760 subsets exceed max_sets=10000.*max_sets"):
        search(ev, "exhaustive", 6, tmp_path)
    assert ev.stats.distinct_evaluations == 0


# ----------------------------------------------------------------------------- CBO
def test_cbo_reports_energy_loss_correlations(tmp_path):
    ev = random_objective(12, seed=3, interaction=0.1)
    result = search(ev, "cbo_taylor", 4, tmp_path)
    d = result.diagnostics
    # the synthetic objective is exactly quadratic: the Taylor energy and the loss agree
    assert d["energy_loss_spearman_random"] == pytest.approx(1.0)
    assert d["n_random"] == 64 and d["n_reranked"] == 16
    assert result.distinct_evaluations == 16  # the diagnostic sets are not charged to the search


def test_cbo_reports_the_ground_states_loss_beside_its_choice(tmp_path):
    """cbo returns the best of the 16 lowest-energy sets by the true loss (docs/method.md §4.6) and
    records what the ground state alone would have given: its set, energy and loss."""
    ev = random_objective(12, seed=3, interaction=0.3)
    result = search(ev, "cbo", 4, tmp_path, diagnostic_sets=0)
    d = result.diagnostics
    a = ev.gate_fisher_rows()
    ground = min(itertools.combinations(range(12), 4), key=lambda s: (float(np.sum(a[0, list(s)]) ** 2), s))
    assert tuple(d["ground_state_removed"]) == ground
    assert d["ground_state_energy"] == pytest.approx(float(np.sum(a[0, list(ground)]) ** 2))
    assert d["ground_state_loss"] == pytest.approx(ev.true_loss(ground))
    assert result.loss <= d["ground_state_loss"] and (d["fisher_samples"], d["fisher_rank"]) == (1, 1)
    assert result.hyperparameters["coefficients"] == "fisher"


def test_cbo_diagnostic_time_is_not_search_time(tmp_path):
    import time

    ev = random_objective(12, seed=3, interaction=0.1)
    evaluate = ev.evaluate
    ev.evaluate = lambda sets: (time.sleep(1.0) if len(sets) == 64 else None) or evaluate(sets)
    result = search(ev, "cbo", 4, tmp_path)
    assert result.diagnostics["diagnostic_seconds"] >= 1.0
    assert result.search_seconds < 1.0


def test_cbo_derivatives_of_a_bfloat16_model_are_float32_ones(tiny_model_dir, data_dir):
    from depthprune.calibration import CalibrationSetup
    from depthprune.engine.evaluator import SubsetEvaluator
    from depthprune.models import load_model
    from depthprune.models.loading import LoadedModel

    tiny = load_model(str(tiny_model_dir), device="cpu")
    setup = CalibrationSetup("ppl_c4", data_dir=data_dir, n_samples=2, seq_len=24, seed=1)
    objective = setup.build_objective(tiny.tokenizer, token_budget=128)

    def evaluator(model):
        return SubsetEvaluator(
            LoadedModel(model, tiny.tokenizer, tiny.spec, tiny.name, tiny.path), objective, calibration="ppl_c4"
        )

    bf16 = copy.deepcopy(tiny.model).to(torch.bfloat16)
    grad, hess = evaluator(bf16).gate_derivatives()
    assert next(bf16.parameters()).dtype == torch.bfloat16  # the model itself is left as it was
    # the same (bfloat16-rounded) weights in a float32 model
    grad32, hess32 = evaluator(copy.deepcopy(bf16).float()).gate_derivatives()
    assert abs(grad - grad32).max() <= 1e-3 * abs(grad32).max()
    assert abs(hess - hess32).max() <= 1e-2 * abs(hess32).max()
    # and the original float32 model: only the weights' rounding separates them
    grad_ref, hess_ref = evaluator(tiny.model).gate_derivatives()
    assert abs(grad - grad_ref).max() <= 0.1 * abs(grad_ref).max()
    assert abs(hess - hess_ref).max() <= 0.2 * abs(hess_ref).max()


# ----------------------------------------------------------------------------- observations helper
def test_prior_artifact_answer():
    import pandas as pd

    from depthprune.reporting.verdicts.controls import control_comparison, prior_artifact_answer

    rows = [
        ("m", "ppl_c4", 7, "one_shot", "1 2 3", 4.0),
        ("m", "ppl_c4", 7, "ga", "1 2 3", 3.9),
        ("m", "ppl_c4", 7, "ga_random", "1 2 3", 3.9),  # same set
        ("m", "ppl_c4", 7, "bo", "1 2 4", 3.8),
        ("m", "ppl_c4", 7, "bo_random", "5 6 7", 4.5),  # worse and different
    ]
    frame = pd.DataFrame(rows, columns=["model", "calibration", "budget", "algorithm", "removed", "loss"])
    table = control_comparison(frame)
    assert list(table["control"]) == ["ga_random", "bo_random"]
    assert list(table["converged"]) == [True, False] and list(table["identical"]) == [True, False]
    assert table["jaccard"].tolist() == [1.0, 0.0]
    text = prior_artifact_answer(frame)
    assert "partly holds" in text and "1 of 2" in text
    assert "not testable" in prior_artifact_answer(frame[frame["algorithm"] != "bo_random"].iloc[:2])


def test_cbo_derivatives_see_the_shared_context_rows(tiny_model_dir, data_dir):
    """Gate derivatives under TLM with shared-context rows (tree masks, continued positions) equal
    those of the same items scored as separate sequences: the derivative pass replays the rows
    exactly as the evaluator scores them."""
    from depthprune.calibration import CalibrationSetup
    from depthprune.engine.evaluator import SubsetEvaluator
    from depthprune.models import load_model

    tiny = load_model(str(tiny_model_dir), device="cpu")
    derivatives = {}
    for shared in (True, False):
        setup = CalibrationSetup(
            "tlm_cs170k",
            data_dir=data_dir,
            n_samples=4,
            seq_len=48,
            seed=1,
            tlm_context="shared" if shared else "separate",
        )
        objective = setup.build_objective(tiny.tokenizer, token_budget=512)
        assert any(b.branch_ids is not None for b in objective.batches) == shared
        derivatives[shared] = SubsetEvaluator(tiny, objective, calibration="tlm_cs170k").gate_derivatives()
    (g_shared, h_shared), (g_separate, h_separate) = derivatives[True], derivatives[False]
    np.testing.assert_allclose(g_shared, g_separate, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(h_shared, h_separate, rtol=1e-3, atol=1e-5)


def cliff_objective(cliff_block: int = 2, cliff: float = 10.0) -> SyntheticEvaluator:
    """L(α) = 1 + Σ u_i (1 − α_i) + Σ_{i<j} P_ij (1 − α_i)(1 − α_j) + c (1 − α_k)⁴ on 10 blocks.

    The quartic term has zero first and second derivatives at α = 1, so the gate expansion sees
    block k as the cheapest of all (u_k = 0.01), while removing it (α_k = 0) costs c = 10 more: the
    kind of block the diagnosis found in SmolLM2 (docs/method.md §4.6, block 11). Every other block
    costs about 1, so each of the energy's 36 sets holding k ranks below every set without it."""
    rng = np.random.default_rng(0)
    unary = 1.0 + 0.1 * rng.random(10)
    unary[cliff_block] = 0.01
    pairwise = 0.02 * rng.standard_normal((10, 10))
    ev = SyntheticEvaluator(unary, pairwise)
    derivatives = ev.gate_derivatives  # of the quadratic part: the quartic adds nothing at α = 1
    ev.unary = unary.copy()
    ev.unary[cliff_block] += cliff  # L on {0, 1}^N: the quartic term is c where x_k = 1
    ev.gate_derivatives = lambda method="full_graph": (-unary.copy(), derivatives(method)[1])
    return ev


def test_cbo_ablation_avoids_a_block_the_gate_expansion_misses(tmp_path):
    """The exact-pairs control finds the optimum where cbo_taylor, trusting the expansion, keeps
    only sets that remove the catastrophic block (all its 16 re-ranked sets hold it)."""
    ev = cliff_objective()
    optimum = min(itertools.combinations(range(10), 3), key=lambda s: (ev.true_loss(s), s))
    assert 2 not in optimum
    taylor = search(ev, "cbo_taylor", 3, tmp_path, diagnostic_sets=0)
    assert 2 in taylor.removed and taylor.loss > ev.true_loss(optimum) + 5
    control = search(ev, "cbo_ablation", 3, tmp_path, diagnostic_sets=0)
    assert control.removed == optimum and control.hyperparameters["coefficients"] == "ablation"
    # its cost: ∅, every single and every pair, then the 16 re-ranked sets (docs/method.md §4.6)
    assert control.distinct_evaluations == 1 + 10 + 45 + 16


def test_cbo_ablation_is_a_control_kept_out_of_the_paper_statistics():
    import pandas as pd

    from depthprune.reporting.render import paper_only
    from depthprune.reporting.style import DENSE_MARKER, PAPER_ALGORITHMS, RANDOM_SET_MARKER, algorithm_name, is_control
    from depthprune.search import ALGORITHMS, STUDY_ALGORITHMS, get_algorithm

    assert is_control("cbo_ablation") and is_control("cbo_taylor") and not is_control("cbo")
    assert {"cbo_ablation", "cbo_taylor"} <= set(STUDY_ALGORITHMS) and "cbo" in PAPER_ALGORITHMS
    assert not {"cbo_ablation", "cbo_taylor"} & set(PAPER_ALGORITHMS)
    assert algorithm_name("cbo_ablation") == "CBO (exact pairs)" and algorithm_name("cbo_taylor") == "CBO (Taylor)"
    # each control computes what its name says; cbo is Jansen et al.'s Fisher energy (issue 67)
    assert [get_algorithm(n).resolve_params()["coefficients"] for n in ("cbo", "cbo_taylor", "cbo_ablation")] == [
        "fisher",
        "gradient",
        "ablation",
    ]
    # every search its own marker, none the dense model's or the random sets' (Figure 2 draws them all)
    markers = [cls.marker for cls in ALGORITHMS.values()]
    assert len(set(markers)) == len(markers) and not {DENSE_MARKER, RANDOM_SET_MARKER} & set(markers)
    frame = pd.DataFrame({"algorithm": ["dense", "one_shot", "cbo", "cbo_ablation"]})
    assert list(paper_only(frame)["algorithm"]) == ["dense", "one_shot", "cbo"]

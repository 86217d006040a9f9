"""CBO's diagnosis tools (search/cbo_diagnostics.py, issues 56 and 67) on the tiny real model: the
expansion's error at M = 1 and 2, and the re-ranked K lowest-energy sets against brute force, for
``cbo_taylor``'s second-order expansion and ``cbo``'s Fisher energy."""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest
import torch

from depthprune.calibration import CalibrationSetup
from depthprune.engine.evaluator import SubsetEvaluator
from depthprune.io import format_layers
from depthprune.models import load_model
from depthprune.models.loading import LoadedModel
from depthprune.search.cbo_diagnostics import ablation_terms, count_below, diagnose, random_sets


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return load_model(str(tiny_model_dir), device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def objective(tiny, data_dir):
    setup = CalibrationSetup("ppl_c4", data_dir=data_dir, n_samples=2, seq_len=16, seed=1)
    return setup.build_objective(tiny.tokenizer, 128)


def scaled(tiny, scale: float) -> LoadedModel:
    """A float64 copy of the tiny model with every block's residual update f_i scaled by ``scale``
    (its output projections). The random tiny model's updates are 4x its embeddings' norm (0.6
    against 0.15): removing one changes the residual stream by far more than a small step, so its
    expansion is no better than SmolLM2's. Scaled by 0.04 or less they are a small perturbation,
    the regime where a second-order expansion must hold; float64 keeps the third-order remainder
    (1e-5 of a loss of 10.8) above rounding."""
    model = copy.deepcopy(tiny.model).double()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                param.mul_(scale)
    return LoadedModel(model, tiny.tokenizer, tiny.spec, f"{tiny.name}-x{scale}", tiny.path)


def run(loaded, objective, coefficients="gradient", **kw):
    evaluator = SubsetEvaluator(loaded, objective, calibration="ppl_c4", protected=(0, 7))
    settings = {"seed": 0, "budgets": [2, 3], "model_error_budgets": [1, 2], "ks": [1, 4, 15], "n_random": 3}
    settings.update(kw)
    return evaluator, diagnose(evaluator, all_pairs=True, params={"coefficients": coefficients}, **settings)


@pytest.fixture(scope="module")
def diagnosed(tiny, objective):
    return run(scaled(tiny, 0.04), objective)


def test_expansion_error_is_third_order_at_m1_and_m2(tiny, objective, diagnosed):
    """L(∅) + E(x) is L's second-order Taylor polynomial in the gates at α = 1, evaluated at the
    removal step Δα = −x. Halving every block's update f_i halves the scale of each α-derivative per
    order, so the remainder, third order, must shrink about 2³ = 8-fold (measured: 8.7 at M = 1, 12
    at M = 2) while the losses' spread only halves. A wrong factor (½ missing, a sign, H transposed
    or mis-indexed) leaves a second- or first-order error, which shrinks at most 4-fold: the bound
    1/5 tells them apart. At the smaller scale the prediction must also rank the sets: its error
    under 5 % of the spread of the losses (measured 0.8 % at M = 1, 1.5 % at M = 2)."""
    _, coarse = diagnosed
    _, fine = run(scaled(tiny, 0.02), objective, budgets=[2], ks=[1])
    for budget in (1, 2):
        big = coarse.model_error.set_index("budget").loc[budget]
        small = fine.model_error.set_index("budget").loc[budget]
        assert big["n_sets"] == small["n_sets"] == math.comb(6, budget)  # every single, every pair of 6 blocks
        assert small["mean_abs_error"] < big["mean_abs_error"] / 5
        assert small["abs_error_over_std"] < 0.05 and small["spearman"] > 0.95


def test_topk_matches_brute_force(diagnosed):
    """Every M-set's true loss and energy computed here directly (x-vector form −gᵀx + ½xᵀHx from
    the evaluator's derivatives): the K lowest-energy sets, their best true loss, one-shot's set
    and its energy rank must be the diagnosis's."""
    evaluator, result = diagnosed
    g, h = evaluator.gate_derivatives()
    allowed = [1, 2, 3, 4, 5, 6]
    single = {i: evaluator.loss((i,)) for i in allowed}
    for budget in (2, 3):
        sets = list(itertools.combinations(allowed, budget))  # lexicographic: ties go to the first
        energy = []
        for s in sets:
            x = np.zeros(8)
            x[list(s)] = 1.0
            energy.append(-g @ x + 0.5 * x @ (0.5 * (h + h.T)) @ x)
        loss = [evaluator.loss(s) for s in sets]
        order = np.argsort(energy, kind="stable")
        one_shot = tuple(sorted(sorted(allowed, key=lambda i: (single[i], i))[:budget]))
        one_shot_energy = energy[sets.index(one_shot)]
        for k in (1, 4, 15):
            top = order[:k]
            best = top[np.argmin([loss[i] for i in top])]
            row = result.topk.query("energy == 'gradient' and budget == @budget and k == @k").iloc[0]
            assert row["best_set"] == format_layers(sets[best])
            assert row["best_loss"] == pytest.approx(loss[best], rel=1e-12)
            assert row["one_shot_set"] == format_layers(one_shot)
            assert row["one_shot_energy_rank"] == 1 + sum(e < one_shot_energy for e in energy)
        if budget == 2:  # K = 15 = C(6, 2): the re-ranking sees every set, so it finds the optimum
            assert row["best_loss"] == pytest.approx(min(loss), rel=1e-12)
        ranked = result.sets.query("kind == 'lowest_gradient' and budget == @budget").sort_values("rank")
        assert list(ranked["removed"]) == [format_layers(sets[i]) for i in order[:15]]
        assert np.allclose(ranked["energy"], np.asarray(energy)[order[:15]], rtol=1e-9, atol=1e-12)
    solver = result.solver.set_index(["energy", "budget"])
    assert (solver["solver"] == "exact").all() and (solver["solver_sets_in_exact_top"] == solver["rerank"]).all()


def test_fisher_diagnosis_ranks_by_the_fisher_energy_and_checks_its_first_order_expansion(tiny, objective):
    """``cbo``'s energy (``coefficients: fisher``): the diagnosis ranks every M-set by E = xᵀ(AᵀA/m)x
    from the evaluator's own per-sample rows, and its predicted loss is L(∅) − āᵀx, the first-order
    expansion the rows encode. Its remainder is second order: halving every block's update must shrink
    the error about 4-fold (a wrong sign or a missing factor leaves a first-order error, at most
    2-fold), and the record gives A's size and rank. The scales are smaller than the second-order
    test's: the third-order term still competes at 0.04 (measured ratios 7.1, 2.7, 3.8, 4.3 from 0.08
    down to 0.005 at M = 1; 3.8 and 4.3 at M = 2 from 0.01 to 0.005)."""
    evaluator, coarse = run(scaled(tiny, 0.01), objective, coefficients="fisher", ks=[1, 15])
    a = evaluator.gate_fisher_rows()
    allowed = [1, 2, 3, 4, 5, 6]
    assert coarse.record["fisher_samples"] == a.shape[0] == 2
    assert coarse.record["fisher_rank"] == np.linalg.matrix_rank(a[:, allowed])
    sets = list(itertools.combinations(allowed, 2))
    x = np.zeros((len(sets), 8))
    for row, s in enumerate(sets):
        x[row, list(s)] = 1.0
    energy = np.mean((x @ a.T) ** 2, axis=1)
    ranked = coarse.sets.query("kind == 'lowest_fisher' and budget == 2").sort_values("rank")
    order = np.argsort(energy, kind="stable")
    assert list(ranked["removed"]) == [format_layers(sets[i]) for i in order]
    assert np.allclose(ranked["energy"], energy[order], rtol=1e-9, atol=1e-15)
    pairs = coarse.sets.query("kind == 'pair'").set_index("removed")
    dense = evaluator.loss(())
    for row, s in enumerate(sets):
        assert pairs.loc[format_layers(s), "predicted_loss"] == pytest.approx(
            dense - a.mean(axis=0) @ x[row], rel=1e-12
        )
    _, fine = run(scaled(tiny, 0.005), objective, coefficients="fisher", budgets=[2], ks=[1])
    for budget in (1, 2):
        big = coarse.model_error.set_index("budget").loc[budget, "mean_abs_error"]
        small = fine.model_error.set_index("budget").loc[budget, "mean_abs_error"]
        assert small < big / 3


def test_ablation_energy_is_exact_on_pairs(diagnosed):
    """The ablation energy (cbo's `coefficients: ablation`) reproduces every pair's loss exactly."""
    evaluator, result = diagnosed
    dense = evaluator.loss(())
    allowed = [1, 2, 3, 4, 5, 6]
    single = np.array([evaluator.loss((i,)) for i in allowed])
    pair = np.array([[evaluator.loss(tuple(sorted({a, b}))) if a != b else 0.0 for b in allowed] for a in allowed])
    linear, quadratic = ablation_terms(dense, single, pair)
    for a, b in itertools.combinations(range(6), 2):
        assert dense + linear[a] + linear[b] + quadratic[a, b] == pytest.approx(pair[a, b], rel=1e-12)
    ranked = result.sets.query("kind == 'lowest_ablation' and budget == 2")
    assert np.allclose(ranked["predicted_loss"], ranked["loss"], rtol=1e-12)


def test_counting_and_drawing_helpers():
    rng = np.random.default_rng(0)
    linear, quadratic = rng.normal(size=7), rng.normal(size=(7, 7))
    quadratic = quadratic + quadratic.T
    combos = list(itertools.combinations(range(7), 3))
    brute = [linear[list(c)].sum() + 0.5 * sum(quadratic[a, b] for a in c for b in c) for c in combos]
    threshold = float(np.median(brute))
    assert count_below(linear, quadratic, 3, threshold, chunk_size=4) == sum(e < threshold for e in brute)
    drawn = random_sets(7, 3, 10, np.random.default_rng(1))
    assert len(set(drawn)) == 10 and all(len(s) == 3 and list(s) == sorted(s) for s in drawn)
    assert random_sets(4, 2, 10, rng) == list(itertools.combinations(range(4), 2))  # fewer exist: all


def test_cli_refuses_bad_k(tmp_path, capsys):
    from depthprune.cli import main

    code = main(
        ["cbo-diagnose", "--model", "tiny:llama-8", "--calibration", "ppl_c4", "--k", "0", "--out", str(tmp_path)]
    )
    assert code == 2 and "--k" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_committed_runs_pairs_cbo_with_one_shot_and_reads_its_diagnostic(tmp_path):
    import json

    import pandas as pd

    from depthprune.search.cbo_diagnostics import committed_runs

    rows = [
        ("ppl_c4", 0, 7, "cbo", 7.5),
        ("ppl_c4", 0, 7, "one_shot", 4.5),
        ("tlm_cs170k", 1, 9, "cbo", -2.0),
        ("tlm_cs170k", 1, 9, "one_shot", -1.0),
        ("tlm_cs170k", 1, 9, "greedy", -3.0),
    ]
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, part in ((first, rows), (second, [("ppl_c4", 0, 7, "cbo", 99.0), ("ppl_c4", 0, 7, "one_shot", 1.0)])):
        folder.mkdir()
        frame = pd.DataFrame(part, columns=["calibration", "seed", "budget", "algorithm", "loss"])
        frame.assign(model="m").to_csv(folder / "selections.csv", index=False)
    run = tmp_path / "runs" / "m" / "tlm_cs170k" / "seed1" / "M9" / "cbo"
    run.mkdir(parents=True)
    diagnostics = {"energy_loss_spearman_random": 0.2, "energy_loss_spearman_reranked": -0.3}
    (run / "selection.json").write_text(json.dumps({"diagnostics": diagnostics}))
    table = committed_runs([str(first), str(second)], str(tmp_path / "runs")).set_index(["calibration", "seed"])
    assert len(table) == 2  # the first aggregate naming a run wins
    ppl, tlm = table.loc[("ppl_c4", 0)], table.loc[("tlm_cs170k", 1)]
    assert (ppl["cbo_loss"], ppl["one_shot_loss"], bool(ppl["cbo_fails"])) == (7.5, 4.5, True)
    assert not tlm["cbo_fails"] and tlm["committed_spearman_random"] == 0.2
    assert pd.isna(ppl["committed_spearman_reranked"])


def test_control_table_pairs_reruns_and_finds_the_best_known_loss(tmp_path):
    """Per committed cell: the re-run CBO (same set or not), the control, and the lowest loss any
    committed algorithm, control run or diagnosis set reached on that objective, with who reached it."""
    import json

    import pandas as pd

    from depthprune.search.cbo_diagnostics import committed_runs, control_markdown, control_table

    aggregate = tmp_path / "aggregate"
    aggregate.mkdir()
    rows = [
        ("ppl_c4", 0, 7, "cbo", 7.5, "1 2"),
        ("ppl_c4", 0, 7, "one_shot", 4.5, "3 4"),
        ("ppl_c4", 0, 7, "beam", 4.4, "3 5"),
        ("ppl_c4", 0, 9, "cbo", 8.0, "1 2 3"),
        ("ppl_c4", 0, 9, "one_shot", 5.0, "3 4 5"),
    ]
    frame = pd.DataFrame(rows, columns=["calibration", "seed", "budget", "algorithm", "loss", "removed"])
    frame.assign(model="m").to_csv(aggregate / "selections.csv", index=False)
    control = tmp_path / "control"
    for budget, algorithm, loss, removed in (
        (7, "cbo_taylor", 7.5, [2, 1]),
        (7, "cbo_ablation", 4.3, [3, 6]),
        (7, "cbo", 4.6, [2, 3]),
        (9, "cbo_taylor", 8.1, [1, 2, 4]),
    ):
        run = control / "m" / "ppl_c4" / "seed0" / f"M{budget}" / algorithm
        run.mkdir(parents=True)
        selection = {"model": "m", "calibration": "ppl_c4", "seed": 0, "budget": budget, "algorithm": algorithm}
        diagnostics = {"ground_state_loss": 5.1, "fisher_rank": 2} if algorithm == "cbo" else {}
        selection.update(loss=loss, removed=removed, diagnostics=diagnostics)
        (run / "selection.json").write_text(json.dumps(selection))
    diagnosis = tmp_path / "diagnosis" / "ppl_c4-seed0"
    diagnosis.mkdir(parents=True)
    sets = pd.DataFrame(
        [("m", "ppl_c4", 0, 9, 4.9, "2 4 6")], columns=["model", "calibration", "seed", "budget", "loss", "removed"]
    )
    sets.to_csv(diagnosis / "sets.csv", index=False)
    committed = committed_runs([str(aggregate)])
    table = control_table(committed, [str(aggregate)], [str(control)], str(tmp_path / "diagnosis")).set_index("budget")
    # the committed `cbo` rows are the expansion's, now cbo_taylor: its control run re-checks them
    assert table.loc[7, "cbo_taylor_loss"] == 7.5 and table.loc[7, "cbo_taylor_set_reproduced"]
    assert table.loc[7, "cbo_taylor_loss_rerun"] == 7.5 and table.loc[7, "cbo_taylor_fails"]
    assert (table.loc[7, "cbo_loss"], table.loc[7, "cbo_set"]) == (4.6, "2 3") and table.loc[7, "cbo_fails"]
    assert (table.loc[7, "cbo_ground_state_loss"], table.loc[7, "cbo_fisher_rank"]) == (5.1, 2)
    assert (table.loc[7, "cbo_ablation_loss"], table.loc[7, "cbo_ablation_set"]) == (4.3, "3 6")
    assert (table.loc[7, "best_known_loss"], table.loc[7, "best_known_by"]) == (4.3, "cbo_ablation (control run)")
    assert not table.loc[7, "cbo_ablation_fails"]
    assert not table.loc[9, "cbo_taylor_set_reproduced"]
    assert (table.loc[9, "best_known_loss"], table.loc[9, "best_known_by"]) == (4.9, "diagnosis (ppl_c4-seed0)")
    assert pd.isna(table.loc[9, "cbo_ablation_loss"]) and table.loc[9, "cbo_ablation_fails"] is None
    assert pd.isna(table.loc[9, "cbo_loss"]) and table.loc[9, "cbo_fails"] is None
    text = control_markdown(table.reset_index())
    assert "| ppl_c4 | 0 | 7 | 4.500 | 4.600 ✗ (5.100; 2) | 7.500 ✗ (7.500, same set) | 4.300 |" in text


def test_cbo_ablation_runs_through_the_registry_with_an_exact_pair_energy(tiny, objective, tmp_path):
    """The exact-pairs control on the tiny real model at M = 2: its energy is L({i, j}) − L(∅) for
    every pair, so its lowest-energy pair (rerank 1: no true-loss re-ranking to rescue it) is the
    best pair by brute force, and energy and true loss rank random pairs alike (ρ = 1). The gate
    expansion of cbo_taylor does not (its ρ on the same pairs is below 1)."""
    from depthprune.search.runner import run_search

    evaluator = SubsetEvaluator(tiny, objective, calibration="ppl_c4", protected=(0, 7))
    allowed = [1, 2, 3, 4, 5, 6]
    prior = [None if i in (0, 7) else evaluator.loss((i,)) for i in range(8)]
    best = min(itertools.combinations(allowed, 2), key=lambda s: (evaluator.loss(s), s))
    params = {"rerank": 1, "diagnostic_sets": 12}
    control = run_search(evaluator, "cbo_ablation", 2, prior, seed=0, workdir=tmp_path / "a", params=params)
    assert control.removed == best
    assert control.diagnostics["energy_loss_spearman_random"] == pytest.approx(1.0)
    assert control.distinct_evaluations == 1 + 6 + 15  # ∅, the singles, the pairs (the re-ranked one among them)
    taylor = run_search(evaluator, "cbo_taylor", 2, prior, seed=0, workdir=tmp_path / "g", params=params)
    assert taylor.diagnostics["energy_loss_spearman_random"] < 0.99


def test_method_doc_carries_the_committed_control_table():
    """Issue 56: docs/method.md §4.6's table of CBO and its control per committed cell is made from
    results/cbo_diagnosis/control.csv (`bash scripts/cbo_diagnose.sh --tables`), not typed."""
    from pathlib import Path

    import pandas as pd

    from depthprune.search.cbo_diagnostics import control_markdown

    repo = Path(__file__).resolve().parents[1]
    table = pd.read_csv(repo / "results" / "cbo_diagnosis" / "control.csv")
    assert len(table) == 18  # 16 cells of the four-seed study, 2 of the cross-control
    assert table["cbo_ablation_loss"].notna().all()
    assert control_markdown(table) in (repo / "docs" / "method.md").read_text(encoding="utf-8")

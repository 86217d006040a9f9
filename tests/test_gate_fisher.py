"""CBO as Jansen et al. wrote it (engine/gate_fisher.py; docs/method.md §4.6; issue 67): their gate
on a tiny real model, the per-sample gradient rows against a sample-by-sample computation, the
Fisher energy's sign, and the solver against enumeration."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from depthprune.calibration import CalibrationSetup
from depthprune.engine.dense_capture import capture_dense
from depthprune.engine.gate_fisher import fisher_energy, fisher_matrix, fisher_rows, gated_hidden
from depthprune.engine.scoring import scored_logprobs
from depthprune.models import family_for, load_model, materialise
from depthprune.search.cbo import anneal_lowest, exact_lowest


@pytest.fixture(scope="module")
def tiny64(tiny_model_dir):
    loaded = load_model(str(tiny_model_dir), device="cpu")
    return loaded.tokenizer, copy.deepcopy(loaded.model).double()


def objective_of(tokenizer, data_dir, calibration, **settings):
    size = {"ppl_c4": {"n_samples": 3, "seq_len": 16}, "tlm_cs170k": {"n_samples": 3, "seq_len": 40}}[calibration]
    setup = CalibrationSetup(calibration, data_dir=data_dir, seed=1, **{**size, **settings})
    return setup.build_objective(tokenizer, token_budget=32 if calibration == "ppl_c4" else 8192)


def dense_and_removed(model, family, batch, removed: int):
    """The input of the final norm: dense, and with block ``removed`` skipped (the others replayed
    with the keyword arguments the model's forward gives them)."""
    capture = capture_dense(model, family, [batch], torch.device("cpu"))
    hidden, kwargs = capture.embeddings[0], capture.block_kwargs[0]
    dense = skipped = hidden
    with torch.no_grad():
        for k, block in enumerate(family.blocks(model)):
            dense = block(dense, **kwargs[k])
            if k != removed:
                skipped = block(skipped, **kwargs[k])
    return dense, skipped


@pytest.mark.parametrize("spec", ["tiny:llama-8", "tiny:gemma3-4"])
def test_their_gate_is_the_dense_model_at_one_and_removes_the_block_at_zero(spec, model_cache_dir, data_dir):
    """α = 1 everywhere reproduces the dense forward; α_k = 0 equals skipping block k exactly (both
    branches, the MLP's input already without the attention's update). Gemma's branches end in a
    norm, which the gate must follow, or α would be normalised away."""
    loaded = load_model(str(materialise(spec, model_cache_dir)), device="cpu")
    model, family = loaded.model, family_for(loaded.model)
    batch = objective_of(loaded.tokenizer, data_dir, "ppl_c4").batches[0]
    n = len(family.blocks(model))
    removed = n // 2
    dense, skipped = dense_and_removed(model, family, batch, removed)
    with torch.no_grad():
        at_one = gated_hidden(model, family, batch, torch.ones(n), torch.device("cpu"))
        alpha = torch.ones(n)
        alpha[removed] = 0.0
        at_zero = gated_hidden(model, family, batch, alpha, torch.device("cpu"))
        half = alpha.clone()
        half[removed] = 0.5
        at_half = gated_hidden(model, family, batch, half, torch.device("cpu"))
    assert torch.equal(at_one, dense)
    assert torch.equal(at_zero, skipped)
    assert not torch.allclose(at_half, dense) and not torch.allclose(at_half, skipped)  # the gate acts


@pytest.mark.parametrize(
    "calibration,settings",
    [("ppl_c4", {}), ("tlm_cs170k", {}), ("tlm_cs170k", {"tlm_loss": "cross_entropy"})],
)
def test_fisher_rows_equal_per_sample_gradients_taken_one_at_a_time(tiny64, data_dir, calibration, settings):
    """Row s of A is ∂ℓ_s/∂α with ℓ_s = m × sample s's share of L: recomputed here sample by sample,
    each by its own forward over its whole batch and its own backward, in float64; and ``E(x)``
    is the mean over samples of (A_s · x)² and equals xᵀHx."""
    tokenizer, model = tiny64
    family = family_for(model)
    objective = objective_of(tokenizer, data_dir, calibration, **settings)
    a = fisher_rows(model, family, objective, torch.device("cpu"))
    m, n = objective.n_samples, len(family.blocks(model))
    assert a.shape == (m, n)
    brute = {}
    for batch in objective.batches:
        total = None
        for sample in sorted(objective.sample_shares(batch, torch.zeros(len(batch.targets), dtype=torch.float64))):
            alpha = torch.ones(n, dtype=torch.float64, requires_grad=True)
            hidden = gated_hidden(model, family, batch, alpha, torch.device("cpu"))
            logprobs = scored_logprobs(model, family, batch, hidden, torch.device("cpu"))
            shares = objective.sample_shares(batch, logprobs)
            (grad,) = torch.autograd.grad(m * shares[sample], alpha)
            brute[sample] = grad.numpy()
            total = sum(shares.values()) if total is None else total
        loss = objective.batch_loss(batch, logprobs)
        assert float(total.detach()) == pytest.approx(float(loss.detach()), rel=1e-12)  # shares sum to L's
    expected = np.stack([brute[s] for s in sorted(brute)])
    # The LM head takes its logsumexp in float32 at least (engine/scoring.py), so rows batched
    # differently agree to about float32's resolution; a wrong row, order or scale is off by its size.
    assert np.allclose(a, expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())
    rng = np.random.default_rng(0)
    x = (rng.random((50, n)) < 0.4).astype(float)
    energy = fisher_energy(a, x)
    by_samples = np.array([np.mean([(a[s] @ xi) ** 2 for s in range(m)]) for xi in x])
    assert np.allclose(energy, by_samples, rtol=1e-12)
    assert np.allclose(energy, np.einsum("bi,ij,bj->b", x, fisher_matrix(a), x), rtol=1e-9)


def test_a_row_is_the_first_order_change_of_its_sample_loss(tiny64, data_dir):
    """One entry of A against a central finite difference of ℓ_s in the gate (float64 model; the
    head's float32 logsumexp keeps the step at 1e-3, where the difference is good to about 1e-3)."""
    tokenizer, model = tiny64
    family = family_for(model)
    objective = objective_of(tokenizer, data_dir, "ppl_c4")
    a = fisher_rows(model, family, objective, torch.device("cpu"))
    batch = objective.batches[0]
    sample = min(objective.sample_shares(batch, torch.zeros(len(batch.targets), dtype=torch.float64)))
    n, m, k, eps = a.shape[1], objective.n_samples, 3, 1e-3

    def loss_at(value: float) -> float:
        alpha = torch.ones(n, dtype=torch.float64)
        alpha[k] = value
        with torch.no_grad():
            hidden = gated_hidden(model, family, batch, alpha, torch.device("cpu"))
            shares = objective.sample_shares(batch, scored_logprobs(model, family, batch, hidden, torch.device("cpu")))
        return m * float(shares[sample])

    finite = (loss_at(1 + eps) - loss_at(1 - eps)) / (2 * eps)
    assert a[0, k] == pytest.approx(finite, rel=2e-3)  # row 0: the smallest sample id


def test_the_fisher_energy_is_never_negative():
    rng = np.random.default_rng(1)
    for m, n in ((3, 10), (8, 28), (40, 12)):
        a = rng.normal(size=(m, n)) * rng.lognormal(size=n)
        x = rng.normal(size=(500, n))
        assert (fisher_energy(a, x) >= 0).all()
        assert (fisher_energy(a, (rng.random((500, n)) < 0.3).astype(float)) >= 0).all()
        assert np.linalg.eigvalsh(fisher_matrix(a)).min() >= -1e-10 * np.abs(fisher_matrix(a)).max()
        assert np.linalg.matrix_rank(a) <= min(m, n)


@pytest.mark.parametrize("m,n,budget", [(8, 20, 5), (4, 16, 7), (30, 18, 3)])
def test_the_solver_finds_the_enumerations_ground_state(m, n, budget):
    """Swap-move annealing on E(x) = xᵀHx (no linear term) reaches the ground state that exact
    enumeration finds; rank-deficient H (m < n) included."""
    rng = np.random.default_rng(m * 100 + n)
    a = rng.normal(size=(m, n)) * rng.lognormal(0, 1, size=n)
    quadratic = 2 * fisher_matrix(a)  # the solvers minimise linearᵀx + ½xᵀQx
    linear = np.zeros(n)
    exact = exact_lowest(linear, quadratic, budget, 1, 10_000)[0]
    annealed = anneal_lowest(
        linear, quadratic, budget, 1, rng=np.random.default_rng(0), restarts=16, steps=4000, final_ratio=1e-3
    )[0]
    assert annealed[1] == exact[1]
    assert annealed[0] == pytest.approx(exact[0], rel=1e-9, abs=1e-12)
    assert exact[0] == pytest.approx(float(fisher_energy(a, np.isin(np.arange(n), exact[1]))), rel=1e-9)


def test_cbo_with_the_fisher_energy_runs_through_the_registry_and_reports_the_rank(tiny_model_dir, data_dir, tmp_path):
    """`cbo` with `coefficients: fisher` on the tiny real model: its lowest-energy set (rerank 1, no
    re-ranking by the true loss) is the Fisher energy's ground state among the allowed blocks, the
    protected blocks stay, and the diagnostics give A's size and rank (at most the 2 samples)."""
    import itertools

    from depthprune.engine.evaluator import SubsetEvaluator
    from depthprune.search.runner import run_search

    loaded = load_model(str(tiny_model_dir), device="cpu", dtype="float32")
    objective = CalibrationSetup("ppl_c4", data_dir=data_dir, n_samples=2, seq_len=16, seed=1).build_objective(
        loaded.tokenizer, 128
    )
    evaluator = SubsetEvaluator(loaded, objective, calibration="ppl_c4", protected=(0, 7))
    prior = [None if i in (0, 7) else evaluator.loss((i,)) for i in range(8)]
    params = {"coefficients": "fisher", "rerank": 1, "diagnostic_sets": 0}
    result = run_search(evaluator, "cbo", 3, prior, seed=0, workdir=tmp_path / "f", params=params)
    a = evaluator.gate_fisher_rows()
    assert a.shape == (2, 8)
    allowed = range(1, 7)
    ground = min(
        itertools.combinations(allowed, 3), key=lambda s: (float(fisher_energy(a, np.isin(np.arange(8), s))), s)
    )
    assert result.removed == ground
    assert result.diagnostics["fisher_samples"] == 2 and result.diagnostics["fisher_rank"] == 2

"""The crossed two-stage interval across seeds (docs/method.md §10): variance components with
documents shared by every seed, a t-based seed stage, and its coverage in simulated studies."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import t as student_t

from depthprune.reporting.statistics.two_stage import two_stage


def symmetric(centre: float, half_width: float, n: int = 2000) -> np.ndarray:
    """Document replicates ±half_width around centre, alternating: variance half_width² (ddof 0)."""
    return centre + half_width * np.where(np.arange(n) % 2 == 0, 1.0, -1.0)


def test_shared_document_error_is_not_counted_as_seed_variance_by_hand():
    n = 2000
    ddof = n / (n - 1)
    # The same documents move both seeds the same way (covariance = variance): none of the seeds'
    # spread is document error, all of var(1, 3) = 2 is seed variance.
    shared = two_stage({0: 1.0, 1: 3.0}, {0: symmetric(1.0, 0.5), 1: symmetric(3.0, 0.5)})
    assert shared.document_variance == pytest.approx(0.25 * ddof)
    assert shared.document_covariance == pytest.approx(0.25 * ddof)
    assert shared.seed_variance == pytest.approx(2.0)
    # SE² = seed variance / S + variance of the mean over seeds' document replicates (0.25, shared)
    se2 = 2.0 / 2 + 0.25 * ddof
    assert shared.standard_error == pytest.approx(np.sqrt(se2))
    dof = se2**2 / ((2.0 / 2) ** 2 / 1)  # Welch–Satterthwaite: the seed stage has S − 1 = 1 df
    assert shared.degrees_of_freedom == pytest.approx(dof)
    half = student_t.ppf(0.975, dof) * np.sqrt(se2)
    assert (shared.ci_low, shared.ci_high) == (pytest.approx(2.0 - half), pytest.approx(2.0 + half))
    # Opposite document errors (covariance −0.25): 0.5 of the spread is document error, and the
    # mean over seeds has no document variance left.
    opposite = two_stage({0: 1.0, 1: 3.0}, {0: symmetric(1.0, 0.5), 1: symmetric(3.0, -0.5)})
    assert opposite.document_covariance == pytest.approx(-0.25 * ddof)
    assert opposite.seed_variance == pytest.approx(2.0 - 0.5 * ddof)
    assert opposite.standard_error == pytest.approx(np.sqrt((2.0 - 0.5 * ddof) / 2))
    assert (shared.seeds_below, shared.seeds_above) == (0, 2)


def test_one_seed_has_only_the_document_stage_and_no_seed_variance():
    result = two_stage({3: -1.0}, {3: symmetric(-1.0, 0.2)})
    assert result.estimate == -1.0
    assert (result.ci_low, result.ci_high) == (pytest.approx(-1.2), pytest.approx(-0.8))
    assert np.isnan(result.seed_variance)
    assert result.seeds_below == 1


def test_seed_order_does_not_change_the_interval():
    observed = {2: 0.3, 0: -0.1, 1: 0.2}
    rng = np.random.default_rng(1)
    reps = {s: v + rng.normal(0, 0.1, 100) for s, v in observed.items()}
    reordered = {s: observed[s] for s in (1, 0, 2)}
    assert two_stage(observed, reps) == two_stage(reordered, reps)


def test_seeds_bootstrapped_on_different_resamples_are_refused():
    with pytest.raises(ValueError, match="same resamples of the same documents"):
        two_stage({0: 1.0, 1: 2.0}, {0: symmetric(1.0, 0.1, 100), 1: symmetric(2.0, 0.1, 50)})


def simulated_studies(n_studies, n_seeds, n_documents, n_resamples, seed_sd, shared_sd, own_sd, rng):
    """Per study, each seed's estimate (the mean over documents of μ + a_seed + u_document +
    v_seed,document, μ = 0) and its document replicates, every seed bootstrapped on the same
    resamples of the same documents (the design's crossing)."""
    for _ in range(n_studies):
        scores = (
            rng.normal(0, seed_sd, (n_seeds, 1))
            + rng.normal(0, shared_sd, (1, n_documents))
            + rng.normal(0, own_sd, (n_seeds, n_documents))
        )
        draws = rng.integers(0, n_documents, (n_resamples, n_documents))
        weights = np.zeros((n_resamples, n_documents))
        np.add.at(weights, (np.arange(n_resamples)[:, None], draws), 1.0)
        replicates = weights @ scores.T / n_documents  # (B, S): resample b is shared by the seeds
        yield {s: float(v) for s, v in enumerate(scores.mean(axis=1))}, {s: replicates[:, s] for s in range(n_seeds)}


def test_crossed_design_recovers_both_components_and_covers_near_nominal():
    """Known components: seed variance 1; one seed's document variance (6² + 2²)/60, of which 6²/60
    is shared by every seed (the same documents). Over 400 simulated four-seed studies the estimates
    average to the truth and the 95 % interval covers the true mean about 95 % of the time. The
    design's premise matters: read as independent documents per seed, the seed variance would
    average 1 + 4/60 − 40/60 = 0.4 and the interval would cover far less."""
    rng = np.random.default_rng(20_261_205)
    n_documents = 60
    results = [
        two_stage(observed, replicates)
        for observed, replicates in simulated_studies(400, 4, n_documents, 300, 1.0, 6.0, 2.0, rng)
    ]
    bootstrap_factor = (n_documents - 1) / n_documents  # the bootstrap's plug-in variance of a mean
    seed_variance = np.mean([r.seed_variance for r in results])
    document_variance = np.mean([r.document_variance for r in results])
    covariance = np.mean([r.document_covariance for r in results])
    assert seed_variance == pytest.approx(1.0, abs=0.15)
    assert document_variance == pytest.approx(40 / n_documents * bootstrap_factor, rel=0.05)
    assert covariance == pytest.approx(36 / n_documents * bootstrap_factor, rel=0.05)
    coverage = np.mean([r.ci_low <= 0.0 <= r.ci_high for r in results])
    assert 0.91 <= coverage <= 0.99

"""The two-stage bootstrap across seeds (docs/method.md §10) against a hand-computed decomposition."""

from __future__ import annotations

import numpy as np
import pytest

from depthprune.reporting.statistics.two_stage import two_stage


def symmetric(centre: float, half_width: float, n: int = 2000) -> np.ndarray:
    """Document replicates ±half_width around centre, half each: variance half_width² (ddof 0)."""
    return centre + half_width * np.where(np.arange(n) % 2 == 0, 1.0, -1.0)


def test_two_seed_variance_decomposition_by_hand():
    # Seed estimates 1 and 3; document replicates ±0.5 around each (variance 0.25).
    observed = {0: 1.0, 1: 3.0}
    result = two_stage(observed, {0: symmetric(1.0, 0.5), 1: symmetric(3.0, 0.5)}, n_resamples=20_000)
    assert result.estimate == pytest.approx(2.0)
    assert result.n_seeds == 2
    # document variance: the replicates' variance (ddof 1 over 2000 values)
    assert result.document_variance == pytest.approx(0.25 * 2000 / 1999)
    # seed variance: var(1, 3) with ddof 1 = 2, less the document variance
    assert result.seed_variance == pytest.approx(2.0 - 0.25 * 2000 / 1999)
    # A replicate is the mean of two draws, each a seed drawn uniformly (bootstrap variance of {1, 3}
    # with ddof 0 = 1) plus a document replicate (variance 0.25): Var = (1 + 0.25) / 2 = 0.625.
    # Its values are the means of two of {0.5, 1.5, 2.5, 3.5}: the 2.5 % and 97.5 % quantiles are
    # 0.5 and 3.5 (each extreme has probability 1/16 > 2.5 %).
    assert (result.ci_low, result.ci_high) == (0.5, 3.5)
    assert (result.seeds_below, result.seeds_above) == (0, 2)


def test_replicate_variance_matches_the_two_stage_formula():
    rng = np.random.default_rng(0)
    observed = {s: float(v) for s, v in enumerate([0.0, 1.0, 2.0, 5.0])}
    reps = {s: v + rng.normal(0.0, 0.5, 4000) for s, v in observed.items()}
    result = two_stage(observed, reps, n_resamples=40_000)
    values = np.array(list(observed.values()))
    # S draws of (seed, document): Var(mean) = (var_ddof0(seeds) + document variance) / S
    expected_sd = np.sqrt((values.var() + 0.25) / 4)
    width = (result.ci_high - result.ci_low) / (2 * 1.959964)
    assert width == pytest.approx(expected_sd, rel=0.1)
    assert result.seed_variance == pytest.approx(values.var(ddof=1) - 0.25, rel=0.05)


def test_one_seed_has_only_the_document_stage_and_no_seed_variance():
    result = two_stage({3: -1.0}, {3: symmetric(-1.0, 0.2)}, n_resamples=1000)
    assert result.estimate == -1.0
    assert (result.ci_low, result.ci_high) == (pytest.approx(-1.2), pytest.approx(-0.8))
    assert np.isnan(result.seed_variance)
    assert result.seeds_below == 1


def test_seed_order_does_not_change_the_interval():
    observed = {2: 0.3, 0: -0.1, 1: 0.2}
    reps = {s: symmetric(v, 0.1, 100) for s, v in observed.items()}
    reordered = {s: observed[s] for s in (1, 0, 2)}
    assert two_stage(observed, reps, n_resamples=500) == two_stage(reordered, reps, n_resamples=500)

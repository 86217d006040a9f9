"""What agreement between pruned sets random sets would show: the nulls of every Jaccard statistic.

Two pruned sets of M layers out of N candidates agree by chance: for two independent uniform
M-subsets the intersection size K is hypergeometric, P(K = k) = C(M, k) C(N − M, M − k) / C(N, M),
and their Jaccard similarity is K / (2M − K). ``expected_random_jaccard`` sums it exactly over k.
Mean pairwise Jaccard over n sets has the same expectation; its permutation p-value (how often n
random M-subsets agree at least as much) is simulated from a generator seeded by the design, so it
does not depend on the bootstrap seed (docs/method.md §7, "Nulls for agreement").

§5.1's within − across statistic has an exact permutation test instead: under "calibration does not
matter" an algorithm's two sets are exchangeable between the calibrations, so the 2^A swaps of
their labels are equally likely (``within_across_permutation``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache

import numpy as np

NULL_DRAWS = 10_000  # random designs per simulated p-value: its resolution is 1 / 10,001
NULL_SEED = 20_240_924  # fixed: nulls are the same for every bootstrap seed


def expected_random_jaccard(n_layers: int, m: int) -> float:
    """E[|A∩B| / |A∪B|] for two independent uniform m-subsets of n_layers items (exact)."""
    if not 0 <= m <= n_layers:
        raise ValueError(f"set size {m} must be between 0 and the depth {n_layers}")
    if m == 0:
        return 1.0  # two empty sets are identical
    total = math.comb(n_layers, m)
    expectation = 0.0
    for k in range(max(0, 2 * m - n_layers), m + 1):
        expectation += math.comb(m, k) * math.comb(n_layers - m, m - k) / total * k / (2 * m - k)
    return expectation


def random_mean_jaccard(n_layers: int, m: int, n_sets: int, draws: int = NULL_DRAWS) -> np.ndarray:
    """Mean pairwise Jaccard of ``n_sets`` independent uniform m-subsets, ``draws`` times (seeded)."""
    return _random_mean_jaccard(int(n_layers), int(m), int(n_sets), int(draws)).copy()


@lru_cache(maxsize=64)
def _random_mean_jaccard(n_layers: int, m: int, n_sets: int, draws: int) -> np.ndarray:
    if n_sets < 2:
        return np.full(draws, np.nan)
    rng = np.random.default_rng([NULL_SEED, n_layers, m, n_sets])
    ranks = rng.random((draws, n_sets, n_layers)).argsort(axis=2).argsort(axis=2)
    member = (ranks < m).astype(np.float64)  # (draws, sets, layers): a uniform m-subset per set
    inter = np.einsum("dil,djl->dij", member, member)
    with np.errstate(invalid="ignore", divide="ignore"):
        jac = np.where(2 * m - inter > 0, inter / (2 * m - inter), 1.0)
    i, j = np.triu_indices(n_sets, k=1)
    return jac[:, i, j].mean(axis=1)


def random_mean_jaccard_range(n_layers: int, m: int, n_sets: int, level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` range of the mean pairwise Jaccard of ``n_sets`` random m-subsets: where
    an observed value from sets with no shared signal falls (simulated, seeded by the design)."""
    null = random_mean_jaccard(n_layers, m, n_sets)
    if not np.isfinite(null).any():
        return float("nan"), float("nan")
    tail = (1.0 - level) / 2.0
    return float(np.quantile(null, tail)), float(np.quantile(null, 1.0 - tail))


def draw_bootstrap_mean_jaccard(
    sets: Sequence[Iterable[int]], n_resamples: int = NULL_DRAWS, seed: int = NULL_SEED, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of the mean pairwise Jaccard of ``sets`` (one per calibration draw) over
    bootstrap resamples of the draws: draws are resampled with replacement and a draw is never paired
    with its own copy (that pair's Jaccard 1 measures nothing). NaN with fewer than three draws."""
    frozen = [frozenset(s) for s in sets]
    n = len(frozen)
    if n < 3:
        return float("nan"), float("nan")
    pairwise = np.array([[_jaccard(a, b) for b in frozen] for a in frozen])
    rng = np.random.default_rng([seed, n, n_resamples])
    picks = rng.integers(0, n, size=(n_resamples, n))
    i, j = np.triu_indices(n, k=1)
    first, second = picks[:, i], picks[:, j]
    distinct = first != second
    values = np.where(distinct, pairwise[first, second], 0.0).sum(axis=1)
    counts = distinct.sum(axis=1)
    means = values[counts > 0] / counts[counts > 0]
    tail = (1.0 - level) / 2.0
    return float(np.quantile(means, tail)), float(np.quantile(means, 1.0 - tail))


def p_value_at_least(observed: float, null: np.ndarray) -> float:
    """One-sided Monte-Carlo p-value P(null ≥ observed), (1 + hits) / (1 + draws)."""
    null = np.asarray(null, dtype=float)
    null = null[np.isfinite(null)]
    if not np.isfinite(observed) or null.size == 0:
        return float("nan")
    hits = int((null >= observed - 1e-12).sum())
    return (1 + hits) / (1 + null.size)


def agreement_null(n_layers: int, m: int, n_sets: int, observed: float) -> tuple[float, float]:
    """(expected mean pairwise Jaccard of random sets, p-value of ``observed``) for one cell."""
    if n_sets < 2 or not np.isfinite(observed):
        return float("nan"), float("nan")
    null = random_mean_jaccard(n_layers, m, n_sets)
    return expected_random_jaccard(n_layers, m), p_value_at_least(observed, null)


def pooled_agreement_null(cells: Sequence[tuple[int, int, int]], observed: float) -> tuple[float, float]:
    """The same for the mean over cells of their mean pairwise Jaccard; ``cells`` = (N, M, n_sets)."""
    cells = [c for c in cells if c[2] >= 2]
    if not cells or not np.isfinite(observed):
        return float("nan"), float("nan")
    expected = float(np.mean([expected_random_jaccard(n, m) for n, m, _ in cells]))
    null = np.mean([random_mean_jaccard(n, m, k) for n, m, k in cells], axis=0)
    return expected, p_value_at_least(observed, null)


def _jaccard(a: frozenset, b: frozenset) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def within_minus_across(sets: Mapping[tuple[str, str], Iterable[int]]) -> float:
    """Mean Jaccard of different algorithms' sets under one calibration minus the mean Jaccard of one
    algorithm's sets across the calibrations; ``sets`` maps (algorithm, calibration) -> layers."""
    frozen = {key: frozenset(value) for key, value in sets.items()}
    keys = sorted(frozen)
    within = [
        _jaccard(frozen[a], frozen[b]) for a, b in itertools.combinations(keys, 2) if a[1] == b[1] and a[0] != b[0]
    ]
    across = [
        _jaccard(frozen[a], frozen[b]) for a, b in itertools.combinations(keys, 2) if a[0] == b[0] and a[1] != b[1]
    ]
    if not within or not across:
        return float("nan")
    return float(np.mean(within) - np.mean(across))


def within_across_permutation(
    sets: Mapping[tuple[str, str], Iterable[int]], calibrations: Sequence[str]
) -> tuple[float, float]:
    """(observed within − across, exact one-sided permutation p-value) for two calibrations.

    Every algorithm with a set under both calibrations has its two labels swapped or not: all 2^A
    assignments are enumerated (A ≤ 16; the paper's seven give 128), and p is the share of them whose
    statistic is at least the observed one. The identity and the global swap both give the observed
    value, so p ≥ 2^(1−A) (1/64 for seven algorithms).
    """
    if len(calibrations) != 2:
        raise ValueError(f"the within − across permutation needs two calibrations, got {list(calibrations)}")
    first, second = calibrations
    observed = within_minus_across(sets)
    swappable = sorted({a for a, c in sets if c == first and (a, second) in sets})
    if not np.isfinite(observed) or not swappable:
        return observed, float("nan")
    if len(swappable) > 16:
        raise ValueError(f"{len(swappable)} algorithms: too many for exact enumeration of label swaps")
    stats = []
    for flips in itertools.product((False, True), repeat=len(swappable)):
        permuted = dict(sets)
        for algorithm, flip in zip(swappable, flips):
            if flip:
                permuted[(algorithm, first)], permuted[(algorithm, second)] = (
                    sets[(algorithm, second)],
                    sets[(algorithm, first)],
                )
        stats.append(within_minus_across(permuted))
    stats = np.asarray(stats)
    return observed, float((stats >= observed - 1e-12).mean())

"""Noise nulls: how a test behaves in a study where neither calibration nor algorithm has any effect.

A claim of comparability or of no effect ("calibration and algorithm shift accuracy comparably")
says something only if pure noise would seldom pass its test. The null study is simulated from the
study's own per-document results: inside one (model, M) cell, each document's scores (its 0/1
correctness on a task, or its NLL and token count on a perplexity window, moved together) are
shuffled among the cell's runs, independently per document (``permuted_units``). That keeps every
document's difficulty, every run's noise level and the pairing of runs on documents, and removes
every difference between the runs: the labels (calibration, algorithm) become exchangeable.

``pass_probability`` runs the claim's whole decision rule on such null studies, its percentile
interval included (a fresh paired bootstrap of INNER_RESAMPLES per null study), and returns the
share of them that pass. A test whose pass probability exceeds UNINFORMATIVE_LEVEL is reported as
``uninformative``: noise alone earns that verdict too often for it to mean anything
(docs/method.md §7, "Tests that can fail"). ``exceeds_noise`` is the one-sided permutation p-value
of an effect against the same null (for claims that an effect exists).

Every function takes the aggregate's tidy frames: ``samples`` (model, calibration, budget,
algorithm, removed, benchmark, unit, metric, value, headline, seed) restricted to one seed, and a
frame of runs (KEY columns, one row per run). Generators are seeded from NULL_SEED and the design,
so the render is reproducible and independent of the bootstrap seed.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS, ZERO_SHOT_BENCHMARKS
from depthprune.reporting.aggregate import KEY, TIE_DECIMALS

# 20 %: a verdict that a study with no effect at all reaches one time in five carries too little
# evidence to be reported as holding (docs/method.md §7 gives the reasoning).
UNINFORMATIVE_LEVEL = 0.20
NULL_STUDIES = 400  # simulated null studies per pass probability: MC SE ≤ 2.5 points at 20 %
INNER_RESAMPLES = 400  # bootstrap resamples per null study (the interval of the decision rule)
NULL_SEED = 20_260_502


@dataclass
class UnitScores:
    """Per-document scores of a set of runs: benchmark -> (values, tokens) arrays (runs, units);
    tokens only for the perplexity corpora scored by windows (NLL sums over token counts)."""

    runs: pd.DataFrame
    values: dict[str, np.ndarray]
    tokens: dict[str, np.ndarray | None]

    @property
    def n_runs(self) -> int:
        return len(self.runs)


def unit_scores(samples: pd.DataFrame, runs: pd.DataFrame, benchmarks: Sequence[str]) -> UnitScores | None:
    """The headline per-document values of ``runs`` (KEY columns) on ``benchmarks``; None when a run
    lacks one of them (a null needs every run on the same documents). A benchmark the study scored
    for no run is left out, as ``avg_accuracy`` leaves it out (an evaluation-only study's fewer tasks)."""
    head = samples[samples["headline"].astype(bool) & samples["benchmark"].isin(benchmarks)]
    scored = set(head["benchmark"].unique())
    benchmarks = [b for b in benchmarks if b in scored]
    if not benchmarks:
        return None
    keys = [tuple(r) for r in runs[KEY].itertuples(index=False)]
    # Each sample's run (the last of equal keys), looked up for all rows at once: a row-by-row lookup
    # over every sample of the study cost seconds per call.
    position = pd.Series(np.arange(len(keys)), index=pd.MultiIndex.from_tuples(keys, names=KEY))
    position = position[~position.index.duplicated(keep="last")]
    found = position.index.get_indexer(pd.MultiIndex.from_frame(head[KEY]))
    head = head.assign(_run=np.where(found >= 0, position.to_numpy()[found], -1))
    head = head[head["_run"] >= 0]
    values, tokens = {}, {}
    for benchmark in benchmarks:
        group = head[head["benchmark"] == benchmark]
        windowed = (group["metric"] == "nll_sum").any()
        main = group[group["metric"] == "nll_sum"] if windowed else group
        pivot = main.pivot(index="_run", columns="unit", values="value").reindex(range(len(keys)))
        if pivot.isna().any().any() or pivot.shape[1] == 0:
            return None
        values[benchmark] = pivot.to_numpy(dtype=float)
        if windowed:
            tok = group[group["metric"] == "n_tokens"].pivot(index="_run", columns="unit", values="value")
            tokens[benchmark] = tok.reindex(range(len(keys))).to_numpy(dtype=float)
        else:
            tokens[benchmark] = None
    return UnitScores(runs=runs.reset_index(drop=True), values=values, tokens=tokens)


def permuted_units(units: UnitScores, rng: np.random.Generator) -> UnitScores:
    """The same documents with each document's scores shuffled among the runs (one permutation per
    document, shared by a window's NLL and token count)."""
    values, tokens = {}, {}
    for benchmark, v in units.values.items():
        order = rng.random(v.shape).argsort(axis=0)  # (runs, units): a permutation per column
        columns = np.arange(v.shape[1])  # (indexing as np.take_along_axis does, without its overhead)
        values[benchmark] = v[order, columns]
        t = units.tokens[benchmark]
        tokens[benchmark] = t[order, columns] if t is not None else None
    return UnitScores(runs=units.runs, values=values, tokens=tokens)


def single_threaded_blas():
    """A context in which BLAS runs on one thread. A null study's products are small ((400 × ~100)
    by (~100 × runs)): a BLAS thread pool costs more to wake than they take, up to ~50× more on a
    busy machine. Each element's sum is computed the same way on one thread (the pool splits the
    output, not the sums): the rates do not change."""
    return threadpool_limits(limits=1, user_api="blas")


def _weights(n_units: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    draws = rng.integers(0, n_units, size=(n_resamples, n_units))
    flat = (draws + n_units * np.arange(n_resamples)[:, None]).ravel()
    return np.bincount(flat, minlength=n_resamples * n_units).reshape(n_resamples, n_units).astype(float)


def averages(units: UnitScores, kind: str, weights: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """(B, runs) average accuracy (``kind`` "accuracy": mean of the tasks' mean scores) or average
    perplexity ("perplexity": mean over corpora of exp(ΣNLL/Σtokens), LAMBADA exp(−mean loglik)),
    under bootstrap ``weights`` (benchmark -> (B, units)); without weights the observed values (B=1)."""
    names = [b for b in (ZERO_SHOT_BENCHMARKS if kind == "accuracy" else PERPLEXITY_BENCHMARKS) if b in units.values]
    parts = []
    for benchmark in names:
        v = units.values[benchmark]
        w = weights[benchmark] if weights is not None else np.ones((1, v.shape[1]))
        t = units.tokens[benchmark]
        if kind == "accuracy":
            parts.append((w @ v.T) / v.shape[1])
        elif t is not None:
            parts.append(np.exp((w @ v.T) / (w @ t.T)))
        else:
            parts.append(np.exp(-(w @ v.T) / v.shape[1]))
    return np.round(np.mean(parts, axis=0), TIE_DECIMALS)


def inner_weights(units: UnitScores, n_resamples: int, seed: Sequence[int]) -> dict[str, np.ndarray]:
    """Paired bootstrap weights per benchmark (the same documents for every run), seeded."""
    return {
        b: _weights(v.shape[1], n_resamples, np.random.default_rng([*seed, zlib.crc32(b.encode())]))
        for b, v in units.values.items()
    }


def verdict_rates(
    cells: Sequence[UnitScores],
    decide: Callable[[list[np.ndarray], list[np.ndarray]], Hashable],
    kind: str,
    n_null: int = NULL_STUDIES,
    n_inner: int = INNER_RESAMPLES,
    seed: int = NULL_SEED,
    rule: str | None = None,
) -> dict[Hashable, float]:
    """Share of null studies reaching each verdict of ``decide`` (``{}`` without cells).

    ``cells``: one UnitScores per (model, M) cell; each null study permutes every cell's documents
    independently. ``decide(observed, replicates)`` gets, per cell, the (1, runs) observed averages
    and the (n_inner, runs) bootstrap replicates of the null study and returns the claim's verdict
    under its rule (``True`` / ``False`` for a pass / no pass). ``rule`` names ``decide``: the rates
    of a named rule on the same cells are computed once per process (a render asks for a seed's
    accuracy null from its observations and again for its row of the cross-seed table)."""
    if not cells:
        return {}
    key = (rule, kind, n_null, n_inner, seed, fingerprint(cells)) if rule is not None else None
    if key is not None and key in _RATES:
        return dict(_RATES[key])
    rng = np.random.default_rng([seed, n_null, n_inner, *(c.n_runs for c in cells)])
    weights = [inner_weights(c, n_inner, (seed, i)) for i, c in enumerate(cells)]
    counts: dict[Hashable, int] = {}
    with single_threaded_blas():
        for _ in range(n_null):
            shuffled = [permuted_units(c, rng) for c in cells]
            observed = [averages(c, kind) for c in shuffled]
            replicates = [averages(c, kind, w) for c, w in zip(shuffled, weights)]
            verdict = decide(observed, replicates)
            counts[verdict] = counts.get(verdict, 0) + 1
    rates = {verdict: count / n_null for verdict, count in counts.items()}
    if key is not None:
        _RATES[key] = dict(rates)
    return rates


_RATES: dict[tuple, dict[Hashable, float]] = {}


def fingerprint(cells: Sequence[UnitScores]) -> str:
    """A digest of the cells' runs and per-document scores (what a null study is built from)."""
    digest = hashlib.blake2b(digest_size=16)
    for c in cells:
        digest.update(repr([tuple(r) for r in c.runs[KEY].itertuples(index=False)]).encode())
        for benchmark in sorted(c.values):
            digest.update(benchmark.encode())
            digest.update(np.ascontiguousarray(c.values[benchmark]).tobytes())
            tokens = c.tokens[benchmark]
            digest.update(b"-" if tokens is None else np.ascontiguousarray(tokens).tobytes())
    return digest.hexdigest()


def pass_probability(
    cells: Sequence[UnitScores],
    decide: Callable[[list[np.ndarray], list[np.ndarray]], bool],
    kind: str,
    n_null: int = NULL_STUDIES,
    n_inner: int = INNER_RESAMPLES,
    seed: int = NULL_SEED,
) -> float:
    """Share of null studies whose decision passes (``verdict_rates`` of a pass / no-pass rule); NaN
    without cells."""
    if not cells:
        return float("nan")
    rates = verdict_rates(cells, lambda o, r: bool(decide(o, r)), kind, n_null, n_inner, seed)
    return rates.get(True, 0.0)


def across_seeds_verdict_rates(
    cells_by_seed: Mapping[int, Sequence[UnitScores]],
    decide: Callable[[dict[int, list[np.ndarray]], dict[int, list[np.ndarray]]], Hashable],
    kind: str,
    n_null: int = NULL_STUDIES,
    n_inner: int = INNER_RESAMPLES,
    seed: int = NULL_SEED,
) -> dict[Hashable, float]:
    """Share of simulated null studies OF THE WHOLE MULTI-SEED STUDY reaching each verdict of the
    across-seeds rule ``decide(observed_by_seed, replicates_by_seed)`` (each: seed -> per cell, as
    ``verdict_rates``' arguments). A null study permutes every cell's documents among its runs,
    independently in every seed (no calibration or algorithm effect at any seed; each seed keeps its
    own runs' noise), and bootstraps every seed with the SAME document resamples (the design's
    documents are shared by the seeds, docs/method.md §10). ``{}`` without cells."""
    seeds = sorted(cells_by_seed)
    if not seeds or not all(cells_by_seed[s] for s in seeds):
        return {}
    shape = [(c.n_runs, tuple(v.shape[1] for v in c.values.values())) for c in cells_by_seed[seeds[0]]]
    for s in seeds:
        if [(c.n_runs, tuple(v.shape[1] for v in c.values.values())) for c in cells_by_seed[s]] != shape:
            raise ValueError(
                f"across-seeds noise null: seed {s}'s cells differ in runs or documents from seed {seeds[0]}"
            )
    rng = np.random.default_rng([seed, n_null, n_inner, len(seeds), *(n for n, _ in shape)])
    # One set of resamples for every seed: the seeds share their documents.
    weights = [inner_weights(c, n_inner, (seed, i)) for i, c in enumerate(cells_by_seed[seeds[0]])]
    counts: dict[Hashable, int] = {}
    with single_threaded_blas():
        for _ in range(n_null):
            observed, replicates = {}, {}
            for s in seeds:
                shuffled = [permuted_units(c, rng) for c in cells_by_seed[s]]
                observed[s] = [averages(c, kind) for c in shuffled]
                replicates[s] = [averages(c, kind, w) for c, w in zip(shuffled, weights)]
            verdict = decide(observed, replicates)
            counts[verdict] = counts.get(verdict, 0) + 1
    return {verdict: count / n_null for verdict, count in counts.items()}


def exceeds_noise(units: UnitScores, statistic: Callable[[np.ndarray], float], kind: str, n_null: int = 2000) -> float:
    """One-sided permutation p-value (1 + hits) / (1 + n_null) of ``statistic`` (a function of the
    (runs,) observed averages) against its values when every document's scores are shuffled among
    the runs: small when the effect exceeds what noise between these runs produces."""
    rng = np.random.default_rng([NULL_SEED, n_null, units.n_runs])
    observed = statistic(averages(units, kind)[0])
    if not np.isfinite(observed):
        return float("nan")
    with single_threaded_blas():
        null = np.array([statistic(averages(permuted_units(units, rng), kind)[0]) for _ in range(n_null)])
    return float((1 + int((null >= observed - 1e-12).sum())) / (1 + n_null))

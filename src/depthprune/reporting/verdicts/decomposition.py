"""Objective or data? The cross-control decomposition of the calibration effect (docs/method.md §9).

The paper's two calibrations change the loss and the data at once (its limitation 1). With the
cross-control ``ppl_cs170k`` (perplexity on the Commonsense-170k rows that ``tlm_cs170k`` draws),
the TLM − perplexity difference splits exactly into two steps that each change one factor:

    total     = tlm_cs170k − ppl_c4
    data      = ppl_cs170k − ppl_c4       (same objective, other data)
    objective = tlm_cs170k − ppl_cs170k   (same data, other objective)
    total     = data + objective

Each is the mean over the algorithms run under all three calibrations of the per-algorithm
difference (the paper's seven, paired by algorithm), for the average zero-shot accuracy (points) and
for log10 of the average perplexity (orders of magnitude). ``objective − data`` compares the two
steps directly. Intervals are 95 % percentile intervals of the paired document bootstrap
(``bootstrap.document_replicates``: the same resampled documents for every pruned model). A step
"moves" the response (verdict ``holds``) when its interval excludes zero, its end resolved against
the Monte-Carlo guard; under no effect at all a 95 % interval excludes zero about 5 % of the time
(``noise_pass_rate``), so the verdict can fail. An interval that contains zero is
``inconclusive``: no effect was detected, which is not evidence of no effect; ``mdd`` says what
the study could have detected.

The removed sets: for each step, the mean Jaccard of one algorithm's two sets (across), against the
mean Jaccard of two algorithms' sets under one calibration (within), with the exact permutation test
of ``nulls.within_across_permutation`` (labels of each algorithm's two sets swapped); the step moves
the layers (``holds``) when p < 0.05 (noise pass rate ≤ 5 % by construction). ``across`` stands
beside the central 95 % range of the mean Jaccard of as many random pairs of M-subsets of the
searches' candidates (``across_null_low/high``).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from depthprune.calibration.specs import cross_control
from depthprune.io import parse_layers
from depthprune.reporting.aggregate import DENSE_ALGORITHM
from depthprune.reporting.analysis.agreement import jaccard
from depthprune.reporting.analysis.frames import depth_of
from depthprune.reporting.statistics.bootstrap import interval_mc, mdd, resolved, standard_error
from depthprune.reporting.statistics.nulls import NULL_DRAWS, NULL_SEED, within_across_permutation
from depthprune.reporting.style import algorithm_sort_key

CROSS_CONTROL = cross_control()  # ("ppl_c4", "ppl_cs170k", "tlm_cs170k"), from the calibration registry
PPL_C4, PPL_CS170K, TLM_CS170K = CROSS_CONTROL
# step -> (from, to): the step's difference is `to` minus `from`
STEPS = {
    "data": (PPL_C4, PPL_CS170K),
    "objective": (PPL_CS170K, TLM_CS170K),
    "total": (PPL_C4, TLM_CS170K),
}
COMPARISON = "objective_minus_data"
# response -> scale (points, orders); informative_avg_accuracy: the mean over the dense model's
# informative tasks (reporting/statistics/informative.py), only when the summary carries it
RESPONSES = {"avg_accuracy": 100.0, "informative_avg_accuracy": 100.0, "log10_avg_perplexity": 1.0}
ALPHA = 0.05
MEAN_OVER_ALGORITHMS = "mean of the algorithms"
HOLDS, INCONCLUSIVE = "holds", "inconclusive"

EFFECT_COLUMNS = [
    "model",
    "budget",
    "response",
    "effect",
    "contrast",
    "algorithm",
    "n_algorithms",
    "estimate",
    "ci_low",
    "ci_high",
    "se",
    "mdd",
    "direction",
    "noise_pass_rate",
    "verdict",
]
SET_COLUMNS = [
    "model",
    "budget",
    "effect",
    "contrast",
    "n_algorithms",
    "n_candidates",
    "within",
    "across",
    "across_null_low",
    "across_null_high",
    "within_minus_across",
    "p_permutation",
    "noise_pass_rate",
    "verdict",
]


def has_cross_control(summary: pd.DataFrame) -> bool:
    """True when the study ran the three calibrations of the decomposition."""
    return set(CROSS_CONTROL) <= set(summary["calibration"])


def _response(frame: pd.DataFrame, response: str) -> np.ndarray:
    if response == "log10_avg_perplexity":
        return np.log10(frame["avg_perplexity"].to_numpy(float))
    return frame[response].to_numpy(float)


def _replicates(reps, runs: pd.DataFrame, response: str) -> np.ndarray:
    if reps is None or (response != "log10_avg_perplexity" and getattr(reps, response) is None):
        return np.full((1, len(runs)), np.nan)
    if response == "log10_avg_perplexity":
        return np.log10(reps.aligned(runs, "avg_perplexity"))
    return reps.aligned(runs, response)


def _verdict(lo: float, hi: float, se: float, estimate: float) -> tuple[str, str]:
    """(direction, verdict) of a difference from its interval; an end within MC_GUARD Monte-Carlo
    standard errors of zero is not resolved (bootstrap.resolved)."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "", ""
    direction = "higher" if lo > 0 else "lower" if hi < 0 else "level"
    if direction == "level":
        return direction, INCONCLUSIVE
    end, end_se = (lo, se[0]) if direction == "higher" else (hi, se[1])
    return direction, HOLDS if resolved(end, end_se, 0.0) else INCONCLUSIVE


def decomposition_table(summary: pd.DataFrame, reps=None) -> pd.DataFrame:
    """The data, objective and total steps (and objective − data) per (model, M, response, algorithm)."""
    if not has_cross_control(summary):
        return pd.DataFrame(columns=EFFECT_COLUMNS)
    pruned = summary[(summary["algorithm"] != DENSE_ALGORITHM) & summary["calibration"].isin(CROSS_CONTROL)]
    rows = []
    for (model, budget), cell in pruned.groupby(["model", "budget"], sort=True):
        complete = cell.groupby("algorithm")["calibration"].nunique()
        algorithms = sorted(complete[complete == len(CROSS_CONTROL)].index, key=algorithm_sort_key)
        if not algorithms:
            continue
        by_cal = {
            cal: cell[cell["calibration"] == cal].set_index("algorithm").loc[algorithms].reset_index()
            for cal in CROSS_CONTROL
        }
        for response, scale in RESPONSES.items():
            if response != "log10_avg_perplexity" and response not in cell.columns:
                continue
            observed = {cal: _response(frame, response) for cal, frame in by_cal.items()}
            replicated = {cal: _replicates(reps, frame, response) for cal, frame in by_cal.items()}
            diffs = {
                step: (observed[to] - observed[src], replicated[to] - replicated[src])
                for step, (src, to) in STEPS.items()
            }
            diffs[COMPARISON] = (
                diffs["objective"][0] - diffs["data"][0],
                diffs["objective"][1] - diffs["data"][1],
            )
            for step, (obs, rep) in diffs.items():
                contrast = f"{STEPS[step][1]} − {STEPS[step][0]}" if step in STEPS else "objective step − data step"
                columns = [(name, obs[j], rep[:, j]) for j, name in enumerate(algorithms)]
                columns.append((MEAN_OVER_ALGORITHMS, obs.mean(), rep.mean(axis=1)))
                for name, value, replicates in columns:
                    rows.append(
                        _effect_row(
                            model, budget, response, step, contrast, name, len(algorithms), value, replicates, scale
                        )
                    )
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def _effect_row(model, budget, response, step, contrast, algorithm, n_algorithms, value, replicates, scale) -> dict:
    lo, hi, se_lo, se_hi = interval_mc(replicates)
    se = standard_error(replicates)
    direction, verdict = _verdict(lo, hi, (se_lo, se_hi), value)
    return {
        "model": model,
        "budget": int(budget),
        "response": response,
        "effect": step,
        "contrast": contrast,
        "algorithm": algorithm,
        "n_algorithms": n_algorithms,
        "estimate": value * scale,
        "ci_low": lo * scale,
        "ci_high": hi * scale,
        "se": se * scale,
        "mdd": mdd(se) * scale,
        "direction": direction,
        "noise_pass_rate": ALPHA if verdict else np.nan,
        "verdict": verdict,
    }


def random_pairs_mean_jaccard(n_candidates: int, m: int, n_pairs: int, draws: int = NULL_DRAWS) -> np.ndarray:
    """Mean Jaccard of ``n_pairs`` independent pairs of uniform m-subsets, ``draws`` times (seeded by
    the design, as every null in nulls.py)."""
    rng = np.random.default_rng([NULL_SEED, n_candidates, m, n_pairs, 2])
    ranks = rng.random((draws, n_pairs, 2, n_candidates)).argsort(axis=3).argsort(axis=3)
    member = ranks < m
    inter = (member[:, :, 0] & member[:, :, 1]).sum(axis=2)
    return (inter / (2 * m - inter)).mean(axis=1)


def set_decomposition_table(selections: pd.DataFrame) -> pd.DataFrame:
    """Within − across Jaccard of the removed sets for each step, with its exact permutation p."""
    if selections.empty or not set(CROSS_CONTROL) <= set(selections["calibration"]):
        return pd.DataFrame(columns=SET_COLUMNS)
    rows = []
    for (model, budget), cell in selections.groupby(["model", "budget"], sort=True):
        cell = cell[cell["calibration"].isin(CROSS_CONTROL)]
        n_candidates = depth_of(cell)
        sets = {(r.algorithm, r.calibration): frozenset(parse_layers(r.removed)) for r in cell.itertuples()}
        for step, (src, to) in STEPS.items():
            pair = {k: v for k, v in sets.items() if k[1] in (src, to)}
            algorithms = sorted({a for a, c in pair if c == src and (a, to) in pair}, key=algorithm_sort_key)
            pair = {k: v for k, v in pair.items() if k[0] in algorithms}
            if len(algorithms) < 2:
                continue
            within = [
                jaccard(pair[(a, c)], pair[(b, c)]) for c in (src, to) for a, b in itertools.combinations(algorithms, 2)
            ]
            across = [jaccard(pair[(a, src)], pair[(a, to)]) for a in algorithms]
            observed, p = within_across_permutation(pair, (src, to))
            null = random_pairs_mean_jaccard(n_candidates, int(budget), len(algorithms))
            significant = np.isfinite(p) and p < ALPHA and observed > 0
            rows.append(
                {
                    "model": model,
                    "budget": int(budget),
                    "effect": step,
                    "contrast": f"{to} − {src}",
                    "n_algorithms": len(algorithms),
                    "n_candidates": n_candidates,
                    "within": float(np.mean(within)),
                    "across": float(np.mean(across)),
                    "across_null_low": float(np.quantile(null, 0.025)),
                    "across_null_high": float(np.quantile(null, 0.975)),
                    "within_minus_across": observed,
                    "p_permutation": p,
                    "noise_pass_rate": ALPHA,
                    "verdict": HOLDS if significant else INCONCLUSIVE,
                }
            )
    return pd.DataFrame(rows, columns=SET_COLUMNS)

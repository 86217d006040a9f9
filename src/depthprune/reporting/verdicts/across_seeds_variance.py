"""Across-seeds rows of issue 57 (docs/method.md §10), in ``tables/seeds_claims.csv``'s format
(``across_seeds.CLAIMS_COLUMNS``), for ``across_seeds.decision_table`` to append:

- §5.2 accuracy, "search-induced and configuration-induced variances are comparable": per (model, M)
  the split plot of S seeds × A algorithms × the paper's two calibrations
  (``statistics/variance_components.py``), the calibration and algorithm SDs with their F-tests
  (descriptive) and the SD ratio's equivalence test against [1/band, band] (the verdict, with the
  rule's own noise rates). The same decomposition of log10 average perplexity is descriptive.
- §5.1's second condition, draw stability: per calibration and (model, M), the mean over the
  algorithms of one algorithm's mean pairwise Jaccard across seeds (across calibration draws),
  against random sets' (``statistics/nulls.py``); holds when p < ALPHA, else inconclusive.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from depthprune.io import parse_layers
from depthprune.reporting.aggregate import DENSE_ALGORITHM
from depthprune.reporting.analysis.frames import CELL, depth_of
from depthprune.reporting.analysis.spread import paper_grid
from depthprune.reporting.statistics.nulls import (
    NULL_DRAWS,
    expected_random_jaccard,
    p_value_at_least,
    random_mean_jaccard,
)
from depthprune.reporting.statistics.variance_components import comparability
from depthprune.reporting.style import PAPER_CALIBRATIONS
from depthprune.reporting.verdicts.rules import DESCRIPTIVE, HOLDS, UNSURE, uninformative_under_noise
from depthprune.reporting.verdicts.seeds import set_stability

ALPHA = 0.05  # draw stability's one-sided test against random sets
RESPONSES = {"avg_accuracy_points": "accuracy (points)", "log10_avg_perplexity": "log10 avg perplexity (orders)"}
VERDICT_RESPONSE = "avg_accuracy_points"  # the paper's "variances are comparable" is about accuracy


def split_plots(summaries: Mapping[int, pd.DataFrame], response: str) -> dict[tuple, tuple[np.ndarray, list[str]]]:
    """(model, M) -> (y (S, A, C), algorithms): the response of every algorithm run under both paper
    calibrations in every seed, seeds in order. A cell missing from a seed is left out."""
    grids: dict[tuple, dict[int, tuple[np.ndarray, list[str]]]] = {}
    for seed in sorted(summaries):
        pruned = summaries[seed][summaries[seed]["algorithm"] != DENSE_ALGORITHM]
        for (model, budget), group in pruned.groupby(CELL, sort=True):
            observed, _, algorithms = paper_grid(group, response)
            if observed.shape[2] == len(PAPER_CALIBRATIONS) and len(algorithms) >= 2:
                grids.setdefault((model, int(budget)), {})[seed] = (observed[0], algorithms)
    out = {}
    for cell, by_seed in grids.items():
        if len(by_seed) < 2 or len(by_seed) < len(summaries):
            continue
        common = sorted(set.intersection(*(set(a) for _, a in by_seed.values())), key=by_seed[min(by_seed)][1].index)
        y = np.stack([v[[a.index(x) for x in common]] for v, a in (by_seed[s] for s in sorted(by_seed))])
        out[cell] = (y, common)
    return out


def variance_component_rows(
    summaries: Mapping[int, pd.DataFrame], band: float, studies: int | None = None
) -> list[dict]:
    """Per (model, M) and response: the calibration SD, the algorithm SD (each with its F-test) and
    their ratio; the accuracy ratio carries the equivalence verdict and its noise rates."""
    rows = []
    for response, unit in RESPONSES.items():
        for (model, budget), (y, algorithms) in sorted(split_plots(summaries, response).items()):
            verdict_row = response == VERDICT_RESPONSE
            # Only the verdict's ratio needs its noise rates (studies = 0 skips them).
            noise = {"studies": 0} if not verdict_row else {} if studies is None else {"studies": studies}
            result = comparability(y, band, **noise)
            rows += _component_rows(result, f"{model} M={budget} {unit}", y.shape, len(algorithms), band, verdict_row)
    return rows


def _component_rows(result, scope: str, shape: tuple, n_algorithms: int, band: float, verdict_row: bool) -> list[dict]:
    fit, (s, a, c) = result.fit, shape
    base = {"claim": "5.2", "n_seeds": s, "seeds_holding": "", "per_seed": "", "verdict": DESCRIPTIVE}
    rows = []
    for factor, variance, term, error in (
        ("calibration", fit.var_calibration, "calibration", "seed × calibration"),
        ("algorithm", fit.var_algorithm, "algorithm", "subplot error"),
    ):
        rows.append(
            {
                **base,
                "statistic": f"{scope}: {factor} SD (split plot, method of moments)",
                "estimate": float(np.sqrt(variance)),
                "rule": f"F({fit.df[term]}, {fit.df['seed_x_calibration' if term == 'calibration' else 'error']}) "
                f"against {error}: p = {fit.p_value(term):.2g}; {a} algorithms × {c} calibrations × {s} seeds",
            }
        )
    lo90, hi90, lo95, hi95 = result.ends
    ratio_row = {
        **base,
        "statistic": f"{scope}: SD ratio calibration / algorithm"
        + (f" (claim: comparable, in [1/{band:g}, {band:g}])" if verdict_row else ""),
        "estimate": result.ratio,
        "ci_low": lo90,
        "ci_high": hi90,
        "rule": f"90 % interval shown, 95 % [{lo95:.3g}, {hi95:.3g}]; parametric bootstrap of the split plot",
    }
    if verdict_row:
        ratio_row["null_pass_probability"] = result.null_pass
        ratio_row["null_fail_probability"] = result.null_fail
        ratio_row["verdict"] = uninformative_under_noise(result.verdict, result.null_pass, result.null_fail)
        ratio_row["rule"] += (
            "; holds: 90 % interval inside the band (TOST 5 %); does not hold: 95 % interval wholly outside"
            "; null pass: simulated split plots without a calibration effect that hold; null fail: with equal "
            "SDs, that do not hold"
        )
    rows.append(ratio_row)
    return rows


# --------------------------------------------------------------------------- §5.1: draw stability


def draw_agreement(selections: Mapping[int, pd.DataFrame]) -> pd.DataFrame:
    """Per (model, M, calibration) of the paper's: the mean over the algorithms of one algorithm's mean
    pairwise Jaccard across seeds (``seeds.set_stability``), the random-set expectation (exact), the
    one-sided p against random sets (each algorithm's S sets independent uniform M-subsets of the N
    blocks the searches could remove; simulated), and the share of random designs whose own p is
    below ALPHA."""
    frame = pd.concat([f.assign(seed=s) for s, f in selections.items()], ignore_index=True)
    frame = frame[frame["calibration"].isin(PAPER_CALIBRATIONS) & (frame["algorithm"] != DENSE_ALGORITHM)]
    frame = frame.assign(layers=frame["removed"].map(parse_layers))
    stability = set_stability(frame)
    stability = stability[stability["n_seeds"] >= 2]
    rows = []
    for (model, budget, calibration), per_algorithm in stability.groupby(["model", "budget", "calibration"]):
        group = frame[(frame["model"] == model) & (frame["budget"] == budget) & (frame["calibration"] == calibration)]
        n_blocks, m = depth_of(group), len(group["layers"].iloc[0])
        n_seeds, n_algorithms = int(per_algorithm["n_seeds"].max()), len(per_algorithm)
        observed = float(per_algorithm["mean_jaccard_across_seeds"].mean())
        null = random_draw_agreement(n_blocks, m, n_seeds, n_algorithms)
        rows.append(
            {
                "model": model,
                "budget": int(budget),
                "calibration": calibration,
                "n_seeds": n_seeds,
                "n_algorithms": n_algorithms,
                "n_blocks": n_blocks,
                "draw_agreement": observed,
                "random": expected_random_jaccard(n_blocks, m),
                "p_value": p_value_at_least(observed, null),
                "null_pass_probability": float(np.mean(own_p_values(null) < ALPHA)),
            }
        )
    out = pd.DataFrame(rows)
    return out.assign(verdict=np.where(out["p_value"] < ALPHA, HOLDS, UNSURE)) if rows else out


def own_p_values(null: np.ndarray) -> np.ndarray:
    """Each null draw's p against the whole null, as ``nulls.p_value_at_least`` computes an observed
    value's (ties counted): the rule's pass rate on random sets."""
    ordered = np.sort(null)
    return (1 + null.size - np.searchsorted(ordered, null - 1e-12, side="left")) / (1 + null.size)


def random_draw_agreement(n_blocks: int, m: int, n_seeds: int, n_algorithms: int) -> np.ndarray:
    """NULL_DRAWS values of the draw agreement of random sets: per algorithm the mean pairwise
    Jaccard of S independent uniform m-subsets, averaged over the algorithms (independent designs:
    one seeded stream of NULL_DRAWS × A designs, ``nulls.random_mean_jaccard``)."""
    designs = random_mean_jaccard(n_blocks, m, n_seeds, NULL_DRAWS * n_algorithms)
    return designs.reshape(n_algorithms, NULL_DRAWS).mean(axis=0)


def draw_stability_rows(agreement: pd.DataFrame) -> list[dict]:
    """One seeds_claims row per (model, M, calibration): draw agreement against random sets."""
    rows = []
    for r in agreement.itertuples(index=False):
        rows.append(
            {
                "claim": "5.1",
                "statistic": f"{r.model} M={r.budget} {r.calibration}: draw stability, mean Jaccard of one "
                f"algorithm's sets across seeds (random sets: {r.random:.3f})",
                "n_seeds": r.n_seeds,
                "estimate": r.draw_agreement,
                "seeds_holding": "",
                "per_seed": "",
                "null_pass_probability": r.null_pass_probability,
                "verdict": uninformative_under_noise(r.verdict, r.null_pass_probability),
                "rule": f"above random {r.n_algorithms} × {r.n_seeds} sets of {r.n_blocks} blocks with p < {ALPHA:g} "
                f"(p = {r.p_value:.4f}), else inconclusive",
            }
        )
    return rows


def claim_verdicts(rows: list[dict]) -> dict[str, list[str]]:
    """The verdict-bearing rows' verdicts per claim, for the across-seeds claim rows (docs/method.md
    §10): §5.1 gains each calibration's draw stability beside within − across; §5.2's accuracy part is
    the SD-ratio test per cell (the pooled max-shift ratio stays as description)."""
    out: dict[str, list[str]] = {}
    for r in rows:
        if r["verdict"] != DESCRIPTIVE:
            out.setdefault(r["claim"], []).append(r["verdict"])
    return out

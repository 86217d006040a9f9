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
from depthprune.reporting.statistics.variance_components import comparability, leave_one_out
from depthprune.reporting.style import PAPER_CALIBRATIONS
from depthprune.reporting.verdicts.rules import DESCRIPTIVE, HOLDS, UNSURE, uninformative_under_noise
from depthprune.reporting.verdicts.seeds import set_stability

ALPHA = 0.05  # draw stability's one-sided test against random sets
RESPONSES = {"avg_accuracy_points": "accuracy (points)", "log10_avg_perplexity": "log10 avg perplexity (orders)"}
VERDICT_RESPONSE = "avg_accuracy_points"  # the paper's "variances are comparable" is about accuracy


def split_plots(
    summaries: Mapping[int, pd.DataFrame], response: str, reps: Mapping[int, object] | None = None
) -> dict[tuple, tuple[np.ndarray, list[str], np.ndarray | None]]:
    """(model, M) -> (y (S, A, C), algorithms, replicates (B, S, A, C) or None): the response of every
    algorithm run under both paper calibrations in every seed, seeds in order, and with ``reps`` (seed
    -> its paired document replicates, every seed bootstrapped with the same document resamples)
    their document replicates. A cell missing from a seed is left out."""
    grids: dict[tuple, dict[int, tuple]] = {}
    for seed in sorted(summaries):
        pruned = summaries[seed][summaries[seed]["algorithm"] != DENSE_ALGORITHM]
        seed_reps = reps.get(seed) if reps else None
        for (model, budget), group in pruned.groupby(CELL, sort=True):
            observed, replicates, algorithms = paper_grid(group, response, seed_reps)
            if observed.shape[2] == len(PAPER_CALIBRATIONS) and len(algorithms) >= 2:
                grids.setdefault((model, int(budget)), {})[seed] = (observed[0], replicates, algorithms)
    out = {}
    for cell, by_seed in grids.items():
        if len(by_seed) < 2 or len(by_seed) < len(summaries):
            continue
        first = by_seed[min(by_seed)][2]
        common = sorted(set.intersection(*(set(a) for *_, a in by_seed.values())), key=first.index)
        ordered = [by_seed[s] for s in sorted(by_seed)]
        y = np.stack([v[[a.index(x) for x in common]] for v, _, a in ordered])
        replicates = None
        if all(r is not None for _, r, _ in ordered) and len({r.shape[0] for _, r, _ in ordered}) == 1:
            replicates = np.stack([r[:, [a.index(x) for x in common]] for _, r, a in ordered], axis=1)
        out[cell] = (y, common, replicates)
    return out


def variance_component_rows(
    summaries: Mapping[int, pd.DataFrame],
    band: float,
    studies: int | None = None,
    reps: Mapping[int, object] | None = None,
) -> list[dict]:
    """Per (model, M) and response: the calibration SD, the algorithm SD (each with its F-test) and
    their ratio; the accuracy ratio carries the equivalence verdict and its noise rates. ``reps``
    (seed -> paired document replicates) adds the crossed bootstrap's interval beside the parametric
    one (docs/method.md §10)."""
    rows = []
    for response, unit in RESPONSES.items():
        for (model, budget), (y, algorithms, replicates) in sorted(split_plots(summaries, response, reps).items()):
            verdict_row = response == VERDICT_RESPONSE
            # Only the verdict's ratio needs its noise rates (studies = 0 skips them).
            noise = {"studies": 0} if not verdict_row else {} if studies is None else {"studies": studies}
            result = comparability(y, band, replicates=replicates, **noise)
            scope = f"{model} M={budget} {unit}"
            rows += _component_rows(result, scope, y.shape, band, verdict_row, share_note(y, algorithms))
    return rows


def share_note(y: np.ndarray, algorithms: list[str]) -> str:
    """How much of the algorithm SD one search carries: the search whose removal moves it most, the
    SD and ratio without it (``variance_components.leave_one_out``); empty with < 3 algorithms."""
    found = leave_one_out(y)
    if found is None:
        return ""
    k, sd, ratio = found
    return f"; without {algorithms[k]} (the search whose removal moves the algorithm SD most): algorithm SD {sd:.3g}, ratio {ratio:.3g}"


def _component_rows(result, scope: str, shape: tuple, band: float, verdict_row: bool, share: str) -> list[dict]:
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
        "rule": f"90 % interval shown, 95 % [{lo95:.3g}, {hi95:.3g}]; parametric bootstrap of the split plot"
        + crossed_note(result, verdict_row)
        + share,
    }
    if verdict_row:
        ratio_row["null_pass_probability"] = result.null_pass
        ratio_row["null_fail_probability"] = result.null_fail
        ratio_row["verdict"] = uninformative_under_noise(result.verdict, result.null_pass, result.null_fail)
        ratio_row["rule"] += (
            "; holds: 90 % interval inside the band (TOST 5 %); does not hold: 95 % interval wholly outside"
            "; each needs both intervals; null pass: simulated split plots without a calibration effect that "
            "hold; null fail: with equal SDs, that do not hold (the parametric rule's rates: bounds on the "
            "rule's, which needs both)"
        )
    rows.append(ratio_row)
    return rows


def crossed_note(result, verdict_row: bool) -> str:
    """The crossed bootstrap's intervals (and, on the verdict's row, each interval's verdict)."""
    if result.crossed_verdict is None:
        return ""
    lo90, hi90, lo95, hi95 = result.crossed_ends
    text = (
        f"; crossed bootstrap (seeds and documents resampled as sampled): 90 % [{lo90:.3g}, {hi90:.3g}], "
        f"95 % [{lo95:.3g}, {hi95:.3g}]"
    )
    if verdict_row:
        text += f"; parametric says {result.parametric_verdict}, crossed says {result.crossed_verdict}"
    return text


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

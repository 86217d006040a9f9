"""§5.2 as the paper measures it, over the paper's two calibrations: the largest shift of the
averages from changing the calibration versus from changing the algorithm (``range_statistic``), and
the two-way decomposition with degrees of freedom and interaction (``variance_decomposition``), each
with paired-bootstrap intervals when per-document results exist.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from depthprune.reporting.aggregate import DENSE_ALGORITHM
from depthprune.reporting.analysis.frames import CELL
from depthprune.reporting.style import PAPER_CALIBRATIONS, algorithm_sort_key

RESPONSES = {
    # §5.2 measures perplexity in orders of magnitude and accuracy in points.
    "log10_avg_perplexity": ("avg_perplexity", lambda v: np.log10(np.where(v > 0, v, np.nan))),
    "avg_accuracy_points": ("avg_accuracy", lambda v: 100 * v),
}


def paper_grid(group: pd.DataFrame, response: str, reps=None) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """(1, A, C) observed and (B, A, C) replicate grids of one (model, M) cell over the paper's two
    calibrations (never a cross-control such as ppl_cs170k) and the algorithms run under both."""
    column, transform = RESPONSES[response]
    cells = group[group["calibration"].isin(PAPER_CALIBRATIONS)].dropna(subset=[column])
    pivot = cells.pivot(index="algorithm", columns="calibration", values=column)
    pivot = pivot.reindex(columns=[c for c in PAPER_CALIBRATIONS if c in pivot.columns]).dropna(axis=0, how="any")
    algorithms = sorted(pivot.index, key=algorithm_sort_key)
    pivot = pivot.loc[algorithms]
    observed = transform(pivot.to_numpy(dtype=float))[None]
    replicates = None
    if reps is not None and pivot.shape[1] == 2 and len(algorithms):
        keyed = [
            cells[(cells["algorithm"] == a) & (cells["calibration"] == c)].iloc[0]
            for a in algorithms
            for c in pivot.columns
        ]
        values = reps.aligned(pd.DataFrame(keyed), column).reshape(reps.n_resamples, len(algorithms), pivot.shape[1])
        replicates = transform(values)
    return observed, replicates, algorithms


def range_statistic(summary: pd.DataFrame, reps=None) -> pd.DataFrame:
    """The paper's §5.2 statistic per (model, M) and pooled (max over cells, as the paper reports).

    ``shift_calibration``: largest change when only the calibration changes (same algorithm and M);
    ``shift_algorithm``: largest change when only the algorithm changes (same calibration and M);
    ``ratio`` = calibration / algorithm. Accuracy in points, perplexity in orders of magnitude
    (log10). Intervals from the paired document bootstrap when ``reps`` is given.
    """
    from depthprune.reporting.statistics.bootstrap import range_shifts

    rows = []
    pruned = summary[summary["algorithm"] != DENSE_ALGORITHM]
    pooled: dict[str, list] = {r: [] for r in RESPONSES}
    for (model, budget), group in pruned.groupby(CELL, sort=True):
        for response in RESPONSES:
            observed, replicates, algorithms = paper_grid(group, response, reps)
            if observed.shape[2] < 2 or observed.shape[1] < 2:
                continue
            obs = range_shifts(observed)
            rep = range_shifts(replicates) if replicates is not None else None
            pooled[response].append((obs, rep))
            rows.append(_range_row(model, budget, response, len(algorithms), obs, rep))
    for response, parts in pooled.items():
        if not parts:
            continue
        obs = tuple(np.nanmax(np.stack([p[0][i] for p in parts]), axis=0) for i in range(2))
        rep = None
        if all(p[1] is not None for p in parts):
            rep = tuple(np.nanmax(np.stack([p[1][i] for p in parts]), axis=0) for i in range(2))
        rows.append(_range_row("all", "all", response, None, obs, rep))
    columns = [
        "model",
        "budget",
        "response",
        "n_algorithms",
        "shift_calibration",
        "shift_calibration_ci_low",
        "shift_calibration_ci_high",
        "shift_algorithm",
        "shift_algorithm_ci_low",
        "shift_algorithm_ci_high",
        "ratio",
        "ratio_ci_low",
        "ratio_ci_high",
        "ratio_ci_low_mc_se",
        "ratio_ci_high_mc_se",
        "mdd",
    ]
    return pd.DataFrame(rows, columns=columns)


def _range_row(model, budget, response, n_algorithms, obs, rep) -> dict:
    from depthprune.reporting.statistics.bootstrap import interval, interval_mc, mdd, standard_error

    nan2 = (float("nan"), float("nan"))
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = obs[0] / obs[1]
        rep_ratio = rep[0] / rep[1] if rep is not None else None
    cal_ci = interval(rep[0]) if rep is not None else nan2
    alg_ci = interval(rep[1]) if rep is not None else nan2
    ratio_ci = interval_mc(rep_ratio) if rep is not None else nan2 * 2
    # mdd of the difference calibration shift − algorithm shift, from its paired bootstrap SE.
    shift_mdd = mdd(standard_error(rep[0] - rep[1])) if rep is not None else float("nan")
    return {
        "model": model,
        "budget": budget,
        "response": response,
        "n_algorithms": n_algorithms,
        "shift_calibration": float(obs[0][0]),
        "shift_calibration_ci_low": cal_ci[0],
        "shift_calibration_ci_high": cal_ci[1],
        "shift_algorithm": float(obs[1][0]),
        "shift_algorithm_ci_low": alg_ci[0],
        "shift_algorithm_ci_high": alg_ci[1],
        "ratio": float(ratio[0]),
        "ratio_ci_low": ratio_ci[0],
        "ratio_ci_high": ratio_ci[1],
        "ratio_ci_low_mc_se": ratio_ci[2],
        "ratio_ci_high_mc_se": ratio_ci[3],
        "mdd": shift_mdd,
    }


def variance_decomposition(summary: pd.DataFrame, reps=None) -> pd.DataFrame:
    """Two-way (calibration × algorithm, one run per cell) decomposition per (model, M), the paper's
    two calibrations only: shares of SS_total for calibration (df C−1), algorithm (df A−1) and their
    interaction (df (A−1)(C−1), with one run per cell also the residual), mean squares SS/df, and
    bootstrap intervals of the shares when ``reps`` is given.
    """
    from depthprune.reporting.statistics.bootstrap import interval, interval_mc, two_way

    rows = []
    pruned = summary[summary["algorithm"] != DENSE_ALGORITHM]
    for (model, budget), group in pruned.groupby(CELL, sort=True):
        for response in RESPONSES:
            observed, replicates, _algorithms = paper_grid(group, response, reps)
            n_alg, n_cal = observed.shape[1], observed.shape[2]
            row = {
                "model": model,
                "budget": budget,
                "calibrations": " ".join(PAPER_CALIBRATIONS),
                "response": response,
                "n_calibrations": n_cal,
                "n_algorithms": n_alg,
            }
            if n_alg >= 2 and n_cal >= 2:
                obs = two_way(observed)
                rep = two_way(replicates) if replicates is not None else None
                for name, value in obs.items():
                    row[name] = float(value[0])
                for name in ("share_calibration", "share_algorithm", "share_interaction"):
                    lo, hi = interval(rep[name]) if rep is not None else (float("nan"), float("nan"))
                    row[f"{name}_ci_low"], row[f"{name}_ci_high"] = lo, hi
                # Per degree of freedom, on the scale of a shift: √(MS_calibration / MS_algorithm).
                with np.errstate(invalid="ignore", divide="ignore"):
                    row["ms_ratio_sqrt"] = float(np.sqrt(obs["ms_calibration"] / obs["ms_algorithm"])[0])
                    rep_ratio = np.sqrt(rep["ms_calibration"] / rep["ms_algorithm"]) if rep is not None else None
                ends = interval_mc(rep_ratio) if rep_ratio is not None else (float("nan"),) * 4
                (
                    row["ms_ratio_sqrt_ci_low"],
                    row["ms_ratio_sqrt_ci_high"],
                    row["ms_ratio_sqrt_ci_low_mc_se"],
                    row["ms_ratio_sqrt_ci_high_mc_se"],
                ) = ends
            rows.append(row)
    columns = [
        "model",
        "budget",
        "calibrations",
        "response",
        "n_calibrations",
        "n_algorithms",
        "ss_total",
        "df_calibration",
        "df_algorithm",
        "df_interaction",
        "share_calibration",
        "share_calibration_ci_low",
        "share_calibration_ci_high",
        "share_algorithm",
        "share_algorithm_ci_low",
        "share_algorithm_ci_high",
        "share_interaction",
        "share_interaction_ci_low",
        "share_interaction_ci_high",
        "ms_calibration",
        "ms_algorithm",
        "ms_interaction",
        "ms_ratio_sqrt",
        "ms_ratio_sqrt_ci_low",
        "ms_ratio_sqrt_ci_high",
        "ms_ratio_sqrt_ci_low_mc_se",
        "ms_ratio_sqrt_ci_high_mc_se",
    ]
    return pd.DataFrame(rows, columns=columns)

"""The aggregate summary's shared frame helpers: the (model, M) cell, the paper's row order
(``sort_frame``), a model's depth, failed searches (docs/method.md §7) and Table 4's held-out gap, and
the summary with 95 % paired-bootstrap intervals of its averages and of each algorithm's difference
to one-shot (``with_intervals``; ``reporting/statistics/bootstrap.py``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from depthprune.io import parse_layers
from depthprune.reporting.aggregate import DENSE_ALGORITHM
from depthprune.reporting.style import algorithm_sort_key, calibration_sort_key

CELL = ["model", "budget"]


def sort_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Model, M, then calibration and algorithm in the paper's order (unknown names after, sorted)."""
    if frame.empty:
        return frame.reset_index(drop=True)
    keys = frame.assign(
        _cal=frame["calibration"].map(calibration_sort_key),
        _alg=frame["algorithm"].map(algorithm_sort_key),
    )
    order = keys.sort_values(["model", "budget", "_cal", "_alg"], kind="stable").index
    return frame.loc[order].reset_index(drop=True)


def depth_of(group: pd.DataFrame) -> int:
    """Candidate layers N of a cell's searches, the depth the agreement nulls draw random sets from:
    the model's decoder blocks (``n_layers``) less its protected ones (the aggregate's ``protected``
    column, "0 29" under ``protect: boundary``; absent: none protected); the sets' largest index + 1
    when the aggregate lacks ``n_layers``."""
    if "n_layers" in group.columns and group["n_layers"].notna().any():
        first = group[group["n_layers"].notna()].iloc[0]
        protected = first.get("protected") if "protected" in group.columns else None
        n_protected = len(parse_layers(protected)) if isinstance(protected, str) else 0
        return int(first["n_layers"]) - n_protected
    return int(max((max(s) for s in group["layers"] if s), default=-1) + 1)


def failed_searches(frame: pd.DataFrame) -> pd.Series:
    """True for a search whose final calibration loss is worse (higher) than one-shot's on the same
    objective (same model, calibration, M and seed): it did not solve the problem it was given, so
    its set says nothing about where that objective leads (docs/method.md §7, "Failed searches")."""
    keys = [k for k in ("model", "calibration", "budget", "seed") if k in frame.columns]
    if "loss" not in frame.columns or frame.empty:
        return pd.Series(False, index=frame.index)
    one_shot = frame[frame["algorithm"] == "one_shot"].drop_duplicates(keys).set_index(keys)["loss"]
    base = pd.Series([one_shot.get(tuple(k), np.nan) for k in frame[keys].itertuples(index=False)], index=frame.index)
    searched = ~frame["algorithm"].isin(["one_shot", DENSE_ALGORITHM])
    return (searched & (frame["loss"].astype(float) > base)).astype(bool)


def heldout_gap(frame: pd.DataFrame) -> pd.DataFrame:
    """The calibration-vs-held-out columns of Table 4, for rows with a held-out loss (search
    --heldout-samples): ``heldout_gap`` = held-out loss − calibration loss, and ``overfits``: the
    search lowered the calibration loss below one-shot's (same model, calibration, M and seed) while
    its held-out loss rose above one-shot's, i.e. it bought calibration loss that does not carry
    over to other items of the same distribution."""
    out = frame.copy()
    out["heldout_gap"] = out["heldout_loss"].astype(float) - out["loss"].astype(float)
    keys = [k for k in ("model", "calibration", "budget", "seed") if k in out.columns]
    one_shot = out[out["algorithm"] == "one_shot"].drop_duplicates(keys).set_index(keys)[["loss", "heldout_loss"]]
    rows = [tuple(k) for k in out[keys].itertuples(index=False)]
    base_loss = pd.Series([one_shot["loss"].get(k, np.nan) for k in rows], index=out.index, dtype=float)
    base_heldout = pd.Series([one_shot["heldout_loss"].get(k, np.nan) for k in rows], index=out.index, dtype=float)
    searched = ~out["algorithm"].isin(["one_shot", DENSE_ALGORITHM])
    out["overfits"] = (
        searched & (out["loss"].astype(float) < base_loss) & (out["heldout_loss"].astype(float) > base_heldout)
    ).astype(bool)
    return out


def without_failed_searches(summary: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The summary with the failed searches' averages blanked (so §5.2's grids drop the algorithm in
    that cell) and their labels, "algorithm (calibration, M=m)"."""
    failed = failed_searches(summary)
    out = summary.copy()
    out.loc[failed, ["avg_accuracy", "avg_perplexity"]] = np.nan
    labels = [
        f"{r.algorithm} ({r.calibration}, {r.model} M={r.budget})" for r in summary[failed].itertuples(index=False)
    ]
    return out, labels


def with_intervals(summary: pd.DataFrame, reps=None) -> pd.DataFrame:
    """The summary plus 95 % intervals of the averages and each algorithm's difference to one-shot
    (same model, calibration and M; paired: the same resampled documents for both), that
    difference's ``mdd`` (80 % power, from its paired bootstrap SE) and ``failed_search``."""
    from depthprune.reporting.statistics.bootstrap import interval, mdd, standard_error

    out = summary.copy()
    out["failed_search"] = failed_searches(out)
    base = out[out["algorithm"] == "one_shot"].set_index(["model", "calibration", "budget"])["avg_accuracy"]
    keys = list(zip(out["model"], out["calibration"], out["budget"]))
    out["diff_one_shot"] = [
        (acc - base[k]) if k in base.index and alg != DENSE_ALGORITHM else np.nan
        for k, acc, alg in zip(keys, out["avg_accuracy"], out["algorithm"])
    ]
    out["diff_one_shot"] = out["diff_one_shot"].round(9)
    names = [
        "avg_acc_ci_low",
        "avg_acc_ci_high",
        "avg_ppl_ci_low",
        "avg_ppl_ci_high",
        "diff_one_shot_ci_low",
        "diff_one_shot_ci_high",
        "mdd",
    ]
    for name in names:
        out[name] = np.nan
    if reps is None or out.empty:
        return out
    acc = reps.aligned(out, "avg_accuracy")
    ppl = reps.aligned(out, "avg_perplexity")
    base_rows = out.assign(algorithm="one_shot")
    acc_base = reps.aligned(base_rows, "avg_accuracy")
    for j in range(len(out)):
        out.iloc[j, out.columns.get_loc("avg_acc_ci_low")], out.iloc[j, out.columns.get_loc("avg_acc_ci_high")] = (
            interval(acc[:, j])
        )
        out.iloc[j, out.columns.get_loc("avg_ppl_ci_low")], out.iloc[j, out.columns.get_loc("avg_ppl_ci_high")] = (
            interval(ppl[:, j])
        )
        if pd.notna(out["diff_one_shot"].iloc[j]):
            lo, hi = interval(acc[:, j] - acc_base[:, j])
            out.iloc[j, out.columns.get_loc("diff_one_shot_ci_low")] = lo
            out.iloc[j, out.columns.get_loc("diff_one_shot_ci_high")] = hi
            if out["algorithm"].iloc[j] != "one_shot":  # one-shot against itself has no difference to detect
                out.iloc[j, out.columns.get_loc("mdd")] = mdd(standard_error(acc[:, j] - acc_base[:, j]))
    return out

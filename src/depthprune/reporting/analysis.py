"""The analyses behind the paper's claims, computed from the aggregate tables.

- Algorithm-level agreement (Table 5, Appendix A.2): mean / min / max pairwise Jaccard over the
  pruned sets of one (model, M, calibration) cell, and full overlap |∩S_i| / |∪S_i|.
- Pairwise Jaccard within a calibration (different algorithms) and across calibrations (§5.1).
- Spearman ρ between average perplexity and average accuracy across algorithms (Figure 3, §5.3).
- Spearman ρ between each set's calibration loss (and held-out loss) and its average accuracy
  (``loss_accuracy_table``): does a lower search loss buy a better pruned model?
- §5.2 as the paper measures it: the largest shift of the averages from changing the calibration
  versus from changing the algorithm (``range_statistic``), and the two-way decomposition with
  degrees of freedom and interaction (``variance_decomposition``), over the paper's two calibrations.
- Intervals from the paired document bootstrap (``reporting/statistics/bootstrap.py``) when per-document results exist.
"""

from __future__ import annotations

import itertools
import logging
import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from depthprune.io import parse_layers
from depthprune.reporting.aggregate import DENSE_ALGORITHM, TIE_DECIMALS, calibration_kind
from depthprune.reporting.style import PAPER_CALIBRATIONS, algorithm_sort_key, calibration_sort_key

log = logging.getLogger(__name__)

CELL = ["model", "budget"]


def jaccard(a: Iterable[int], b: Iterable[int]) -> float:
    """|a ∩ b| / |a ∪ b|; two empty sets are identical (1.0)."""
    a, b = set(a), set(b)
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def full_overlap(sets: Sequence[Iterable[int]]) -> float:
    """|∩ S_i| / |∪ S_i| over all sets (Table 5's "full overlap")."""
    sets = [set(s) for s in sets]
    if not sets:
        return float("nan")
    union = set().union(*sets)
    return len(set.intersection(*sets)) / len(union) if union else 1.0


def agreement_stats(sets: Sequence[Iterable[int]]) -> dict:
    """Mean, min and max of the pairwise Jaccard similarities, their count, and the full overlap."""
    sets = [set(s) for s in sets]
    pairs = [jaccard(a, b) for a, b in itertools.combinations(sets, 2)]
    return {
        "n_sets": len(sets),
        "n_pairs": len(pairs),
        "mean_jaccard": float(np.mean(pairs)) if pairs else float("nan"),
        "min_jaccard": float(np.min(pairs)) if pairs else float("nan"),
        "max_jaccard": float(np.max(pairs)) if pairs else float("nan"),
        "full_overlap": full_overlap(sets) if len(sets) >= 2 else float("nan"),
    }


def _pruned(selections: pd.DataFrame) -> pd.DataFrame:
    """Search results only (no dense row), in display order, with the removed sets parsed."""
    frame = selections[selections["algorithm"] != DENSE_ALGORITHM].copy()
    frame["layers"] = frame["removed"].map(parse_layers)
    return sort_frame(frame)


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


def agreement_table(selections: pd.DataFrame) -> pd.DataFrame:
    """Table 5 data: one row per (model, M, calibration) with the agreement statistics, the expected
    mean Jaccard of as many random sets of the same size and depth, and the permutation p-value of
    the observed mean against it (``reporting/statistics/nulls.py``)."""
    from depthprune.reporting.statistics.nulls import agreement_null

    rows = []
    pruned = _pruned(selections)
    for (model, budget, calibration), group in pruned.groupby(["model", "budget", "calibration"], sort=False):
        stats_row = agreement_stats(group["layers"].tolist())
        depth = depth_of(group)
        size = int(group["layers"].map(len).iloc[0])
        expected, p_value = agreement_null(depth, size, stats_row["n_sets"], stats_row["mean_jaccard"])
        rows.append(
            {
                "model": model,
                "budget": budget,
                "calibration": calibration,
                **stats_row,
                "n_candidates": depth,
                "set_size": size,
                "random_mean_jaccard": expected,
                "p_value": p_value,
            }
        )
    columns = [
        "model",
        "budget",
        "calibration",
        "n_sets",
        "n_pairs",
        "mean_jaccard",
        "min_jaccard",
        "max_jaccard",
        "full_overlap",
        "n_candidates",
        "set_size",
        "random_mean_jaccard",
        "p_value",
    ]
    return pd.DataFrame(rows, columns=columns)


def pairwise_jaccard(selections: pd.DataFrame) -> pd.DataFrame:
    """Every pair of pruned sets of the same (model, M), labelled by how the two runs differ.

    ``relation``: ``within`` (same calibration, different algorithms), ``across_same_algorithm``
    (same algorithm, different calibrations: the effect of calibration alone), ``across_other``
    (both differ).
    """
    rows = []
    for (model, budget), group in _pruned(selections).groupby(CELL, sort=False):
        records = group.to_dict("records")
        for a, b in itertools.combinations(records, 2):
            same_cal = a["calibration"] == b["calibration"]
            same_alg = a["algorithm"] == b["algorithm"]
            relation = "within" if same_cal else ("across_same_algorithm" if same_alg else "across_other")
            rows.append(
                {
                    "model": model,
                    "budget": budget,
                    "relation": relation,
                    "calibration_a": a["calibration"],
                    "algorithm_a": a["algorithm"],
                    "calibration_b": b["calibration"],
                    "algorithm_b": b["algorithm"],
                    "jaccard": jaccard(a["layers"], b["layers"]),
                }
            )
    columns = ["model", "budget", "relation", "calibration_a", "algorithm_a", "calibration_b", "algorithm_b", "jaccard"]
    return pd.DataFrame(rows, columns=columns)


def jaccard_summary(pairs: pd.DataFrame) -> pd.DataFrame:
    """Mean Jaccard per (model, M, relation, calibration pair), plus one ``all`` row per relation."""
    if pairs.empty:
        return pd.DataFrame(columns=["model", "budget", "relation", "calibrations", "n_pairs", "mean_jaccard"])
    frame = pairs.assign(
        calibrations=[
            " vs ".join(sorted({a, b}, key=calibration_sort_key))
            for a, b in zip(pairs["calibration_a"], pairs["calibration_b"])
        ]
    )
    per_pair = (
        frame.groupby(["model", "budget", "relation", "calibrations"], sort=False)["jaccard"]
        .agg(["size", "mean"])
        .reset_index()
    )
    overall = frame.groupby(["model", "budget", "relation"], sort=False)["jaccard"].agg(["size", "mean"]).reset_index()
    overall["calibrations"] = "all"
    out = pd.concat([per_pair, overall], ignore_index=True).rename(columns={"size": "n_pairs", "mean": "mean_jaccard"})
    relation_order = {"within": 0, "across_same_algorithm": 1, "across_other": 2}
    out = out.assign(_r=out["relation"].map(relation_order), _all=out["calibrations"] == "all")
    out = out.sort_values(["model", "budget", "_r", "_all", "calibrations"], kind="stable")
    return out[["model", "budget", "relation", "calibrations", "n_pairs", "mean_jaccard"]].reset_index(drop=True)


def spearman_table(summary: pd.DataFrame, reps=None) -> pd.DataFrame:
    """Spearman ρ (and p-value) between avg perplexity and avg accuracy across algorithms, per cell.

    ρ is computed on the raw values, as the paper's Figure 3 (docs/method.md §7): a NEGATIVE ρ means
    that lower perplexity goes with higher accuracy (the two rankings agree: alignment); a positive
    ρ means the algorithms with lower perplexity reach lower accuracy (misalignment). Averages are
    rounded (aggregate.TIE_DECIMALS) so equal accuracies tie. Algorithms with a missing average are
    left out (``n`` says how many were used); with fewer than three points, or a constant column, ρ
    is NaN. With bootstrap replicates (``reps``), ``rho_ci_low``/``rho_ci_high`` is the 95 % interval.
    """
    from depthprune.reporting.statistics.bootstrap import interval_mc, spearman_rows

    rows = []
    pruned = sort_frame(summary[summary["algorithm"] != DENSE_ALGORITHM])
    for (model, budget, calibration), group in pruned.groupby(["model", "budget", "calibration"], sort=False):
        valid = group.dropna(subset=["avg_perplexity", "avg_accuracy"])
        rho, p_value, note = _spearman(valid["avg_perplexity"].to_numpy(), valid["avg_accuracy"].to_numpy())
        lo = hi = se_lo = se_hi = float("nan")
        if reps is not None and len(valid) >= 3:
            lo, hi, se_lo, se_hi = interval_mc(
                spearman_rows(reps.aligned(valid, "avg_perplexity"), reps.aligned(valid, "avg_accuracy"))
            )
        # Algorithms that remove the same layers are one model: ρ rests on the distinct sets only.
        distinct = int(valid["removed"].nunique()) if "removed" in valid.columns else len(valid)
        rows.append(
            {
                "model": model,
                "budget": budget,
                "calibration": calibration,
                "calibration_kind": calibration_kind(calibration),
                "n": len(valid),
                "n_algorithms": len(group),
                "n_distinct_sets": distinct,
                "rho": rho,
                "rho_ci_low": lo,
                "rho_ci_high": hi,
                "rho_ci_low_mc_se": se_lo,
                "rho_ci_high_mc_se": se_hi,
                "p_value": p_value,
                "note": note,
            }
        )
    columns = [
        "model",
        "budget",
        "calibration",
        "calibration_kind",
        "n",
        "n_algorithms",
        "n_distinct_sets",
        "rho",
        "rho_ci_low",
        "rho_ci_high",
        "rho_ci_low_mc_se",
        "rho_ci_high_mc_se",
        "p_value",
        "note",
    ]
    return pd.DataFrame(rows, columns=columns)


LOSS_KINDS = {"calibration": "loss", "heldout": "heldout_loss"}


def loss_accuracy_table(summary: pd.DataFrame, reps=None) -> pd.DataFrame:
    """Spearman ρ between the search loss of each algorithm's set and its average accuracy, per
    (model, M, calibration), for the calibration loss the search minimised and, where the study
    scored a held-out draw (``heldout_loss``), the held-out loss (docs/method.md §7).

    A negative ρ is what a search objective should give: a lower loss goes with a higher accuracy.
    A positive ρ means the searches that lowered the loss most made the worse models. The loss is
    fixed per set; the interval resamples the evaluation documents (accuracy) only. Losses of
    different calibrations are on different scales, so there is no pooled row.
    """
    from depthprune.reporting.statistics.bootstrap import interval_mc, spearman_rows

    columns = ["model", "budget", "calibration", "loss_kind", "n", "n_distinct_sets"]
    columns += ["rho", "rho_ci_low", "rho_ci_high", "p_value", "note"]
    rows = []
    pruned = sort_frame(summary[summary["algorithm"] != DENSE_ALGORITHM])
    kinds = {kind: column for kind, column in LOSS_KINDS.items() if column in pruned.columns}
    for (model, budget, calibration), group in pruned.groupby(["model", "budget", "calibration"], sort=False):
        for kind, column in kinds.items():
            valid = group.dropna(subset=[column, "avg_accuracy"])
            loss = valid[column].to_numpy(dtype=float)
            rho, p_value, note = _spearman(loss, valid["avg_accuracy"].to_numpy(dtype=float))
            lo = hi = float("nan")
            if reps is not None and len(valid) >= 3 and np.ptp(loss) > 0:
                accuracy = reps.aligned(valid, "avg_accuracy")
                lo, hi, _, _ = interval_mc(spearman_rows(np.broadcast_to(loss, accuracy.shape), accuracy))
            distinct = int(valid["removed"].nunique()) if "removed" in valid.columns else len(valid)
            values = (model, budget, calibration, kind, len(valid), distinct, rho, lo, hi, p_value, note)
            rows.append(dict(zip(columns, values, strict=True)))
    return pd.DataFrame(rows, columns=columns)


def _spearman(x: np.ndarray, y: np.ndarray) -> tuple[float, float, str]:
    if len(x) < 3:
        return float("nan"), float("nan"), f"only {len(x)} algorithms with both averages"
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan"), float("nan"), "constant averages"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns about small n; n = 7 is the paper's design
        result = stats.spearmanr(x, y)
    return float(result.statistic), float(result.pvalue), ""


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


# Chance accuracy of each zero-shot task: one over its number of choices (ARC-E and ARC-C have a few
# items with three or five choices; their nominal four is used). Their mean over the six tasks, 37.5 %,
# is the level below which a pruned model's average accuracy says nothing about the task.
CHANCE_ACCURACY = {
    "hellaswag": 1 / 4,
    "winogrande": 1 / 2,
    "arc_easy": 1 / 4,
    "arc_challenge": 1 / 4,
    "piqa": 1 / 2,
    "boolq": 1 / 2,
}
MEAN_OVER_ALGORITHMS = "mean of the algorithms"


def chance_accuracy() -> float:
    """Chance level of the average accuracy over the six zero-shot tasks (Tables 2-3)."""
    from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS

    return float(np.mean([CHANCE_ACCURACY[name] for name in ZERO_SHOT_BENCHMARKS]))


def _side(lo: float, hi: float, above: str, below: str, level: str) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    return above if lo > 0 else below if hi < 0 else level


def calibration_contrast(
    summary: pd.DataFrame, reps=None, baseline: float | None = None, chance: float | None = None
) -> pd.DataFrame:
    """TLM-pruned against perplexity-pruned models and against chance, per (model, M, algorithm).

    For every algorithm run under both of the paper's calibrations: the average accuracy of its
    TLM-pruned and its perplexity-pruned model, their difference (TLM minus perplexity) and the
    TLM-pruned model's margin over chance (``chance_accuracy``), each with its 95 % paired-bootstrap
    interval (the same resampled documents for both models). One more row per (model, M) averages
    the algorithms. ``tlm_vs_ppl`` and ``tlm_vs_chance`` say which side of zero the interval lies on;
    ``diff_se`` is the difference's paired bootstrap SE and ``mdd`` the difference it detects with 80 %
    power (``bootstrap.mdd``). ``baseline`` (``baselines.average_baseline``: the larger of chance
    and the majority answer, per task) gives ``tlm_minus_baseline`` and ``tlm_vs_baseline`` the same
    way; without it the baseline is chance. ``chance`` replaces the six tasks' chance level (an
    average over other tasks, such as the informative tasks of ``reporting/statistics/informative.py``).
    """
    from depthprune.reporting.statistics.bootstrap import interval, mdd, standard_error

    columns = [
        "model",
        "budget",
        "algorithm",
        "acc_perplexity_pruned",
        "acc_tlm_pruned",
        "diff_tlm_minus_ppl",
        "diff_ci_low",
        "diff_ci_high",
        "diff_se",
        "mdd",
        "tlm_vs_ppl",
        "chance",
        "tlm_minus_chance",
        "tlm_minus_chance_ci_low",
        "tlm_minus_chance_ci_high",
        "tlm_vs_chance",
        "baseline",
        "tlm_minus_baseline",
        "tlm_minus_baseline_ci_low",
        "tlm_minus_baseline_ci_high",
        "tlm_vs_baseline",
    ]
    kinds = summary["calibration"].map(calibration_kind)
    paper = summary["calibration"].isin(PAPER_CALIBRATIONS) & (summary["algorithm"] != DENSE_ALGORITHM)
    ppl, tlm = summary[paper & (kinds == "ppl")], summary[paper & (kinds == "tlm")]
    pairs = ppl.merge(tlm, on=["model", "budget", "algorithm"], suffixes=("_ppl", "_tlm"))
    chance = chance_accuracy() if chance is None else float(chance)
    floor = chance if baseline is None else max(chance, float(baseline))
    rows = []
    for (model, budget), cell in pairs.groupby(["model", "budget"], sort=True):
        cell = cell.sort_values("algorithm", key=lambda s: s.map(algorithm_sort_key), kind="stable")
        acc_ppl, acc_tlm = cell["avg_accuracy_ppl"].to_numpy(float), cell["avg_accuracy_tlm"].to_numpy(float)
        if reps is not None:
            runs = {
                suffix: cell[["model", "budget", "algorithm"]].assign(calibration=cell[f"calibration_{suffix}"])
                for suffix in ("ppl", "tlm")
            }
            rep_ppl = reps.aligned(runs["ppl"], "avg_accuracy")
            rep_tlm = reps.aligned(runs["tlm"], "avg_accuracy")
        else:
            rep_ppl = rep_tlm = np.full((1, len(cell)), np.nan)
        names = list(cell["algorithm"]) + [MEAN_OVER_ALGORITHMS]
        observed = [(acc_ppl[j], acc_tlm[j], rep_ppl[:, j], rep_tlm[:, j]) for j in range(len(cell))]
        observed.append((acc_ppl.mean(), acc_tlm.mean(), rep_ppl.mean(axis=1), rep_tlm.mean(axis=1)))
        for name, (a_ppl, a_tlm, r_ppl, r_tlm) in zip(names, observed):
            d_lo, d_hi = interval(r_tlm - r_ppl)
            c_lo, c_hi = interval(r_tlm - chance)
            b_lo, b_hi = interval(r_tlm - floor)
            rows.append(
                {
                    "model": model,
                    "budget": budget,
                    "algorithm": name,
                    "acc_perplexity_pruned": a_ppl,
                    "acc_tlm_pruned": a_tlm,
                    "diff_tlm_minus_ppl": a_tlm - a_ppl,
                    "diff_ci_low": d_lo,
                    "diff_ci_high": d_hi,
                    "diff_se": standard_error(r_tlm - r_ppl),
                    "mdd": mdd(standard_error(r_tlm - r_ppl)),
                    "tlm_vs_ppl": _side(d_lo, d_hi, "higher", "lower", "level"),
                    "chance": chance,
                    "tlm_minus_chance": a_tlm - chance,
                    "tlm_minus_chance_ci_low": c_lo,
                    "tlm_minus_chance_ci_high": c_hi,
                    "tlm_vs_chance": _side(c_lo, c_hi, "above", "below", "at chance"),
                    "baseline": floor,
                    # to the summary's 9 decimals: the baseline can equal an accuracy (both k/696),
                    # and their difference must then be 0 on every CPU, not a 1e-10 residue
                    "tlm_minus_baseline": round(a_tlm - floor, TIE_DECIMALS),
                    "tlm_minus_baseline_ci_low": b_lo,
                    "tlm_minus_baseline_ci_high": b_hi,
                    "tlm_vs_baseline": _side(b_lo, b_hi, "above", "below", "at baseline"),
                }
            )
    return pd.DataFrame(rows, columns=columns)

"""The analyses behind the paper's claims, computed from the aggregate tables.

- Algorithm-level agreement (Table 5, Appendix A.2): mean / min / max pairwise Jaccard over the
  pruned sets of one (model, M, calibration) cell, and full overlap |∩S_i| / |∪S_i|.
- Pairwise Jaccard within a calibration (different algorithms) and across calibrations (§5.1).
- Spearman ρ between average perplexity and average accuracy across algorithms (Figure 3, §5.3).
- Two-way variance decomposition over the calibration × algorithm grid (§5.2): how much of the
  variance in log10 average perplexity / average accuracy the calibration explains versus the search.
"""

from __future__ import annotations

import itertools
import logging
import warnings
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from depthprune.io import parse_layers
from depthprune.reporting.aggregate import DENSE_ALGORITHM, calibration_kind
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


def agreement_table(selections: pd.DataFrame) -> pd.DataFrame:
    """Table 5 data: one row per (model, M, calibration) with the agreement statistics."""
    rows = []
    pruned = _pruned(selections)
    for (model, budget, calibration), group in pruned.groupby(["model", "budget", "calibration"], sort=False):
        stats_row = agreement_stats(group["layers"].tolist())
        rows.append({"model": model, "budget": budget, "calibration": calibration, **stats_row})
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
            rows.append({
                "model": model, "budget": budget, "relation": relation,
                "calibration_a": a["calibration"], "algorithm_a": a["algorithm"],
                "calibration_b": b["calibration"], "algorithm_b": b["algorithm"],
                "jaccard": jaccard(a["layers"], b["layers"]),
            })  # fmt: skip
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


def spearman_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Spearman ρ (and p-value) between avg perplexity and avg accuracy across algorithms, per cell.

    ρ is computed on the raw values (spec §7): negative means that lower perplexity goes with higher
    accuracy. Algorithms with a missing average are left out (``n`` says how many were used); with
    fewer than three points, or a constant column, ρ is NaN.
    """
    rows = []
    pruned = sort_frame(summary[summary["algorithm"] != DENSE_ALGORITHM])
    for (model, budget, calibration), group in pruned.groupby(["model", "budget", "calibration"], sort=False):
        valid = group.dropna(subset=["avg_perplexity", "avg_accuracy"])
        rho, p_value, note = _spearman(valid["avg_perplexity"].to_numpy(), valid["avg_accuracy"].to_numpy())
        rows.append({
            "model": model, "budget": budget, "calibration": calibration,
            "calibration_kind": calibration_kind(calibration), "n": len(valid),
            "n_algorithms": len(group), "rho": rho, "p_value": p_value, "note": note,
        })  # fmt: skip
    columns = ["model", "budget", "calibration", "calibration_kind", "n", "n_algorithms", "rho", "p_value", "note"]
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
    "log10_avg_perplexity": lambda s: np.log10(s["avg_perplexity"].where(s["avg_perplexity"] > 0)),
    "avg_accuracy": lambda s: s["avg_accuracy"],
}


def variance_decomposition(summary: pd.DataFrame) -> pd.DataFrame:
    """Two-way (calibration × algorithm, one run per cell) sum-of-squares decomposition per (model, M).

    share_calibration = SS_calibration / SS_total, share_algorithm = SS_algorithm / SS_total and
    share_residual = the rest (the interaction: with one run per cell it cannot be told from noise).
    Computed on the complete grid only: algorithms that lack a value under some calibration are
    dropped (``n_algorithms`` says how many remain). ``calibration_set`` is ``all`` (every calibration
    run) and, when more were run, ``paper`` (ppl_c4 and tlm_cs170k only, the paper's grid).
    """
    rows = []
    pruned = summary[summary["algorithm"] != DENSE_ALGORITHM]
    for (model, budget), group in pruned.groupby(CELL, sort=True):
        calibrations = sorted(group["calibration"].unique(), key=calibration_sort_key)
        subsets = [("all", calibrations)]
        if set(PAPER_CALIBRATIONS) < set(calibrations):
            subsets.append(("paper", list(PAPER_CALIBRATIONS)))
        for set_name, cals in subsets:
            for response, extract in RESPONSES.items():
                cells = group[group["calibration"].isin(cals)].assign(y=lambda g: extract(g))
                grid = cells.pivot(index="algorithm", columns="calibration", values="y").dropna(axis=0, how="any")
                rows.append({
                    "model": model, "budget": budget, "calibration_set": set_name,
                    "calibrations": " ".join(cals), "response": response,
                    **two_way_shares(grid.to_numpy(dtype=float)),
                })  # fmt: skip
    columns = [
        "model", "budget", "calibration_set", "calibrations", "response", "n_calibrations", "n_algorithms",
        "ss_total", "share_calibration", "share_algorithm", "share_residual",
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=columns)


def two_way_shares(grid: np.ndarray) -> dict:
    """Main-effect shares of the total sum of squares; ``grid`` is algorithms (rows) × calibrations."""
    n_alg, n_cal = grid.shape if grid.ndim == 2 else (0, 0)
    out = {"n_calibrations": n_cal, "n_algorithms": n_alg}
    nan = float("nan")
    if n_alg < 2 or n_cal < 2:
        return {**out, "ss_total": nan, "share_calibration": nan, "share_algorithm": nan, "share_residual": nan}
    grand = grid.mean()
    ss_total = float(((grid - grand) ** 2).sum())
    ss_cal = float(n_alg * ((grid.mean(axis=0) - grand) ** 2).sum())
    ss_alg = float(n_cal * ((grid.mean(axis=1) - grand) ** 2).sum())
    if ss_total == 0:
        return {**out, "ss_total": 0.0, "share_calibration": nan, "share_algorithm": nan, "share_residual": nan}
    share_cal, share_alg = ss_cal / ss_total, ss_alg / ss_total
    return {
        **out, "ss_total": ss_total, "share_calibration": share_cal, "share_algorithm": share_alg,
        "share_residual": max(0.0, 1.0 - share_cal - share_alg),
    }  # fmt: skip

"""Agreement of the pruned sets (§5.1, Table 5, Appendix A.2): mean / min / max pairwise Jaccard
over the pruned sets of one (model, M, calibration) cell and full overlap |∩S_i| / |∪S_i|
(``agreement_table``), and pairwise Jaccard within a calibration (different algorithms) and across
calibrations (``pairwise_jaccard``, ``jaccard_summary``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from depthprune.io import parse_layers
from depthprune.reporting.aggregate import DENSE_ALGORITHM
from depthprune.reporting.analysis.frames import CELL, depth_of, sort_frame
from depthprune.reporting.style import calibration_sort_key


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

"""Seeds as replicates (config ``seeds:``): what changes when the calibration sample is redrawn and the
searches are reseeded.

- ``seed_spread``: per (model, calibration, M, algorithm), the mean, standard deviation (ddof 1),
  minimum and maximum across seeds of the search loss and the averages.
- ``set_stability``: per (model, calibration, M, algorithm), the mean pairwise Jaccard of the sets
  the same algorithm found under different seeds (1 = the same set every time).
- ``verdicts_by_seed``: each claim's verdict computed on each seed alone, and whether it holds in
  every seed.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from depthprune.io import parse_layers
from depthprune.reporting.aggregate import DENSE_ALGORITHM, KEY
from depthprune.reporting.analysis.agreement import jaccard
from depthprune.reporting.analysis.frames import sort_frame

SPREAD_COLUMNS = ["loss", "avg_accuracy", "avg_perplexity", "calibration_perplexity", "calibration_accuracy"]


def seeds_of(frame: pd.DataFrame) -> list[int]:
    return sorted(int(s) for s in frame["seed"].unique()) if "seed" in frame and not frame.empty else [0]


def for_seed(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The rows of one seed (the whole frame when it has no seed column)."""
    if "seed" not in frame or frame.empty:
        return frame
    return frame[frame["seed"] == seed].reset_index(drop=True)


def seed_spread(summary: pd.DataFrame) -> pd.DataFrame:
    pruned = summary[summary["algorithm"] != DENSE_ALGORITHM]
    columns = [c for c in SPREAD_COLUMNS if c in pruned.columns]
    rows = []
    for key, group in pruned.groupby(KEY, sort=False):
        row = dict(zip(KEY, key))
        row["n_seeds"] = group["seed"].nunique()
        for col in columns:
            values = group[col].dropna().to_numpy(dtype=float)
            row[f"{col}_mean"] = values.mean() if len(values) else np.nan
            row[f"{col}_std"] = values.std(ddof=1) if len(values) > 1 else np.nan
            row[f"{col}_min"] = values.min() if len(values) else np.nan
            row[f"{col}_max"] = values.max() if len(values) else np.nan
        rows.append(row)
    return sort_frame(pd.DataFrame(rows)) if rows else pd.DataFrame(columns=KEY + ["n_seeds"])


def set_stability(selections: pd.DataFrame) -> pd.DataFrame:
    pruned = selections[selections["algorithm"] != DENSE_ALGORITHM]
    rows = []
    for key, group in pruned.groupby(KEY, sort=False):
        sets = [parse_layers(r) for r in group.sort_values("seed")["removed"]]
        pairs = [jaccard(a, b) for a, b in itertools.combinations(sets, 2)]
        rows.append(
            {
                **dict(zip(KEY, key)),
                "n_seeds": len(sets),
                "mean_jaccard_across_seeds": float(np.mean(pairs)) if pairs else np.nan,
                "min_jaccard_across_seeds": float(np.min(pairs)) if pairs else np.nan,
            }
        )
    columns = KEY + ["n_seeds", "mean_jaccard_across_seeds", "min_jaccard_across_seeds"]
    return sort_frame(pd.DataFrame(rows, columns=columns)) if rows else pd.DataFrame(columns=columns)


def verdicts_by_seed(verdicts: dict[int, dict[str, str]]) -> pd.DataFrame:
    """One row per (claim, seed) and one ``every seed`` row per claim: ``holds`` only if it holds in
    every seed, ``does not hold`` if it fails in every seed, else ``inconclusive``."""
    from depthprune.reporting.verdicts.rules import unanimous

    rows = []
    claims = sorted({c for v in verdicts.values() for c in v})
    for claim in claims:
        per_seed = [(seed, verdicts[seed].get(claim, "not testable")) for seed in sorted(verdicts)]
        rows += [{"claim": claim, "seed": str(seed), "verdict": v} for seed, v in per_seed]
        rows.append({"claim": claim, "seed": "every seed", "verdict": unanimous([v for _, v in per_seed])})
    return pd.DataFrame(rows, columns=["claim", "seed", "verdict"])

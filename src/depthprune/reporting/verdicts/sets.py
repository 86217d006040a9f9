"""§5.1 Calibration reshapes the pruned sets: in a (model, M) cell, sets of different algorithms under
one calibration agree more (mean Jaccard "within") than one algorithm's sets across the calibrations
("across"): holds when within − across > 0 with exact label-swap permutation p ≤ ALPHA, does not
hold when ≤ 0, else inconclusive. With several seeds, a t-interval of the difference across seeds.
The within-calibration means stand beside the paper's 0.63 / 0.36 / 0.51 and beside the random-set
null (``reporting/statistics/nulls.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from depthprune.io import parse_layers
from depthprune.reporting.analysis.agreement import pairwise_jaccard
from depthprune.reporting.analysis.frames import depth_of
from depthprune.reporting.statistics.nulls import (
    expected_random_jaccard,
    pooled_agreement_null,
    within_across_permutation,
)
from depthprune.reporting.style import PAPER_CALIBRATIONS
from depthprune.reporting.verdicts.rules import DESCRIPTIVE, FAILS, HOLDS, NAN2, UNSURE, conjunction, observation_row

ALPHA = 0.05  # permutation tests (§5.1)


def _cell_sets(selections: pd.DataFrame) -> dict:
    """(model, M) -> {(algorithm, calibration): layers} over the paper's calibrations."""
    frame = selections[selections["calibration"].isin(PAPER_CALIBRATIONS)]
    cells: dict = {}
    for r in frame.itertuples(index=False):
        if r.algorithm == "dense":
            continue
        cells.setdefault((r.model, r.budget), {})[(r.algorithm, r.calibration)] = parse_layers(r.removed)
    return cells


def _t_interval(values: Sequence[float]) -> tuple[float, float]:
    """95 % t-interval of the mean across seeds (NaN below two seeds)."""
    values = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    if values.size < 2:
        return NAN2
    half = stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / np.sqrt(values.size)
    return float(values.mean() - half), float(values.mean() + half)


def _over_seeds_row(model: str, budget: int, per_seed_cells: Sequence[dict]) -> list[dict]:
    """With several seeds, the within − across difference averaged over them with its t interval:
    value and interval from the same estimate (the seed's own row above has no interval); a
    description, the cross-seed verdict being §10's (``seeds_claims.csv``)."""
    diffs = [
        within_across_permutation(c[(model, budget)], PAPER_CALIBRATIONS)[0]
        for c in per_seed_cells
        if (model, budget) in c
    ]
    if len(diffs) < 2:
        return []
    return [
        observation_row(
            "5.1",
            f"{model} M={budget}",
            f"mean Jaccard within − across calibrations, mean over {len(diffs)} seeds",
            float(np.mean(diffs)),
            _t_interval(diffs),
            verdict=DESCRIPTIVE,
            null=0.0,
            note=f"t interval over {len(diffs)} seeds; the cross-seed verdict is seeds_claims.csv's (§10)",
        )
    ]


def observe_sets(
    selections: pd.DataFrame, paper: dict, seed_selections: Sequence[pd.DataFrame] = ()
) -> tuple[list[dict], str]:
    pairs = pairwise_jaccard(selections)
    pairs = pairs[pairs["calibration_a"].isin(PAPER_CALIBRATIONS) & pairs["calibration_b"].isin(PAPER_CALIBRATIONS)]
    cells = _cell_sets(selections)
    per_seed_cells = [_cell_sets(frame) for frame in seed_selections]
    depth = {
        key: depth_of(group.assign(layers=group["removed"].map(parse_layers)))
        for key, group in selections.groupby(["model", "budget"])
    }
    rows, verdicts = [], []
    for (model, budget), cell in pairs.groupby(["model", "budget"], sort=True):
        within = cell.loc[cell["relation"] == "within", "jaccard"]
        across = cell.loc[cell["relation"] == "across_same_algorithm", "jaccard"]
        if len(within) and len(across):
            diff, p_value = within_across_permutation(cells[(model, budget)], PAPER_CALIBRATIONS)
            verdict = FAILS if diff <= 0 else (HOLDS if p_value <= ALPHA else UNSURE)
            verdicts.append(verdict)
            rows.append(
                observation_row(
                    "5.1",
                    f"{model} M={budget}",
                    "mean Jaccard within − across calibrations",
                    diff,
                    NAN2,
                    verdict=verdict,
                    null=0.0,
                    p=p_value,
                    note="exact permutation over label swaps; this seed's sets: no interval",
                )
            )
            rows += _over_seeds_row(model, budget, per_seed_cells)
            m = len(next(iter(cells[(model, budget)].values())))
            expected = expected_random_jaccard(depth[(model, budget)], m)
            for relation, values in (("within", within), ("across", across)):
                rows.append(
                    observation_row(
                        "5.1",
                        f"{model} M={budget}",
                        f"mean Jaccard {relation} calibrations",
                        values.mean(),
                        null=expected,
                        note=f"null: random {m}-of-{depth[(model, budget)]} sets (exact)",
                    )
                )
    reported = paper["section_5_1"]["jaccard_within"]
    for calibration in PAPER_CALIBRATIONS:
        within = pairs[(pairs["relation"] == "within") & (pairs["calibration_a"] == calibration)]
        if within.empty:
            continue
        per_cell = within.groupby(["model", "budget"])["jaccard"].mean()
        designs = []
        for model, budget in per_cell.index:
            n_sets = sum(1 for _, c in cells[(model, budget)] if c == calibration)
            size = len(next(v for (_, c), v in cells[(model, budget)].items() if c == calibration))
            designs.append((depth[(model, budget)], size, n_sets))
        expected, p_value = pooled_agreement_null(designs, per_cell.mean())
        text = " / ".join(f"{v:.2f} ({k})" for k, v in reported.get(calibration, {}).items())
        rows.append(
            observation_row(
                "5.1",
                f"all, {calibration}",
                "mean within-calibration Jaccard over cells",
                per_cell.mean(),
                paper=text,
                null=expected,
                p=p_value,
                note="null: random sets of each cell's size and depth; p simulated",
            )
        )
    return rows, conjunction(verdicts)

"""Informative-task sensitivity of the observations: every accuracy verdict (§5.2 accuracy, §5.3)
recomputed on the informative-task average (``reporting/statistics/informative.py``), in rows scoped
``…, informative tasks`` that never enter a claim's own verdict.
"""

from __future__ import annotations

import pandas as pd

from depthprune.reporting.analysis.spread import range_statistic
from depthprune.reporting.verdicts.alignment import observe_rho
from depthprune.reporting.verdicts.paper_shifts import (
    accuracy_decision,
    cell_grids,
)
from depthprune.reporting.verdicts.rules import DESCRIPTIVE, observation_row, uninformative_under_noise, within_band
from depthprune.reporting.verdicts.variance import noise_pass_fail

INFORMATIVE_SCOPE = ", informative tasks"


def observe_informative(
    summary: pd.DataFrame,
    reps,
    paper: dict,
    band: float,
    strong_rho: float,
    found,
    samples: pd.DataFrame | None,
    main_rows: list[dict],
) -> tuple[list[dict], list[tuple[str, str, str]]]:
    """Every accuracy verdict recomputed on the informative-task average (``reporting/statistics/informative.py``):
    §5.2 accuracy (the pooled shift ratio in the band, with its null pass probability on the same
    tasks) and §5.3's claims across cells. Rows are scoped ``…, informative tasks`` (sensitivity: not
    in the claims' verdicts); the second value pairs each verdict with the main one."""
    from depthprune.reporting.statistics.informative import informative_view

    if not any(found.tasks.values()):
        return [], []
    view, view_reps = informative_view(summary, reps, found)
    note = f"sensitivity, not in the claim's verdict; informative tasks: {found.label()}"
    rows, pairs = [], []
    main = {(r["claim"], r["scope"], r["statistic"]): r["verdict"] for r in main_rows}
    for r in range_statistic(view, view_reps).itertuples(index=False):
        if r.model != "all" or r.response != "avg_accuracy_points":
            continue
        ci, se = (r.ratio_ci_low, r.ratio_ci_high), (r.ratio_ci_low_mc_se, r.ratio_ci_high_mc_se)
        verdict = within_band(*ci, r.ratio, band, se=se)
        null_pass = null_fail = float("nan")
        if samples is not None and view_reps is not None:
            grids = cell_grids(view, "avg_accuracy_points", view_reps)
            null_pass, null_fail = noise_pass_fail(
                samples, grids, "accuracy", lambda g: accuracy_decision(g, band), tasks=found.tasks
            )
        verdict = uninformative_under_noise(verdict, null_pass, null_fail)
        statistic = f"accuracy shift ratio calibration / algorithm (claim: in [1/{band:g}, {band:g}] (ours))"
        for part, value, lo, hi in (
            ("calibration", r.shift_calibration, r.shift_calibration_ci_low, r.shift_calibration_ci_high),
            ("algorithm", r.shift_algorithm, r.shift_algorithm_ci_low, r.shift_algorithm_ci_high),
        ):
            rows.append(
                observation_row(
                    "5.2",
                    f"all (max over cells){INFORMATIVE_SCOPE}",
                    f"{r.response}: largest shift from {part} (points)",
                    value,
                    (lo, hi),
                    note=note,
                )
            )
        rows.append(
            observation_row(
                "5.2",
                f"all (max over cells){INFORMATIVE_SCOPE}",
                statistic,
                r.ratio,
                ci,
                verdict=verdict,
                se=se,
                null_pass=null_pass,
                null_fail=null_fail,
                note=note,
            )
        )
        pairs.append(
            (
                "§5.2 accuracy: shift ratio in the band",
                main.get(("5.2", "all (max over cells)", statistic), ""),
                verdict,
            )
        )
    rho_rows, _ = observe_rho(view, view_reps, paper, strong_rho)
    for r in rho_rows:
        if not r["scope"].startswith("all,"):
            continue
        label = f"§5.3 {r['scope'][len('all, ') :]}: {r['statistic']}"
        if r["verdict"] != DESCRIPTIVE:
            pairs.append((label, main.get((r["claim"], r["scope"], r["statistic"]), ""), r["verdict"]))
        rows.append({**r, "scope": r["scope"] + INFORMATIVE_SCOPE, "paper_value": "", "note": note})
    return rows, pairs

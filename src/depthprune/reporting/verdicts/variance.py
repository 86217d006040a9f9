"""§5.2 with the paper's own statistics (``reporting/verdicts/paper_shifts.py``). Perplexity: the
calibration shift per (model, M, algorithm) and the algorithm spread per (model, M, calibration), in
orders of magnitude, each half holding in "most" (more than half, ours) conditions; failed searches
flagged, and a sensitivity without them. Accuracy: the largest shift from each factor pooled by the
max over cells, "comparable" when the ratio's interval lies in [1/band, band] (ours). Each claim
carries the share of null studies (``reporting/statistics/noise_null.py``) that pass it and that
fail it: above UNINFORMATIVE_LEVEL for the verdict reached, the verdict is ``uninformative``. The per-cell ranges, the two-way
decomposition and the per-df reading are descriptive rows beside them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS
from depthprune.reporting.analysis.frames import failed_searches, without_failed_searches
from depthprune.reporting.analysis.spread import range_statistic, variance_decomposition
from depthprune.reporting.statistics.noise_null import exceeds_noise, unit_scores, verdict_rates
from depthprune.reporting.verdicts.paper_shifts import (
    accuracy_decision,
    cell_grids,
    most,
    perplexity_conditions,
    perplexity_decision,
    regrid,
    spread_readings,
)
from depthprune.reporting.verdicts.rules import (
    DESCRIPTIVE,
    FAILS,
    HOLDS,
    NOT_TESTABLE,
    UNSURE,
    above,
    conjunction,
    observation_row,
    uninformative_under_noise,
    within_band,
)

# ratio of the calibration shift to the algorithm shift inside [1/2, 2] counts as "comparable": the
# paper's own 5.76 vs 7.51 (ratio 0.77) is, and a shift twice the other is the smallest we would call
# "dominating": squared, a 2:1 shift ratio is a 4:1 ratio of variances, one effect 80 % of the two
# (docs/method.md §7). Configurable: render --comparable-band / config analysis.comparable_band.
DEFAULT_COMPARABLE_BAND = 2.0
# A perplexity benchmark with fewer windows than this gets its intervals labelled "window-level
# only": a bootstrap over 4 windows has 35 distinct resamples and says nothing about the corpus.
MIN_WINDOWS = 20
NOISE_P_DRAWS = 1000  # null draws per perplexity-effect p-value (resolution 1/1001)


def window_note(reps) -> str:
    """ "window-level only (...)" when a perplexity benchmark has fewer than MIN_WINDOWS windows."""
    if reps is None or not reps.units:
        return ""
    few = {
        b: n for b, n in reps.units.items() if b in PERPLEXITY_BENCHMARKS and b != "lambada_openai" and n < MIN_WINDOWS
    }
    if not few:
        return ""
    listed = ", ".join(f"{b} {n}" for b, n in sorted(few.items()))
    return f"perplexity interval window-level only ({listed} windows)"


def _ratio_verdict(response: str, ci, se, value, band) -> str:
    if response == "avg_accuracy_points":
        return within_band(*ci, value, band, se=se)
    return above(*ci, value, band, se=se)


def observe_variance(
    summary: pd.DataFrame, reps, paper: dict, band: float, samples: pd.DataFrame | None = None
) -> tuple[list[dict], str, list[str]]:
    """§5.2 rows: the paper's perplexity statistic per condition (``paper_shifts``), its accuracy
    range statistic pooled over cells with the noise-null pass probability (``noise_null``), and
    descriptive readings beside them (per-cell ranges, the two-way decomposition, the range
    statistic without failed searches)."""
    p = paper["section_5_2"]
    windows = window_note(reps)
    reduced, failed = without_failed_searches(summary)
    rows, overall = perplexity_rows(summary, reduced, bool(failed), reps, p, samples, windows)
    remarks = []
    if failed:
        remarks.append(
            "Failed searches (final calibration loss worse than one-shot's on the same objective): "
            + ", ".join(failed)
            + ". Rows marked `without failed searches` recompute the statistics without them (sensitivity)."
        )
    accuracy, accuracy_verdict = range_rows(summary, reps, p, band, samples, windows)
    rows += accuracy
    if accuracy_verdict is not None:
        overall["avg_accuracy_points"] = accuracy_verdict
    rows += decomposition_rows(summary, reps)
    if failed:
        rows += range_sensitivity_rows(reduced, reps)
    verdict = conjunction(list(overall.values())) if len(overall) == 2 else NOT_TESTABLE
    return rows, verdict, remarks


def perplexity_rows(
    summary: pd.DataFrame,
    reduced: pd.DataFrame,
    any_failed: bool,
    reps,
    p: dict,
    samples: pd.DataFrame | None,
    windows: str,
) -> tuple[list[dict], dict]:
    """The perplexity half of §5.2: per condition, per half and the claim, on every search, then the
    same rows without the failed searches (sensitivity). Returns the rows and {response: verdict}."""
    failed_mask = failed_searches(summary)
    failed_labels = {(r.model, r.budget, r.algorithm) for r in summary[failed_mask].itertuples(index=False)}
    rows, overall = [], {}
    for label, frame in (("", summary), (", without failed searches", reduced)):
        if label and not any_failed:
            break
        grids = cell_grids(frame, "log10_avg_perplexity", reps)
        if not grids:
            continue
        conditions = perplexity_conditions(grids)
        with_noise = samples if not label else None
        rows += condition_rows(conditions, grids, label, failed_labels, with_noise, windows, p)
        rows += half_rows(conditions, grids, label, p)
        if not label:
            row, verdict = perplexity_claim_row(grids, samples)
            rows.append(row)
            overall["log10_avg_perplexity"] = verdict
    return rows, overall


def condition_rows(
    conditions: pd.DataFrame,
    grids: list[dict],
    label: str,
    failed_labels: set,
    samples: pd.DataFrame | None,
    windows: str,
    p: dict,
) -> list[dict]:
    """One row per perplexity condition (a calibration shift or an algorithm spread) with its
    verdict; with ``samples``, its permutation p against the noise null."""
    below = p["perplexity_shift_algorithm_orders_below"]
    units = {(g["model"], g["budget"]): g["runs"] for g in grids} if samples is not None else {}
    rows = []
    for c in conditions.itertuples(index=False):
        flagged = (c.model, c.budget, c.condition) in failed_labels
        if c.kind == "calibration shift":
            statistic = f"calibration shift of avg perplexity, algorithm {c.condition} (orders; claim: ≥ 1)"
        else:
            statistic = f"algorithm spread of avg perplexity, {c.condition} (orders; claim: < {below:g})"
        noise_p = float("nan")
        if (c.model, c.budget) in units:
            runs = units[(c.model, c.budget)]
            chosen = (
                runs[runs["algorithm"] == c.condition]
                if c.kind == "calibration shift"
                else runs[runs["calibration"] == c.condition]
            )
            noise_p = _perplexity_noise_p(samples, chosen, c.kind)
        notes = (
            "failed search" if flagged else "",
            "p: each window's / document's scores shuffled among the runs (noise null)" if np.isfinite(noise_p) else "",
            windows,
        )
        rows.append(
            observation_row(
                "5.2",
                f"{c.model} M={c.budget}{label}",
                statistic,
                c.value,
                c.ci[:2],
                "",
                c.verdict,
                se=c.ci[2:],
                p=noise_p,
                note="; ".join(n for n in notes if n),
            )
        )
    return rows


def half_rows(conditions: pd.DataFrame, grids: list[dict], label: str, p: dict) -> list[dict]:
    """Per half of the perplexity claim, the conditions that pass and the half's verdict ("most");
    the algorithm half on the perplexity-pruned conditions (``paper_shifts.in_spread_claim``), then
    its other reading (TLM conditions included) as a descriptive row (docs/method.md §7)."""
    lo3, hi3 = p["perplexity_shift_calibration_orders"]
    below = p["perplexity_shift_algorithm_orders_below"]
    cal_half, _, _ = perplexity_decision(grids)
    shifts = list(conditions.loc[conditions["kind"] == "calibration shift", "verdict"])
    rows = [
        observation_row(
            "5.2",
            f"all{label}",
            "perplexity: conditions whose calibration shift is ≥ 1 order (claim: most, i.e. > half (ours))",
            shifts.count(HOLDS),
            paper=f"{lo3}–{hi3} orders" if not label else "",
            verdict=cal_half,
            note=f"of {len(shifts)} conditions; {shifts.count(UNSURE)} inconclusive"
            + ("; sensitivity, not in the claim's verdict" if label else ""),
        )
    ]
    return rows + spread_rows(spread_readings(conditions), label, below)


def spread_rows(readings: dict[str, list[str]], label: str, below: float) -> list[dict]:
    """The algorithm half under each reading of "most evaluated conditions": the claim's (perplexity-
    pruned conditions, every search) carries the verdict, every other reading is descriptive with the
    verdict it would reach in its note."""
    rows = []
    for reading, verdicts in readings.items():
        in_verdict = not label and reading == "perplexity-pruned"
        half = most(verdicts)
        scope = f"all{label}" + ("" if reading == "perplexity-pruned" else f", reading: {reading}")
        notes = (
            f"of {len(verdicts)} conditions ({reading}); {verdicts.count(UNSURE)} inconclusive",
            "" if in_verdict else f"description, not in the claim's verdict (its rule would give: {half})",
        )
        rows.append(
            observation_row(
                "5.2",
                scope,
                f"perplexity: conditions whose algorithm spread is < {below:g} order (claim: most, i.e. > half (ours))",
                verdicts.count(HOLDS),
                paper=f"< {below:g} order in most conditions" if in_verdict else "",
                verdict=half if in_verdict else DESCRIPTIVE,
                note="; ".join(n for n in notes if n),
            )
        )
    return rows


def perplexity_claim_row(grids: list[dict], samples: pd.DataFrame | None) -> tuple[dict, str]:
    """The perplexity claim (both halves hold), checked against the null studies' pass and fail rates."""
    claim = perplexity_decision(grids)[2]
    null_pass = null_fail = float("nan")
    if samples is not None:
        null_pass, null_fail = noise_pass_fail(samples, grids, "perplexity", lambda g: perplexity_decision(g)[2])
    verdict = uninformative_under_noise(claim, null_pass, null_fail)
    row = observation_row(
        "5.2",
        "all",
        "perplexity: calibration dominates (both halves hold)",
        float(claim == HOLDS),
        paper="1–3 orders vs < 1 order",
        verdict=verdict,
        null_pass=null_pass,
        null_fail=null_fail,
        note="value 1 when both halves hold; null pass / fail: share of null studies (no effect "
        "of calibration or algorithm) that pass / do not hold",
    )
    return row, verdict


def range_rows(
    summary: pd.DataFrame, reps, p: dict, band: float, samples: pd.DataFrame | None, windows: str
) -> tuple[list[dict], str | None]:
    """The paper's range statistic per cell and pooled (largest shifts and their ratio, both
    responses); the pooled accuracy ratio carries the "comparable" verdict (None without one)."""
    paper_acc_ratio = p["accuracy_shift_calibration_points"] / p["accuracy_shift_algorithm_points"]
    rows, verdict = [], None
    for r in range_statistic(summary, reps).itertuples(index=False):
        scope = "all (max over cells)" if r.model == "all" else f"{r.model} M={r.budget}"
        pooled = r.model == "all"
        ci, se = (r.ratio_ci_low, r.ratio_ci_high), (r.ratio_ci_low_mc_se, r.ratio_ci_high_mc_se)
        note = f"mdd of calibration − algorithm shift {r.mdd:.3g}" if np.isfinite(r.mdd) else ""
        if r.response == "avg_accuracy_points":
            unit = "points"
            paper_cal = f"{p['accuracy_shift_calibration_points']:.2f}"
            paper_alg = f"{p['accuracy_shift_algorithm_points']:.2f}"
            statistic = f"accuracy shift ratio calibration / algorithm (claim: in [1/{band:g}, {band:g}] (ours))"
        else:
            unit = "orders of magnitude"
            paper_cal = paper_alg = ""
            statistic = "perplexity shift ratio calibration / algorithm (largest shifts)"
            note = "; ".join(n for n in (note, windows) if n)
        for factor, value, low, high, paper_text in (
            ("calibration", r.shift_calibration, r.shift_calibration_ci_low, r.shift_calibration_ci_high, paper_cal),
            ("algorithm", r.shift_algorithm, r.shift_algorithm_ci_low, r.shift_algorithm_ci_high, paper_alg),
        ):
            rows.append(
                observation_row(
                    "5.2",
                    scope,
                    f"{r.response}: largest shift from {factor} ({unit})",
                    value,
                    (low, high),
                    paper_text if pooled else "",
                )
            )
        if pooled and r.response == "avg_accuracy_points":
            row, verdict = accuracy_ratio_row(summary, reps, r, band, samples, statistic, note, paper_acc_ratio)
            rows.append(row)
        else:
            rows.append(observation_row("5.2", scope, statistic, r.ratio, ci, se=se, note=note))
    return rows, verdict


def accuracy_ratio_row(summary, reps, r, band, samples, statistic, note, paper_ratio) -> tuple[dict, str]:
    """§5.2 accuracy: the pooled ratio's band test ("comparable"), checked against the null studies."""
    ci, se = (r.ratio_ci_low, r.ratio_ci_high), (r.ratio_ci_low_mc_se, r.ratio_ci_high_mc_se)
    verdict = _ratio_verdict(r.response, ci, se, r.ratio, band)
    null_pass = null_fail = float("nan")
    if samples is not None:
        grids = cell_grids(summary, "avg_accuracy_points", reps)
        null_pass, null_fail = noise_pass_fail(
            samples, grids, "accuracy", lambda g: accuracy_decision(g, band), rule=accuracy_rule_name(band)
        )
    verdict = uninformative_under_noise(verdict, null_pass, null_fail)
    null_note = (
        "null pass / fail: share of null studies (no effect at all) whose interval lies in / wholly outside the band"
    )
    row = observation_row(
        "5.2",
        "all (max over cells)",
        statistic,
        r.ratio,
        ci,
        f"{paper_ratio:.2f} (comparable)",
        verdict,
        se=se,
        null_pass=null_pass,
        null_fail=null_fail,
        note="; ".join(n for n in (note, null_note) if n),
    )
    return row, verdict


def decomposition_rows(summary: pd.DataFrame, reps) -> list[dict]:
    """The two-way decomposition per (model, M) and response: SS shares, mean squares and the per-df
    reading √(MS calibration / MS algorithm), descriptive."""
    rows = []
    decomposition = variance_decomposition(summary, reps)
    for r in decomposition.dropna(subset=["ss_total"]).itertuples(index=False):
        scope = f"{r.model} M={r.budget}"
        for part, df in (
            ("calibration", r.df_calibration),
            ("algorithm", r.df_algorithm),
            ("interaction", r.df_interaction),
        ):
            rows.append(
                observation_row(
                    "5.2",
                    scope,
                    f"{r.response}: SS share of {part} (df {int(df)})",
                    getattr(r, f"share_{part}"),
                    (getattr(r, f"share_{part}_ci_low"), getattr(r, f"share_{part}_ci_high")),
                )
            )
        for part in ("calibration", "algorithm", "interaction"):
            rows.append(
                observation_row("5.2", scope, f"{r.response}: mean square of {part} (SS/df)", getattr(r, f"ms_{part}"))
            )
        rows.append(
            observation_row(
                "5.2",
                scope,
                f"{r.response}: per-df reading √(MS calibration / MS algorithm)",
                r.ms_ratio_sqrt,
                (r.ms_ratio_sqrt_ci_low, r.ms_ratio_sqrt_ci_high),
                se=(r.ms_ratio_sqrt_ci_low_mc_se, r.ms_ratio_sqrt_ci_high_mc_se),
                note="reading beside the range statistic",
            )
        )
    return rows


def range_sensitivity_rows(reduced: pd.DataFrame, reps) -> list[dict]:
    """The range statistic's ratio without the failed searches (sensitivity, not in a verdict)."""
    rows = []
    for r in range_statistic(reduced, reps).itertuples(index=False):
        scope = (
            "all (max over cells)" if r.model == "all" else f"{r.model} M={r.budget}"
        ) + ", without failed searches"
        rows.append(
            observation_row(
                "5.2",
                scope,
                f"{r.response}: shift ratio calibration / algorithm (sensitivity)",
                r.ratio,
                (r.ratio_ci_low, r.ratio_ci_high),
                se=(r.ratio_ci_low_mc_se, r.ratio_ci_high_mc_se),
                note="sensitivity" + (f"; {int(r.n_algorithms)} algorithms" if r.model != "all" else ""),
            )
        )
    return rows


def accuracy_rule_name(band: float) -> str:
    """The name of the single-seed accuracy band rule (``accuracy_decision``) for the rates' cache."""
    return f"accuracy ratio in [1/{band!r}, {band!r}]"


def noise_cells(samples: pd.DataFrame, grids: list[dict], kind: str, tasks: dict | None = None) -> list | None:
    """Per cell grid, the per-document scores of its runs (``noise_null.unit_scores``) on the
    benchmarks of ``kind``; ``tasks`` (model -> zero-shot tasks) restricts an accuracy null to each
    model's tasks. None when a cell lacks them or there is no cell."""
    from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS, ZERO_SHOT_BENCHMARKS

    benchmarks = ZERO_SHOT_BENCHMARKS if kind == "accuracy" else PERPLEXITY_BENCHMARKS
    cells = [unit_scores(samples, g["runs"], tasks[g["model"]] if tasks is not None else benchmarks) for g in grids]
    if not grids or any(c is None for c in cells):
        return None
    return cells


def noise_transform(kind: str):
    """The grids' response from a null study's averages: accuracy in points, perplexity in orders."""
    return (lambda v: 100 * v) if kind == "accuracy" else np.log10


def noise_pass_fail(
    samples: pd.DataFrame, grids: list[dict], kind: str, decide, tasks: dict | None = None, rule: str | None = None
) -> tuple[float, float]:
    """(share of null studies that pass, share that do not hold) under ``decide`` (per-cell grids ->
    verdict), null studies built from ``samples`` (``noise_null.verdict_rates``; ``rule`` names
    ``decide`` so that the same rates are computed once); NaN without cells."""
    cells = noise_cells(samples, grids, kind, tasks)
    if cells is None:
        return float("nan"), float("nan")
    transform = noise_transform(kind)

    def judge(observed, replicates):
        return decide(regrid(grids, observed, replicates, transform))

    rates = verdict_rates(cells, judge, kind, rule=rule)
    return rates.get(HOLDS, 0.0), rates.get(FAILS, 0.0)


def _perplexity_noise_p(samples: pd.DataFrame, runs: pd.DataFrame, kind: str) -> float:
    """Permutation p of a calibration shift (two runs) or an algorithm spread (several runs) of
    log10 average perplexity against each window's / document's scores shuffled among the runs."""
    from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS

    units = unit_scores(samples, runs, PERPLEXITY_BENCHMARKS)
    if units is None or len(runs) < 2:
        return float("nan")
    return exceeds_noise(units, lambda v: float(np.ptp(np.log10(v))), "perplexity", n_null=NOISE_P_DRAWS)

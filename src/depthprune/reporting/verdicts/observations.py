"""Whether the paper's three observations hold in our numbers, each measured as the paper measures it.

Every row of ``observations.csv`` is one statistic: ``claim, scope, statistic, value, ci_low,
ci_high, ci_low_mc_se, ci_high_mc_se, null_value, p_value, paper_value, verdict, note``. Intervals
are 95 % paired document-bootstrap intervals (``reporting/statistics/bootstrap.py``) with the Monte-Carlo
standard error of each end; without per-document results they are empty and a verdict rests on
the point value. Verdicts are ``holds``, ``does not hold`` or ``inconclusive`` (the interval
straddles the threshold, or an end lies within Monte-Carlo error of it: ``bootstrap.resolved``);
``descriptive`` rows carry a number but no test. ``null_value`` is what random sets of the same
size and depth give, ``p_value`` the permutation p-value against it (``reporting/statistics/nulls.py``).
Only the paper's two calibrations (ppl_c4, tlm_cs170k) enter §5.2 and §5.3 verdicts.

1. §5.1 Calibration reshapes the pruned sets: in a (model, M) cell, sets of different algorithms
   under one calibration agree more (mean Jaccard "within") than one algorithm's sets across the
   calibrations ("across"): holds when within − across > 0 with exact label-swap permutation
   p ≤ ALPHA, does not hold when ≤ 0, else inconclusive. With several seeds, a t-interval of the
   difference across seeds. The within-calibration means stand beside the paper's 0.63 / 0.36 /
   0.51 and beside the random-set null.
2. §5.2 with the paper's own statistics (``reporting/verdicts/paper_shifts.py``). Perplexity: the calibration
   shift per (model, M, algorithm) and the algorithm spread per (model, M, calibration), in orders
   of magnitude, each half holding in "most" (more than half, ours) conditions; failed searches
   flagged, and a sensitivity without them. Accuracy: the largest shift from each factor pooled by
   the max over cells, "comparable" when the ratio's interval lies in [1/band, band] (ours). Each
   claim carries its null pass probability (``reporting/statistics/noise_null.py``): above
   UNINFORMATIVE_LEVEL a passing verdict is ``uninformative``. The per-cell ranges, the two-way
   decomposition and the per-df reading are descriptive rows beside them.
3. §5.3 on distinct removed sets (``reporting/statistics/distinct.py``). ρ = Spearman(avg perplexity, avg
   accuracy) on raw values, as the paper's Figure 3: a NEGATIVE ρ means lower perplexity goes with
   higher accuracy (alignment). Per cell ρ, the number of distinct sets and the exact permutation p
   are descriptive; the claims are judged across cells as the paper states them: TLM pruning
   positive in every cell; perplexity pruning negative in most cells, with a weak median
   (−strong_rho < median < 0, ours); each with its null pass probability under no association.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS
from depthprune.io import parse_layers
from depthprune.reporting.aggregate import load_aggregate
from depthprune.reporting.analysis import (
    depth_of,
    failed_searches,
    pairwise_jaccard,
    range_statistic,
    variance_decomposition,
    without_failed_searches,
)
from depthprune.reporting.statistics.bootstrap import resolved
from depthprune.reporting.statistics.distinct import distinct_sets, distinct_spearman_table, null_distribution
from depthprune.reporting.statistics.noise_null import UNINFORMATIVE_LEVEL, exceeds_noise, pass_probability, unit_scores
from depthprune.reporting.statistics.nulls import (
    expected_random_jaccard,
    pooled_agreement_null,
    within_across_permutation,
)
from depthprune.reporting.style import PAPER_CALIBRATIONS
from depthprune.reporting.verdicts.paper_shifts import (
    accuracy_decision,
    cell_grids,
    perplexity_conditions,
    perplexity_decision,
    regrid,
)

# ratio of the calibration shift to the algorithm shift inside [1/2, 2] counts as "comparable": the
# paper's own 5.76 vs 7.51 (ratio 0.77) is, and a shift twice the other is the smallest we would call
# "dominating": squared, a 2:1 shift ratio is a 4:1 ratio of variances, one effect 80 % of the two
# (docs/method.md §7). Configurable: render --comparable-band / config analysis.comparable_band.
DEFAULT_COMPARABLE_BAND = 2.0
ALPHA = 0.05  # permutation tests (§5.1)
# A perplexity benchmark with fewer windows than this gets its intervals labelled "window-level
# only": a bootstrap over 4 windows has 35 distinct resamples and says nothing about the corpus.
MIN_WINDOWS = 20
# |ρ| above this is strong; the paper's perplexity-pruning median −0.27 is weak (alignment, but loose).
DEFAULT_STRONG_RHO = 0.5
NOISE_P_DRAWS = 1000  # null draws per perplexity-effect p-value (resolution 1/1001)

HOLDS, FAILS, UNSURE, DESCRIPTIVE = "holds", "does not hold", "inconclusive", "descriptive"
UNINFORMATIVE = "uninformative"  # pure noise passes the test more often than UNINFORMATIVE_LEVEL
NOT_TESTABLE = "not testable"
COLUMNS = [
    "claim",
    "scope",
    "statistic",
    "value",
    "ci_low",
    "ci_high",
    "ci_low_mc_se",
    "ci_high_mc_se",
    "null_value",
    "p_value",
    "null_pass_probability",
    "paper_value",
    "verdict",
    "note",
]
NAN2 = (float("nan"), float("nan"))

CLAIMS = {
    "5.1": "Calibration reshapes the pruned layer sets (Figure 1, Tables 5-6).",
    "5.2": "Calibration dominates perplexity, but its effect on accuracy is comparable to the search algorithm's (Tables 1-3, Figure 2).",
    "5.3": "Under TLM pruning perplexity and accuracy are misaligned (ρ > 0); under perplexity pruning they align only weakly (ρ negative, median −0.27) (Figure 3).",
}


def paper_values() -> dict:
    """The paper's reported figures (``reporting/paper_values.yaml``)."""
    text = (importlib.resources.files("depthprune.reporting") / "paper_values.yaml").read_text("utf-8")
    return yaml.safe_load(text)


def above(lo: float, hi: float, value: float, threshold: float, se: tuple[float, float] = NAN2) -> str:
    """holds if the interval (or, without one, the value) is above ``threshold``; fails if below.

    ``se``: the Monte-Carlo standard errors of the ends; an end within that error of the threshold
    does not decide (inconclusive).
    """
    if np.isnan(lo) or np.isnan(hi):
        if np.isnan(value):
            return UNSURE
        return HOLDS if value > threshold else FAILS
    if lo > threshold and resolved(lo, se[0], threshold):
        return HOLDS
    if hi <= threshold and resolved(hi, se[1], threshold):
        return FAILS
    return UNSURE


def below(
    lo: float, hi: float, value: float, threshold: float, strict: bool = False, se: tuple[float, float] = NAN2
) -> str:
    """holds if the interval (or, without one, the value) is ≤ ``threshold`` (< if ``strict``); fails if
    above. An end within Monte-Carlo error (``se``) of the threshold does not decide."""
    ok = (lambda x: x < threshold) if strict else (lambda x: x <= threshold)
    if np.isnan(lo) or np.isnan(hi):
        if np.isnan(value):
            return UNSURE
        return HOLDS if ok(value) else FAILS
    if ok(hi) and resolved(hi, se[1], threshold):
        return HOLDS
    if not ok(lo) and resolved(lo, se[0], threshold):
        return FAILS
    return UNSURE


def within_band(lo: float, hi: float, value: float, band: float, se: tuple[float, float] = NAN2) -> str:
    """The two-sided "comparable" test: holds if the interval lies inside [1/band, band], fails if it
    lies wholly outside (above band or below 1/band); an end within Monte-Carlo error of either edge
    does not decide. Without an interval the point value decides."""
    low, high = 1 / band, band
    if np.isnan(lo) or np.isnan(hi):
        if np.isnan(value):
            return UNSURE
        return HOLDS if low <= value <= high else FAILS
    if low <= lo and hi <= high and resolved(lo, se[0], low) and resolved(hi, se[1], high):
        return HOLDS
    if (lo > high and resolved(lo, se[0], high)) or (hi < low and resolved(hi, se[1], low)):
        return FAILS
    return UNSURE


def combine(verdicts: list[str]) -> str:
    """One claim-level verdict from its cells: unanimous, else inconclusive; none -> not testable."""
    tested = [v for v in verdicts if v in (HOLDS, FAILS, UNSURE, UNINFORMATIVE)]
    if not tested:
        return NOT_TESTABLE
    if all(v == HOLDS for v in tested):
        return HOLDS
    if all(v == FAILS for v in tested):
        return FAILS
    if all(v in (HOLDS, UNINFORMATIVE) for v in tested):
        return UNINFORMATIVE
    return UNSURE


@dataclass
class Observations:
    rows: pd.DataFrame  # COLUMNS
    verdicts: dict[str, str]  # claim -> overall verdict
    settings: dict
    remarks: dict[str, list[str]] = field(default_factory=dict)  # claim -> sentences for observations.md
    # informative-task sensitivity (reporting/statistics/informative.py): the task list, and per accuracy
    # verdict (label, verdict on all six tasks, verdict on the informative tasks)
    informative: object | None = None  # informative.InformativeTasks
    sensitivity: list[tuple[str, str, str]] = field(default_factory=list)

    def claim_rows(self, claim: str) -> pd.DataFrame:
        return self.rows[self.rows["claim"] == claim]


def _row(
    claim,
    scope,
    statistic,
    value,
    ci=NAN2,
    paper="",
    verdict=DESCRIPTIVE,
    se=NAN2,
    null=float("nan"),
    p=float("nan"),
    note="",
    null_pass=float("nan"),
) -> dict:
    return {
        "claim": claim,
        "scope": scope,
        "statistic": statistic,
        "value": float(value),
        "ci_low": float(ci[0]),
        "ci_high": float(ci[1]),
        "ci_low_mc_se": float(se[0]),
        "ci_high_mc_se": float(se[1]),
        "null_value": float(null),
        "p_value": float(p),
        "null_pass_probability": float(null_pass),
        "paper_value": paper,
        "verdict": verdict,
        "note": note,
    }


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
            ci, note = NAN2, "exact permutation over label swaps"
            if len(per_seed_cells) >= 2:
                diffs = [
                    within_across_permutation(c[(model, budget)], PAPER_CALIBRATIONS)[0]
                    for c in per_seed_cells
                    if (model, budget) in c
                ]
                ci = _t_interval(diffs)
                note += f"; interval: t over {len(diffs)} seeds"
            else:
                note += "; one seed: no interval"
            rows.append(
                _row(
                    "5.1",
                    f"{model} M={budget}",
                    "mean Jaccard within − across calibrations",
                    diff,
                    ci,
                    verdict=verdict,
                    null=0.0,
                    p=p_value,
                    note=note,
                )
            )
            m = len(next(iter(cells[(model, budget)].values())))
            expected = expected_random_jaccard(depth[(model, budget)], m)
            for relation, values in (("within", within), ("across", across)):
                rows.append(
                    _row(
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
            _row(
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
    return rows, combine(verdicts)


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
    rows, overall, remarks = [], {}, []
    failed_mask = failed_searches(summary)
    failed_labels = {(r.model, r.budget, r.algorithm) for r in summary[failed_mask].itertuples(index=False)}
    # --- perplexity: one to three orders from calibration, less than one from the algorithm in most conditions
    windows = window_note(reps)
    lo3, hi3 = p["perplexity_shift_calibration_orders"]
    below = p["perplexity_shift_algorithm_orders_below"]
    reduced, failed = without_failed_searches(summary)
    for label, frame in (("", summary), (", without failed searches", reduced)):
        if label and not failed:
            break
        grids = cell_grids(frame, "log10_avg_perplexity", reps)
        if not grids:
            continue
        conditions = perplexity_conditions(grids)
        units = {}
        if samples is not None and not label:
            for g in grids:
                units[(g["model"], g["budget"])] = g["runs"]
        for c in conditions.itertuples(index=False):
            flagged = (c.model, c.budget, c.condition) in failed_labels
            if c.kind == "calibration shift":
                statistic = f"calibration shift of avg perplexity, algorithm {c.condition} (orders; claim: ≥ 1)"
            else:
                statistic = f"algorithm spread of avg perplexity, {c.condition} (orders; claim: < {below:g})"
            paper_text = ""
            noise_p = float("nan")
            if (c.model, c.budget) in units:
                runs = units[(c.model, c.budget)]
                chosen = (
                    runs[runs["algorithm"] == c.condition]
                    if c.kind == "calibration shift"
                    else runs[runs["calibration"] == c.condition]
                )
                noise_p = _perplexity_noise_p(samples, chosen, c.kind)
            note = "; ".join(
                n
                for n in (
                    "failed search" if flagged else "",
                    "p: each window's / document's scores shuffled among the runs (noise null)"
                    if np.isfinite(noise_p)
                    else "",
                    windows,
                )
                if n
            )
            rows.append(
                _row(
                    "5.2",
                    f"{c.model} M={c.budget}{label}",
                    statistic,
                    c.value,
                    c.ci[:2],
                    paper_text,
                    c.verdict,
                    se=c.ci[2:],
                    p=noise_p,
                    note=note,
                )
            )
        cal_half, alg_half, claim = perplexity_decision(grids)
        for kind, half, paper_text, threshold in (
            ("calibration shift", cal_half, f"{lo3}–{hi3} orders", "≥ 1 order"),
            ("algorithm spread", alg_half, f"< {below:g} order in most conditions", f"< {below:g} order"),
        ):
            verdicts = list(conditions.loc[conditions["kind"] == kind, "verdict"])
            rows.append(
                _row(
                    "5.2",
                    f"all{label}",
                    f"perplexity: conditions whose {kind} is {threshold} (claim: most, i.e. > half (ours))",
                    verdicts.count(HOLDS),
                    paper=paper_text if not label else "",
                    verdict=half,
                    note=f"of {len(verdicts)} conditions; {verdicts.count(UNSURE)} inconclusive"
                    + ("; sensitivity, not in the claim's verdict" if label else ""),
                )
            )
        if not label:
            null_pass = float("nan")
            if samples is not None:
                null_pass = _null_pass(samples, grids, "perplexity", lambda g: perplexity_decision(g)[2] == HOLDS)
            rows.append(
                _row(
                    "5.2",
                    "all",
                    "perplexity: calibration dominates (both halves hold)",
                    float(claim == HOLDS),
                    paper="1–3 orders vs < 1 order",
                    verdict=_informative(claim, null_pass),
                    null_pass=null_pass,
                    note="value 1 when both halves hold; null pass: share of null studies (no effect of "
                    "calibration or algorithm) that pass",
                )
            )
            overall["log10_avg_perplexity"] = _informative(claim, null_pass)
    if failed:
        remarks.append(
            "Failed searches (final calibration loss worse than one-shot's on the same objective): "
            + ", ".join(failed)
            + ". Rows marked `without failed searches` recompute the statistics without them (sensitivity)."
        )
    # --- accuracy: the paper's range statistic, pooled by the max over cells
    ranges = range_statistic(summary, reps)
    paper_acc_ratio = p["accuracy_shift_calibration_points"] / p["accuracy_shift_algorithm_points"]
    for r in ranges.itertuples(index=False):
        scope = "all (max over cells)" if r.model == "all" else f"{r.model} M={r.budget}"
        pooled = r.model == "all"
        ci, se = (r.ratio_ci_low, r.ratio_ci_high), (r.ratio_ci_low_mc_se, r.ratio_ci_high_mc_se)
        note = f"mdd of calibration − algorithm shift {r.mdd:.3g}" if np.isfinite(r.mdd) else ""
        if r.response == "avg_accuracy_points":
            unit = "points"
            paper_cal = f"{p['accuracy_shift_calibration_points']:.2f}"
            paper_alg = f"{p['accuracy_shift_algorithm_points']:.2f}"
            paper_ratio = f"{paper_acc_ratio:.2f} (comparable)"
            statistic = f"accuracy shift ratio calibration / algorithm (claim: in [1/{band:g}, {band:g}] (ours))"
        else:
            unit = "orders of magnitude"
            paper_cal = paper_alg = paper_ratio = ""
            statistic = "perplexity shift ratio calibration / algorithm (largest shifts)"
            note = "; ".join(n for n in (note, windows) if n)
        rows.append(
            _row(
                "5.2",
                scope,
                f"{r.response}: largest shift from calibration ({unit})",
                r.shift_calibration,
                (r.shift_calibration_ci_low, r.shift_calibration_ci_high),
                paper_cal if pooled else "",
            )
        )
        rows.append(
            _row(
                "5.2",
                scope,
                f"{r.response}: largest shift from algorithm ({unit})",
                r.shift_algorithm,
                (r.shift_algorithm_ci_low, r.shift_algorithm_ci_high),
                paper_alg if pooled else "",
            )
        )
        if pooled and r.response == "avg_accuracy_points":
            verdict = _ratio_verdict(r.response, ci, se, r.ratio, band)
            null_pass = float("nan")
            if samples is not None:
                grids = cell_grids(summary, "avg_accuracy_points", reps)
                null_pass = _null_pass(samples, grids, "accuracy", lambda g: accuracy_decision(g, band))
            verdict = _informative(verdict, null_pass)
            overall[r.response] = verdict
            note = "; ".join(
                n
                for n in (note, "null pass: share of null studies (no effect at all) whose interval lies in the band")
                if n
            )
            rows.append(
                _row("5.2", scope, statistic, r.ratio, ci, paper_ratio, verdict, se=se, null_pass=null_pass, note=note)
            )
        else:
            rows.append(_row("5.2", scope, statistic, r.ratio, ci, se=se, note=note))
    decomposition = variance_decomposition(summary, reps)
    for r in decomposition.dropna(subset=["ss_total"]).itertuples(index=False):
        scope = f"{r.model} M={r.budget}"
        for part, df in (
            ("calibration", r.df_calibration),
            ("algorithm", r.df_algorithm),
            ("interaction", r.df_interaction),
        ):
            rows.append(
                _row(
                    "5.2",
                    scope,
                    f"{r.response}: SS share of {part} (df {int(df)})",
                    getattr(r, f"share_{part}"),
                    (getattr(r, f"share_{part}_ci_low"), getattr(r, f"share_{part}_ci_high")),
                )
            )
        for part in ("calibration", "algorithm", "interaction"):
            rows.append(_row("5.2", scope, f"{r.response}: mean square of {part} (SS/df)", getattr(r, f"ms_{part}")))
        rows.append(
            _row(
                "5.2",
                scope,
                f"{r.response}: per-df reading √(MS calibration / MS algorithm)",
                r.ms_ratio_sqrt,
                (r.ms_ratio_sqrt_ci_low, r.ms_ratio_sqrt_ci_high),
                se=(r.ms_ratio_sqrt_ci_low_mc_se, r.ms_ratio_sqrt_ci_high_mc_se),
                note="reading beside the range statistic",
            )
        )
    if failed:
        for r in range_statistic(reduced, reps).itertuples(index=False):
            scope = (
                "all (max over cells)" if r.model == "all" else f"{r.model} M={r.budget}"
            ) + ", without failed searches"
            rows.append(
                _row(
                    "5.2",
                    scope,
                    f"{r.response}: shift ratio calibration / algorithm (sensitivity)",
                    r.ratio,
                    (r.ratio_ci_low, r.ratio_ci_high),
                    se=(r.ratio_ci_low_mc_se, r.ratio_ci_high_mc_se),
                    note="sensitivity" + (f"; {int(r.n_algorithms)} algorithms" if r.model != "all" else ""),
                )
            )
    verdict = combine(list(overall.values())) if len(overall) == 2 else NOT_TESTABLE
    return rows, verdict, remarks


def _informative(verdict: str, null_pass: float) -> str:
    """``uninformative`` when pure noise passes the test more often than UNINFORMATIVE_LEVEL (a test
    that did not pass keeps its verdict: the data rejected even a lenient test)."""
    if np.isfinite(null_pass) and null_pass > UNINFORMATIVE_LEVEL and verdict in (HOLDS, UNSURE):
        return UNINFORMATIVE
    return verdict


def _null_pass(samples: pd.DataFrame, grids: list[dict], kind: str, decide, tasks: dict | None = None) -> float:
    """Pass probability of ``decide`` (on per-cell grids) over null studies built from ``samples``;
    ``tasks`` (model -> zero-shot tasks) restricts an accuracy null to each model's tasks."""
    from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS, ZERO_SHOT_BENCHMARKS

    benchmarks = ZERO_SHOT_BENCHMARKS if kind == "accuracy" else PERPLEXITY_BENCHMARKS
    cells = [unit_scores(samples, g["runs"], tasks[g["model"]] if tasks is not None else benchmarks) for g in grids]
    if not grids or any(c is None for c in cells):
        return float("nan")
    transform = (lambda v: 100 * v) if kind == "accuracy" else np.log10

    def rule(observed, replicates):
        return decide(regrid(grids, observed, replicates, transform))

    return pass_probability(cells, rule, kind)


def _perplexity_noise_p(samples: pd.DataFrame, runs: pd.DataFrame, kind: str) -> float:
    """Permutation p of a calibration shift (two runs) or an algorithm spread (several runs) of
    log10 average perplexity against each window's / document's scores shuffled among the runs."""
    from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS

    units = unit_scores(samples, runs, PERPLEXITY_BENCHMARKS)
    if units is None or len(runs) < 2:
        return float("nan")
    return exceeds_noise(units, lambda v: float(np.ptp(np.log10(v))), "perplexity", n_null=NOISE_P_DRAWS)


def observe_rho(summary: pd.DataFrame, reps, paper: dict, strong_rho: float) -> tuple[list[dict], str]:
    """§5.3 on distinct removed sets (``reporting/statistics/distinct.py``): per cell ρ, its number of distinct
    sets, exact permutation p and bootstrap interval (descriptive); the claims judged as the paper
    states them, across cells: TLM pruning positive in every cell, perplexity pruning negative in
    most cells with a weak median (−strong_rho < median < 0). Beside each claim verdict, the chance
    that it passes when perplexity and accuracy are unrelated in every cell (each cell's exact
    permutation distribution)."""
    from depthprune.reporting.statistics.bootstrap import interval_mc, spearman_rows

    table = distinct_spearman_table(summary)
    table = table[table["calibration"].isin(PAPER_CALIBRATIONS)]
    p = paper["section_5_3"]
    rows, verdicts = [], []
    nulls: dict[str, list[np.ndarray]] = {"tlm": [], "ppl": []}
    observed: dict[str, list[float]] = {"tlm": [], "ppl": []}
    pruned = summary[summary["algorithm"] != "dense"]
    for r in table.itertuples(index=False):
        group = pruned[
            (pruned["model"] == r.model) & (pruned["budget"] == r.budget) & (pruned["calibration"] == r.calibration)
        ]
        sets = distinct_sets(group)
        ci = se = NAN2
        if reps is not None and len(sets) >= 3:
            first = [a.split("+")[0] for a in sets["algorithms"]]
            keyed = group.set_index("algorithm").loc[first].reset_index()
            ends = interval_mc(
                spearman_rows(reps.aligned(keyed, "avg_perplexity"), reps.aligned(keyed, "avg_accuracy"))
            )
            ci, se = ends[:2], ends[2:]
        kind = r.calibration_kind
        if np.isfinite(r.rho):
            nulls[kind].append(null_distribution(sets["avg_perplexity"], sets["avg_accuracy"]))
            observed[kind].append(r.rho)
        rows.append(
            _row(
                "5.3",
                f"{r.model} M={r.budget} {r.calibration}",
                "ρ over distinct sets (per cell, descriptive)",
                r.rho,
                ci,
                se=se,
                p=r.p_value,
                note=f"{r.n_distinct_sets} distinct sets among {r.n_algorithms} algorithms; p: {r.p_method}, "
                f"two-sided; sets: {r.sets}",
            )
        )
    for kind, label in (("tlm", "TLM"), ("ppl", "perplexity")):
        rho = np.asarray(observed[kind], dtype=float)
        if not len(rho):
            continue
        lo, hi = p[kind]["range"]
        n = len(rho)
        rows.append(
            _row(
                "5.3",
                f"all, {label} pruning",
                "median ρ over cells (distinct sets)",
                float(np.median(rho)),
                paper=f"{p[kind]['median']:+.2f} (range {lo:+.2f} to {hi:+.2f})",
            )
        )
        if kind == "tlm":
            count = int((rho > 0).sum())
            verdict = HOLDS if count == n else FAILS
            null_pass = float(np.prod([(null > 0).mean() for null in nulls[kind]]))
            statistic = "cells with ρ > 0 (claim: all cells, misalignment)"
            paper_text = f"{p['tlm']['positive_cells']}/{p['tlm']['cells']} positive"
        else:
            count = int((rho < 0).sum())
            verdict = HOLDS if count > n / 2 else FAILS
            null_pass = _majority_negative_probability([(null < 0).mean() for null in nulls[kind]])
            statistic = "cells with ρ < 0 (claim: most cells, i.e. > half (ours), alignment)"
            paper_text = f"{p['ppl']['negative_cells']}/{p['ppl']['cells']} negative"
        verdict = _informative(verdict, null_pass)
        verdicts.append(verdict)
        rows.append(
            _row(
                "5.3",
                f"all, {label} pruning",
                statistic,
                count,
                paper=paper_text,
                verdict=verdict,
                null_pass=null_pass,
                note=f"of {n} cells; null pass: probability under no association in any cell (exact per cell)",
            )
        )
        if kind == "ppl":
            median = float(np.median(rho))
            weak = HOLDS if -strong_rho < median < 0 else FAILS
            null_pass = _median_in_probability(nulls[kind], -strong_rho, 0.0)
            weak = _informative(weak, null_pass)
            verdicts.append(weak)
            rows.append(
                _row(
                    "5.3",
                    "all, perplexity pruning",
                    f"median ρ (claim: weak alignment, −{strong_rho:g} < median < 0 (ours))",
                    median,
                    paper=f"median {p['ppl']['median']:+.2f} (weak)",
                    verdict=weak,
                    null_pass=null_pass,
                    note=f"null pass: Monte Carlo, {MEDIAN_NULL_DRAWS} draws from the cells' exact null distributions",
                )
            )
    return rows, combine(verdicts)


MEDIAN_NULL_DRAWS = 20_000


def _majority_negative_probability(probabilities: list[float]) -> float:
    """P(more than half of independent cells are negative), cell i negative with probability p_i
    (Poisson-binomial, exact)."""
    pmf = np.array([1.0])
    for q in probabilities:
        pmf = np.convolve(pmf, [1 - q, q])
    n = len(probabilities)
    return float(pmf[np.arange(n + 1) > n / 2].sum())


def _median_in_probability(nulls: list[np.ndarray], low: float, high: float) -> float:
    """P(low < median of one draw per cell < high), cells independent, each from its null values."""
    if not nulls:
        return float("nan")
    rng = np.random.default_rng([20_260_503, len(nulls), *(len(n) for n in nulls)])
    draws = np.stack([null[rng.integers(0, len(null), MEDIAN_NULL_DRAWS)] for null in nulls], axis=1)
    median = np.median(draws, axis=1)
    return float(((median > low) & (median < high)).mean())


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
        null_pass = float("nan")
        if samples is not None and view_reps is not None:
            grids = cell_grids(view, "avg_accuracy_points", view_reps)
            null_pass = _null_pass(samples, grids, "accuracy", lambda g: accuracy_decision(g, band), tasks=found.tasks)
        verdict = _informative(verdict, null_pass)
        statistic = f"accuracy shift ratio calibration / algorithm (claim: in [1/{band:g}, {band:g}] (ours))"
        for part, value, lo, hi in (
            ("calibration", r.shift_calibration, r.shift_calibration_ci_low, r.shift_calibration_ci_high),
            ("algorithm", r.shift_algorithm, r.shift_algorithm_ci_low, r.shift_algorithm_ci_high),
        ):
            rows.append(
                _row(
                    "5.2",
                    f"all (max over cells){INFORMATIVE_SCOPE}",
                    f"{r.response}: largest shift from {part} (points)",
                    value,
                    (lo, hi),
                    note=note,
                )
            )
        rows.append(
            _row(
                "5.2",
                f"all (max over cells){INFORMATIVE_SCOPE}",
                statistic,
                r.ratio,
                ci,
                verdict=verdict,
                se=se,
                null_pass=null_pass,
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


def evaluate_observations(
    selections: pd.DataFrame,
    summary: pd.DataFrame,
    reps=None,
    comparable_band: float = DEFAULT_COMPARABLE_BAND,
    strong_rho: float = DEFAULT_STRONG_RHO,
    seed_selections: Sequence[pd.DataFrame] = (),
    samples: pd.DataFrame | None = None,
    informative=None,
) -> Observations:
    """The observation rows and verdicts; ``seed_selections`` (one frame per seed, when the study has
    several) gives §5.1 its interval across seeds; ``informative`` (``informative.InformativeTasks``)
    adds the informative-task sensitivity rows of every accuracy verdict."""
    if not comparable_band > 1:
        raise ValueError(f"comparable_band must be > 1 (a ratio band [1/b, b]), got {comparable_band}")
    if not 0 < strong_rho < 1:
        raise ValueError(f"strong_rho must be in (0, 1), got {strong_rho}")
    paper = paper_values()
    rows, verdicts = [], {}
    variance_rows, variance_verdict, variance_remarks = observe_variance(
        summary, reps, paper, comparable_band, samples if reps is not None else None
    )
    for claim, (claim_rows, verdict) in (
        ("5.1", observe_sets(selections, paper, seed_selections)),
        ("5.2", (variance_rows, variance_verdict)),
        ("5.3", observe_rho(summary, reps, paper, strong_rho)),
    ):
        rows += claim_rows
        verdicts[claim] = verdict if claim_rows else NOT_TESTABLE
    sensitivity = []
    if informative is not None:
        extra, sensitivity = observe_informative(
            summary,
            reps,
            paper,
            comparable_band,
            strong_rho,
            informative,
            samples if reps is not None else None,
            rows,
        )
        rows += extra
    settings = {
        "comparable_band": comparable_band,
        "strong_rho": strong_rho,
        "bootstrap": f"{reps.n_resamples} resamples, seed {reps.seed}"
        if reps is not None
        else "none (no per-document results)",
    }
    return Observations(
        rows=pd.DataFrame(rows, columns=COLUMNS),
        verdicts=verdicts,
        settings=settings,
        remarks={"5.2": variance_remarks},
        informative=informative,
        sensitivity=sensitivity,
    )


def observations_frame(obs: Observations) -> pd.DataFrame:
    return obs.rows.copy()


def paper_comparison(obs: Observations) -> pd.DataFrame:
    """Every statistic the paper reports a value for, ours beside it, with interval and verdict."""
    rows = obs.rows[obs.rows["paper_value"] != ""]
    columns = ["claim", "scope", "statistic", "paper_value", "value", "ci_low", "ci_high"]
    return rows[[*columns, "null_pass_probability", "verdict"]].reset_index(drop=True)


def _fmt(value) -> str:
    if pd.isna(value):
        return "–"
    return f"{value:+.2f}" if abs(value) < 1e4 else f"{value:.2e}"


def _fmt_p(value) -> str:
    return "–" if pd.isna(value) else f"{value:.3g}"


def _interval(lo, hi) -> str:
    return "–" if pd.isna(lo) else f"[{_fmt(lo)}, {_fmt(hi)}]"


def _markdown(frame: pd.DataFrame, columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    for r in frame.itertuples(index=False):
        values = []
        for col in columns:
            if col == "95% interval":
                values.append(_interval(r.ci_low, r.ci_high))
            elif col == "value":
                values.append(_fmt(r.value))
            elif col == "null":
                values.append(_fmt(r.null_value))
            elif col == "p":
                values.append(_fmt_p(r.p_value))
            elif col == "null pass":
                values.append(_fmt_p(r.null_pass_probability))
            else:
                values.append(str(getattr(r, col)).replace("|", "\\|"))
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)


def observations_markdown(obs: Observations) -> str:
    s = obs.settings
    lines = [
        "# The paper's observations in these results",
        "",
        "Computed by `depthprune render` from the study's aggregate (`<results_dir>/aggregate/`). Intervals: 95 % paired bootstrap over "
        f"documents ({s['bootstrap']}); verdicts use only the paper's two calibrations (ppl_c4, tlm_cs170k). "
        "`inconclusive`: the interval straddles the claim's threshold, or one of its ends lies within "
        "2 Monte-Carlo standard errors of it (CSV: ci_low_mc_se, ci_high_mc_se). null: the value for random "
        "sets of the same size and depth; p: permutation p-value against it. null pass: how often the claim's "
        "test passes in simulated studies where no factor has any effect (each document's scores shuffled "
        f"among the runs, or ρ's exact permutation null); above {UNINFORMATIVE_LEVEL:.0%} the verdict is "
        "`uninformative`. Thresholds marked (ours) are not in the paper (docs/method.md §7).",
        "",
        f'- §5.2 "comparable" band: calibration shift / algorithm shift within [1/{s["comparable_band"]:g}, '
        f"{s['comparable_band']:g}] (the paper's 5.76 / 7.51 = 0.77 is inside).",
        "- §5.3 sign convention: ρ = Spearman(avg perplexity, avg accuracy) on raw values, as the paper's Figure 3. "
        "A **negative ρ means lower perplexity goes with higher accuracy: the rankings agree (alignment)**; "
        "ρ = −1 is perfect alignment. A positive ρ is misalignment. "
        f"|ρ| > {s['strong_rho']:g} counts as strong.",
        "",
    ]
    for claim, text in CLAIMS.items():
        rows = obs.claim_rows(claim)
        lines += [f"## §{claim} {text}", "", f"- Verdict: **{obs.verdicts[claim]}**."]
        lines += [f"- {remark}" for remark in obs.remarks.get(claim, [])]
        lines.append("")
        if not rows.empty:
            columns = ["scope", "statistic", "value", "95% interval", "null", "p", "null pass", "paper_value"]
            columns += ["verdict", "note"]
            lines += [_markdown(rows, columns), ""]
    if obs.informative is not None:
        lines += informative_markdown(obs)
    return "\n".join(lines).rstrip() + "\n"


def informative_markdown(obs: Observations) -> list[str]:
    """The "Informative tasks" section: the task list, its per-task table and each accuracy verdict
    on all six tasks beside its verdict on the informative tasks."""
    from depthprune.reporting.statistics.informative import informative_tasks_markdown

    found = obs.informative
    lines = [
        "## Informative tasks (sensitivity)",
        "",
        "A task is informative when the dense model's accuracy lies above the task's baseline (max of chance "
        "and the majority answer) with a 95 % document-bootstrap interval that excludes it; an average over "
        "the others measures nothing the dense model could do (docs/method.md §7). "
        f"Informative tasks: **{found.label()}**.",
        "",
        *informative_tasks_markdown(found),
        "",
    ]
    if not obs.sensitivity:
        return lines + ["No accuracy verdict recomputed: no informative task.", ""]
    lines += [
        "Every accuracy verdict on the six-task average and on the informative-task average (rows scoped "
        "`…, informative tasks` above; sensitivity, not in the claims' verdicts):",
        "",
        "| verdict | six tasks | informative tasks |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {label} | {main} | {sensitive} |" for label, main, sensitive in obs.sensitivity]
    return lines + [""]


def loss_accuracy_markdown(table: pd.DataFrame) -> str:
    """The "Search loss against accuracy" section of observations.md (tables/loss_accuracy.csv)."""
    lines = ["", "## Search loss against accuracy", ""]
    if table.empty:
        return "\n".join(lines + ["Not computed: no pruned sets with an accuracy.", ""])
    lines += [
        "Spearman ρ between each algorithm's calibration loss (the objective its search minimised) or its loss on "
        "the fixed held-out draw, and the pruned model's average zero-shot accuracy, per cell. A negative ρ is what "
        "a useful objective gives (lower loss, higher accuracy); a positive ρ means the lowest losses were bought "
        "with worse models. Intervals resample the evaluation documents; n = 7 algorithms is a small sample "
        "(the paper calls such correlations not statistically rigorous), so read them with `n_distinct_sets`.",
        "",
        "| model | M | calibration | loss | n (distinct) | ρ | 95% interval | p |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in table.itertuples(index=False):
        lines.append(
            f"| {r.model} | {r.budget} | {r.calibration} | {r.loss_kind} | {r.n} ({r.n_distinct_sets}) | "
            f"{_fmt(r.rho)} | {_interval(r.rho_ci_low, r.rho_ci_high)} | {_fmt_p(r.p_value)} |"
        )
    return "\n".join(lines + [""])


def paper_comparison_markdown(obs: Observations) -> str:
    frame = paper_comparison(obs)
    lines = [
        "# The paper's reported figures beside ours",
        "",
        "Paper values from `src/depthprune/reporting/paper_values.yaml` (the paper's text). Our values with "
        f"95 % paired document-bootstrap intervals ({obs.settings['bootstrap']}).",
        "",
    ]
    if frame.empty:
        return "\n".join(lines + ["_No statistic to compare._", ""])
    columns = ["claim", "scope", "statistic", "paper_value", "value", "95% interval", "null pass", "verdict"]
    lines.append(_markdown(frame, columns))
    return "\n".join(lines).rstrip() + "\n"


def summarise_observations(aggregate_dir: str | Path) -> str:
    """Markdown stating, from the aggregated numbers, whether each of the paper's observations holds."""
    agg = load_aggregate(aggregate_dir, tables=("selections", "summary"))
    return observations_markdown(evaluate_observations(agg.selections, agg.summary))

"""Whether the paper's three observations hold in our numbers, each measured as the paper measures it.

Every row of ``observations.csv`` is one statistic: ``claim, scope, statistic, value, ci_low,
ci_high, ci_low_mc_se, ci_high_mc_se, null_value, p_value, paper_value, verdict, note``. Intervals
are 95 % paired document-bootstrap intervals (``reporting/bootstrap.py``) with the Monte-Carlo
standard error of each end; without per-document results they are empty and a verdict rests on
the point value. Verdicts are ``holds``, ``does not hold`` or ``inconclusive`` (the interval
straddles the threshold, or an end lies within Monte-Carlo error of it: ``bootstrap.resolved``);
``descriptive`` rows carry a number but no test. ``null_value`` is what random sets of the same
size and depth give, ``p_value`` the permutation p-value against it (``reporting/nulls.py``).
Only the paper's two calibrations (ppl_c4, tlm_cs170k) enter §5.2 and §5.3 verdicts.

1. §5.1 Calibration reshapes the pruned sets: in a (model, M) cell, sets of different algorithms
   under one calibration agree more (mean Jaccard "within") than one algorithm's sets across the
   calibrations ("across"): holds when within − across > 0 with exact label-swap permutation
   p ≤ ALPHA, does not hold when ≤ 0, else inconclusive. With several seeds, a t-interval of the
   difference across seeds. The within-calibration means stand beside the paper's 0.63 / 0.36 /
   0.51 and beside the random-set null.
2. §5.2 The paper's range statistic: the largest shift of average accuracy (points) when only the
   calibration changes against the largest shift when only the algorithm changes (paper: 5.76 vs
   7.51 points, which it calls comparable), and the same for average perplexity in orders of
   magnitude. ratio = calibration shift / algorithm shift. "Comparable" means the ratio lies in
   [1/band, band] (two-sided); calibration dominates above ``band``. Accuracy: the claim
   (comparable) holds when the whole interval lies in the band, does not hold when it lies wholly
   outside. Perplexity: the claim (calibration dominates) holds when the whole interval is > band.
   Pooled over cells by the max, as the paper. Beside it, the per-degree-of-freedom reading of the
   two-way decomposition, √(MS_calibration / MS_algorithm), under the same band, and the range
   statistic again without failed searches (sensitivity rows, not in the claim's verdict).
3. §5.3 ρ = Spearman(avg perplexity, avg accuracy) on raw values, as the paper's Figure 3. A
   NEGATIVE ρ means lower perplexity goes with higher accuracy: the rankings AGREE (alignment). A
   positive ρ is misalignment. The paper: TLM pruning positive in 6/6 settings (median +0.55),
   perplexity pruning negative in 5/6 (median −0.27, i.e. weak alignment). TLM cells: holds when
   the interval is > 0. Perplexity cells: the sign claim (negative) holds when the interval is < 0;
   the paper's reading that perplexity is a *limited* proxy needs the alignment to be weak, tested
   as ρ > −strong_rho (holds when the interval is above −strong_rho, does not hold when below).
   A cell whose algorithms removed fewer than MIN_DISTINCT_SETS distinct sets is inconclusive: ρ
   over four distinct models is not a ranking of seven.
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
    pairwise_jaccard,
    range_statistic,
    spearman_table,
    variance_decomposition,
    without_failed_searches,
)
from depthprune.reporting.bootstrap import resolved
from depthprune.reporting.nulls import expected_random_jaccard, pooled_agreement_null, within_across_permutation
from depthprune.reporting.style import PAPER_CALIBRATIONS

# ratio of the calibration shift to the algorithm shift inside [1/2, 2] counts as "comparable": the
# paper's own 5.76 vs 7.51 (ratio 0.77) is, and a shift twice the other is the smallest we would call
# "dominating": squared, a 2:1 shift ratio is a 4:1 ratio of variances, one effect 80 % of the two
# (docs/method.md §7). Configurable: render --comparable-band / config analysis.comparable_band.
DEFAULT_COMPARABLE_BAND = 2.0
ALPHA = 0.05  # permutation tests (§5.1)
MIN_DISTINCT_SETS = 5  # §5.3: fewer distinct pruned sets in a cell -> inconclusive
# A perplexity benchmark with fewer windows than this gets its intervals labelled "window-level
# only": a bootstrap over 4 windows has 35 distinct resamples and says nothing about the corpus.
MIN_WINDOWS = 20
# |ρ| above this is strong; the paper's perplexity-pruning median −0.27 is weak (alignment, but loose).
DEFAULT_STRONG_RHO = 0.5

HOLDS, FAILS, UNSURE, DESCRIPTIVE = "holds", "does not hold", "inconclusive", "descriptive"
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
    tested = [v for v in verdicts if v in (HOLDS, FAILS, UNSURE)]
    if not tested:
        return NOT_TESTABLE
    if tested and all(v == HOLDS for v in tested):
        return HOLDS
    if tested and all(v == FAILS for v in tested):
        return FAILS
    return UNSURE


@dataclass
class Observations:
    rows: pd.DataFrame  # COLUMNS
    verdicts: dict[str, str]  # claim -> overall verdict
    settings: dict
    remarks: dict[str, list[str]] = field(default_factory=dict)  # claim -> sentences for observations.md

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


def observe_variance(summary: pd.DataFrame, reps, paper: dict, band: float) -> tuple[list[dict], str, list[str]]:
    ranges = range_statistic(summary, reps)
    p = paper["section_5_2"]
    paper_acc_ratio = p["accuracy_shift_calibration_points"] / p["accuracy_shift_algorithm_points"]
    windows = window_note(reps)
    rows, overall, range_verdicts = [], {}, {}
    for r in ranges.itertuples(index=False):
        scope = "all (max over cells)" if r.model == "all" else f"{r.model} M={r.budget}"
        pooled = r.model == "all"
        ci, se = (r.ratio_ci_low, r.ratio_ci_high), (r.ratio_ci_low_mc_se, r.ratio_ci_high_mc_se)
        verdict = _ratio_verdict(r.response, ci, se, r.ratio, band)
        note = f"mdd of calibration − algorithm shift {r.mdd:.3g}" if np.isfinite(r.mdd) else ""
        if r.response == "avg_accuracy_points":
            unit = "points"
            paper_cal, paper_alg = (
                f"{p['accuracy_shift_calibration_points']:.2f}",
                f"{p['accuracy_shift_algorithm_points']:.2f}",
            )
            paper_ratio = f"{paper_acc_ratio:.2f} (comparable)"
            statistic = f"accuracy shift ratio calibration / algorithm (claim: in [1/{band:g}, {band:g}])"
        else:
            unit = "orders of magnitude"
            lo, hi = p["perplexity_shift_calibration_orders"]
            paper_cal, paper_alg = f"{lo}–{hi}", f"< {p['perplexity_shift_algorithm_orders_below']}"
            paper_ratio = "> 1 (calibration dominates)"
            statistic = f"perplexity shift ratio calibration / algorithm (claim: > {band:g})"
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
        rows.append(
            _row("5.2", scope, statistic, r.ratio, ci, paper_ratio if pooled else "", verdict, se=se, note=note)
        )
        range_verdicts[(scope, r.response)] = verdict
        if pooled:
            overall[r.response] = verdict
    remarks = []
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
        ci, se = (
            (r.ms_ratio_sqrt_ci_low, r.ms_ratio_sqrt_ci_high),
            (
                r.ms_ratio_sqrt_ci_low_mc_se,
                r.ms_ratio_sqrt_ci_high_mc_se,
            ),
        )
        verdict = _ratio_verdict(r.response, ci, se, r.ms_ratio_sqrt, band)
        claim = f"in [1/{band:g}, {band:g}]" if r.response == "avg_accuracy_points" else f"> {band:g}"
        rows.append(
            _row(
                "5.2",
                scope,
                f"{r.response}: per-df reading √(MS calibration / MS algorithm) (claim: {claim})",
                r.ms_ratio_sqrt,
                ci,
                verdict=verdict,
                se=se,
                note="reading beside the range statistic; not in the claim's verdict",
            )
        )
        range_verdict = range_verdicts.get((scope, r.response))
        if range_verdict is not None and range_verdict != verdict:
            remarks.append(
                f"{scope}, {r.response}: the readings disagree: range statistic {range_verdict}, per-df "
                f"decomposition {verdict} (√(MS_cal/MS_alg) = {r.ms_ratio_sqrt:.2f}; MS_calibration is "
                f"the calibration contrast with all {r.n_algorithms} algorithms behind it, while the range "
                "takes the single largest shift)."
            )
    # Sensitivity: the range statistic without the searches that failed on their own objective.
    reduced, failed = without_failed_searches(summary)
    if failed:
        remarks.append(
            "Failed searches (final calibration loss worse than one-shot's on the same objective): "
            + ", ".join(failed)
            + ". The sensitivity rows recompute the range statistic without them."
        )
        for r in range_statistic(reduced, reps).itertuples(index=False):
            scope = (
                "all (max over cells)" if r.model == "all" else f"{r.model} M={r.budget}"
            ) + ", without failed searches"
            ci, se = (r.ratio_ci_low, r.ratio_ci_high), (r.ratio_ci_low_mc_se, r.ratio_ci_high_mc_se)
            rows.append(
                _row(
                    "5.2",
                    scope,
                    f"{r.response}: shift ratio calibration / algorithm (sensitivity)",
                    r.ratio,
                    ci,
                    verdict=_ratio_verdict(r.response, ci, se, r.ratio, band),
                    se=se,
                    note="sensitivity; not in the claim's verdict"
                    + (f"; {int(r.n_algorithms)} algorithms" if r.model != "all" else ""),
                )
            )
    verdict = combine(list(overall.values())) if len(overall) == 2 else NOT_TESTABLE
    return rows, verdict, remarks


def observe_rho(summary: pd.DataFrame, reps, paper: dict, strong_rho: float) -> tuple[list[dict], str]:
    spearman = spearman_table(summary, reps)
    spearman = spearman[spearman["calibration"].isin(PAPER_CALIBRATIONS)]
    p = paper["section_5_3"]
    rows, verdicts = [], []
    for r in spearman.itertuples(index=False):
        scope = f"{r.model} M={r.budget} {r.calibration}"
        ci, se = (r.rho_ci_low, r.rho_ci_high), (r.rho_ci_low_mc_se, r.rho_ci_high_mc_se)
        few = r.n_distinct_sets < MIN_DISTINCT_SETS
        note = f"{r.n_distinct_sets} distinct sets among {r.n} algorithms" + (
            f" (< {MIN_DISTINCT_SETS}: inconclusive)" if few else ""
        )

        def rule(verdict: str, few: bool = few) -> str:
            return UNSURE if few else verdict

        if r.calibration_kind == "tlm":
            verdict = rule(above(*ci, r.rho, 0.0, se=se))
            rows.append(
                _row(
                    "5.3",
                    scope,
                    "ρ (TLM pruning; claim: > 0, misalignment)",
                    r.rho,
                    ci,
                    f"{p['tlm']['positive_cells']}/{p['tlm']['cells']} positive",
                    verdict,
                    se=se,
                    note=note,
                )
            )
            verdicts.append(verdict)
        else:
            sign = rule(below(*ci, r.rho, 0.0, strict=True, se=se))
            weak = rule(above(*ci, r.rho, -strong_rho, se=se))
            rows.append(
                _row(
                    "5.3",
                    scope,
                    "ρ (perplexity pruning; sign claim: < 0, alignment)",
                    r.rho,
                    ci,
                    f"{p['ppl']['negative_cells']}/{p['ppl']['cells']} negative",
                    sign,
                    se=se,
                    note=note,
                )
            )
            rows.append(
                _row(
                    "5.3",
                    scope,
                    f"ρ (perplexity pruning; weak-alignment claim: > −{strong_rho:g})",
                    r.rho,
                    ci,
                    "median −0.27 (weak)",
                    weak,
                    se=se,
                    note=note,
                )
            )
            verdicts += [sign, weak]
    for kind, label in (("tlm", "TLM"), ("ppl", "perplexity")):
        rho = spearman.loc[spearman["calibration_kind"] == kind, "rho"].dropna()
        if len(rho):
            lo, hi = p[kind]["range"]
            rows.append(
                _row(
                    "5.3",
                    f"all, {label} pruning",
                    "median ρ over cells",
                    rho.median(),
                    paper=f"{p[kind]['median']:+.2f} (range {lo:+.2f} to {hi:+.2f})",
                )
            )
            rows.append(
                _row(
                    "5.3",
                    f"all, {label} pruning",
                    "cells with ρ > 0" if kind == "tlm" else "cells with ρ < 0",
                    int((rho > 0).sum() if kind == "tlm" else (rho < 0).sum()),
                    paper=str(p[kind]["positive_cells" if kind == "tlm" else "negative_cells"]),
                )
            )
    return rows, combine(verdicts)


def evaluate_observations(
    selections: pd.DataFrame,
    summary: pd.DataFrame,
    reps=None,
    comparable_band: float = DEFAULT_COMPARABLE_BAND,
    strong_rho: float = DEFAULT_STRONG_RHO,
    seed_selections: Sequence[pd.DataFrame] = (),
) -> Observations:
    """The observation rows and verdicts; ``seed_selections`` (one frame per seed, when the study has
    several) gives §5.1 its interval across seeds."""
    if not comparable_band > 1:
        raise ValueError(f"comparable_band must be > 1 (a ratio band [1/b, b]), got {comparable_band}")
    if not 0 < strong_rho < 1:
        raise ValueError(f"strong_rho must be in (0, 1), got {strong_rho}")
    paper = paper_values()
    rows, verdicts = [], {}
    variance_rows, variance_verdict, variance_remarks = observe_variance(summary, reps, paper, comparable_band)
    for claim, (claim_rows, verdict) in (
        ("5.1", observe_sets(selections, paper, seed_selections)),
        ("5.2", (variance_rows, variance_verdict)),
        ("5.3", observe_rho(summary, reps, paper, strong_rho)),
    ):
        rows += claim_rows
        verdicts[claim] = verdict if claim_rows else NOT_TESTABLE
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
    )


def observations_frame(obs: Observations) -> pd.DataFrame:
    return obs.rows.copy()


def paper_comparison(obs: Observations) -> pd.DataFrame:
    """Every statistic the paper reports a value for, ours beside it, with interval and verdict."""
    rows = obs.rows[obs.rows["paper_value"] != ""]
    return rows[["claim", "scope", "statistic", "paper_value", "value", "ci_low", "ci_high", "verdict"]].reset_index(
        drop=True
    )


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
        "sets of the same size and depth; p: permutation p-value against it.",
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
            columns = ["scope", "statistic", "value", "95% interval", "null", "p", "paper_value", "verdict", "note"]
            lines += [_markdown(rows, columns), ""]
    return "\n".join(lines).rstrip() + "\n"


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
    lines.append(_markdown(frame, ["claim", "scope", "statistic", "paper_value", "value", "95% interval", "verdict"]))
    return "\n".join(lines).rstrip() + "\n"


def summarise_observations(aggregate_dir: str | Path) -> str:
    """Markdown stating, from the aggregated numbers, whether each of the paper's observations holds."""
    agg = load_aggregate(aggregate_dir, tables=("selections", "summary"))
    return observations_markdown(evaluate_observations(agg.selections, agg.summary))

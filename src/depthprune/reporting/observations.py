"""Whether the paper's three observations hold in our numbers, each measured as the paper measures it.

Every row of ``observations.csv`` is one statistic: ``claim, scope, statistic, value, ci_low,
ci_high, paper_value, verdict``. Intervals are 95 % paired document-bootstrap intervals
(``reporting/bootstrap.py``); without per-document results they are empty and a verdict rests on
the point value. Verdicts are ``holds``, ``does not hold`` or ``inconclusive`` (the interval
straddles the threshold); ``descriptive`` rows carry a number the paper reports but no test.
Only the paper's two calibrations (ppl_c4, tlm_cs170k) enter §5.2 and §5.3 verdicts.

1. §5.1 Calibration reshapes the pruned sets: in a (model, M) cell, sets of different algorithms
   under one calibration agree more (mean Jaccard "within") than one algorithm's sets across the
   calibrations ("across"). The within-calibration means stand beside the paper's 0.63 / 0.36 / 0.51.
2. §5.2 The paper's range statistic: the largest shift of average accuracy (points) when only the
   calibration changes against the largest shift when only the algorithm changes (paper: 5.76 vs
   7.51 points, which it calls comparable), and the same for average perplexity in orders of
   magnitude. ratio = calibration shift / algorithm shift. "Comparable" means the ratio lies in
   [1/band, band]; calibration dominates above ``band``. Accuracy: the claim (calibration does not
   dominate) holds when the whole interval of the ratio is ≤ band. Perplexity: the claim
   (calibration dominates) holds when the whole interval is > band. Pooled over cells by the max,
   as the paper.
3. §5.3 ρ = Spearman(avg perplexity, avg accuracy) on raw values, as the paper's Figure 3. A
   NEGATIVE ρ means lower perplexity goes with higher accuracy: the rankings AGREE (alignment). A
   positive ρ is misalignment. The paper: TLM pruning positive in 6/6 settings (median +0.55),
   perplexity pruning negative in 5/6 (median −0.27, i.e. weak alignment). TLM cells: holds when
   the interval is > 0. Perplexity cells: the sign claim (negative) holds when the interval is < 0;
   the paper's reading that perplexity is a *limited* proxy needs the alignment to be weak, tested
   as ρ > −strong_rho (holds when the interval is above −strong_rho, does not hold when below).
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from depthprune.reporting.aggregate import load_aggregate
from depthprune.reporting.analysis import pairwise_jaccard, range_statistic, spearman_table, variance_decomposition
from depthprune.reporting.style import PAPER_CALIBRATIONS

# ratio of the calibration shift to the algorithm shift inside [1/2, 2] counts as "comparable": the
# paper's own 5.76 vs 7.51 (ratio 0.77) is, and a shift twice the other is the smallest we would call
# "dominating" (docs/method.md §7). Configurable: render --comparable-band / config analysis.comparable_band.
DEFAULT_COMPARABLE_BAND = 2.0
# |ρ| above this is strong; the paper's perplexity-pruning median −0.27 is weak (alignment, but loose).
DEFAULT_STRONG_RHO = 0.5

HOLDS, FAILS, UNSURE, DESCRIPTIVE = "holds", "does not hold", "inconclusive", "descriptive"
NOT_TESTABLE = "not testable"
COLUMNS = ["claim", "scope", "statistic", "value", "ci_low", "ci_high", "paper_value", "verdict"]

CLAIMS = {
    "5.1": "Calibration reshapes the pruned layer sets (Figure 1, Tables 5-6).",
    "5.2": "Calibration dominates perplexity, but its effect on accuracy is comparable to the search algorithm's (Tables 1-3, Figure 2).",
    "5.3": "Under TLM pruning perplexity and accuracy are misaligned (ρ > 0); under perplexity pruning they align only weakly (ρ negative, median −0.27) (Figure 3).",
}


def paper_values() -> dict:
    """The paper's reported figures (``reporting/paper_values.yaml``)."""
    text = (importlib.resources.files("depthprune.reporting") / "paper_values.yaml").read_text("utf-8")
    return yaml.safe_load(text)


def above(lo: float, hi: float, value: float, threshold: float) -> str:
    """holds if the interval (or, without one, the value) is above ``threshold``; fails if below."""
    if np.isnan(lo) or np.isnan(hi):
        if np.isnan(value):
            return UNSURE
        return HOLDS if value > threshold else FAILS
    if lo > threshold:
        return HOLDS
    if hi <= threshold:
        return FAILS
    return UNSURE


def below(lo: float, hi: float, value: float, threshold: float, strict: bool = False) -> str:
    """holds if the interval (or, without one, the value) is ≤ ``threshold`` (< if ``strict``); fails if above."""
    ok = (lambda x: x < threshold) if strict else (lambda x: x <= threshold)
    if np.isnan(lo) or np.isnan(hi):
        if np.isnan(value):
            return UNSURE
        return HOLDS if ok(value) else FAILS
    if ok(hi):
        return HOLDS
    if not ok(lo):
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

    def claim_rows(self, claim: str) -> pd.DataFrame:
        return self.rows[self.rows["claim"] == claim]


def _row(claim, scope, statistic, value, ci=(np.nan, np.nan), paper="", verdict=DESCRIPTIVE) -> dict:
    return {
        "claim": claim,
        "scope": scope,
        "statistic": statistic,
        "value": float(value),
        "ci_low": float(ci[0]),
        "ci_high": float(ci[1]),
        "paper_value": paper,
        "verdict": verdict,
    }


def observe_sets(selections: pd.DataFrame, paper: dict) -> tuple[list[dict], str]:
    pairs = pairwise_jaccard(selections)
    pairs = pairs[pairs["calibration_a"].isin(PAPER_CALIBRATIONS) & pairs["calibration_b"].isin(PAPER_CALIBRATIONS)]
    rows, verdicts = [], []
    for (model, budget), cell in pairs.groupby(["model", "budget"], sort=True):
        within = cell.loc[cell["relation"] == "within", "jaccard"]
        across = cell.loc[cell["relation"] == "across_same_algorithm", "jaccard"]
        if len(within) and len(across):
            diff = within.mean() - across.mean()
            verdict = HOLDS if diff > 0 else FAILS
            verdicts.append(verdict)
            rows.append(
                _row("5.1", f"{model} M={budget}", "mean Jaccard within − across calibrations", diff, verdict=verdict)
            )
    reported = paper["section_5_1"]["jaccard_within"]
    for calibration in PAPER_CALIBRATIONS:
        within = pairs[(pairs["relation"] == "within") & (pairs["calibration_a"] == calibration)]
        if within.empty:
            continue
        per_cell = within.groupby(["model", "budget"])["jaccard"].mean()
        text = " / ".join(f"{v:.2f} ({k})" for k, v in reported.get(calibration, {}).items())
        rows.append(
            _row(
                "5.1", f"all, {calibration}", "mean within-calibration Jaccard over cells", per_cell.mean(), paper=text
            )
        )
    return rows, combine(verdicts)


def observe_variance(summary: pd.DataFrame, reps, paper: dict, band: float) -> tuple[list[dict], str]:
    ranges = range_statistic(summary, reps)
    p = paper["section_5_2"]
    paper_acc_ratio = p["accuracy_shift_calibration_points"] / p["accuracy_shift_algorithm_points"]
    rows, overall = [], {}
    for r in ranges.itertuples(index=False):
        scope = "all (max over cells)" if r.model == "all" else f"{r.model} M={r.budget}"
        pooled = r.model == "all"
        ci = (r.ratio_ci_low, r.ratio_ci_high)
        if r.response == "avg_accuracy_points":
            unit = "points"
            verdict = below(*ci, r.ratio, band)
            paper_cal, paper_alg = (
                f"{p['accuracy_shift_calibration_points']:.2f}",
                f"{p['accuracy_shift_algorithm_points']:.2f}",
            )
            paper_ratio = f"{paper_acc_ratio:.2f} (comparable)"
            statistic = f"accuracy shift ratio calibration / algorithm (claim: ≤ {band:g})"
        else:
            unit = "orders of magnitude"
            verdict = above(*ci, r.ratio, band)
            lo, hi = p["perplexity_shift_calibration_orders"]
            paper_cal, paper_alg = f"{lo}–{hi}", f"< {p['perplexity_shift_algorithm_orders_below']}"
            paper_ratio = "> 1 (calibration dominates)"
            statistic = f"perplexity shift ratio calibration / algorithm (claim: > {band:g})"
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
        rows.append(_row("5.2", scope, statistic, r.ratio, ci, paper_ratio if pooled else "", verdict))
        if pooled:
            overall[r.response] = verdict
    decomposition = variance_decomposition(summary, reps)
    for r in decomposition.dropna(subset=["ss_total"]).itertuples(index=False):
        for part, df in (
            ("calibration", r.df_calibration),
            ("algorithm", r.df_algorithm),
            ("interaction", r.df_interaction),
        ):
            rows.append(
                _row(
                    "5.2",
                    f"{r.model} M={r.budget}",
                    f"{r.response}: SS share of {part} (df {int(df)})",
                    getattr(r, f"share_{part}"),
                    (getattr(r, f"share_{part}_ci_low"), getattr(r, f"share_{part}_ci_high")),
                )
            )
    verdict = combine(list(overall.values())) if len(overall) == 2 else NOT_TESTABLE
    return rows, verdict


def observe_rho(summary: pd.DataFrame, reps, paper: dict, strong_rho: float) -> tuple[list[dict], str]:
    spearman = spearman_table(summary, reps)
    spearman = spearman[spearman["calibration"].isin(PAPER_CALIBRATIONS)]
    p = paper["section_5_3"]
    rows, verdicts = [], []
    for r in spearman.itertuples(index=False):
        scope = f"{r.model} M={r.budget} {r.calibration}"
        ci = (r.rho_ci_low, r.rho_ci_high)
        if r.calibration_kind == "tlm":
            verdict = above(*ci, r.rho, 0.0)
            rows.append(
                _row(
                    "5.3",
                    scope,
                    "ρ (TLM pruning; claim: > 0, misalignment)",
                    r.rho,
                    ci,
                    f"{p['tlm']['positive_cells']}/{p['tlm']['cells']} positive",
                    verdict,
                )
            )
            verdicts.append(verdict)
        else:
            sign = below(*ci, r.rho, 0.0, strict=True)
            weak = above(*ci, r.rho, -strong_rho)
            rows.append(
                _row(
                    "5.3",
                    scope,
                    "ρ (perplexity pruning; sign claim: < 0, alignment)",
                    r.rho,
                    ci,
                    f"{p['ppl']['negative_cells']}/{p['ppl']['cells']} negative",
                    sign,
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
) -> Observations:
    if not comparable_band > 1:
        raise ValueError(f"comparable_band must be > 1 (a ratio band [1/b, b]), got {comparable_band}")
    if not 0 < strong_rho < 1:
        raise ValueError(f"strong_rho must be in (0, 1), got {strong_rho}")
    paper = paper_values()
    rows, verdicts = [], {}
    for claim, (claim_rows, verdict) in (
        ("5.1", observe_sets(selections, paper)),
        ("5.2", observe_variance(summary, reps, paper, comparable_band)),
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
    return Observations(rows=pd.DataFrame(rows, columns=COLUMNS), verdicts=verdicts, settings=settings)


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
        "`inconclusive`: the interval straddles the claim's threshold.",
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
        lines += [f"## §{claim} {text}", "", f"- Verdict: **{obs.verdicts[claim]}**.", ""]
        if not rows.empty:
            lines += [_markdown(rows, ["scope", "statistic", "value", "95% interval", "paper_value", "verdict"]), ""]
    return "\n".join(lines).rstrip() + "\n"


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

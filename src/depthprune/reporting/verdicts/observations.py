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

The claims, one module each: §5.1 calibration reshapes the pruned sets (``verdicts/sets.py``);
§5.2 calibration dominates perplexity but is comparable to the algorithm on accuracy, with the
paper's own statistics (``verdicts/variance.py``); §5.3 perplexity and accuracy misaligned under
TLM pruning, weakly aligned under perplexity pruning (``verdicts/alignment.py``); the accuracy
verdicts again on the informative tasks (``verdicts/sensitivity.py``). The verdict words and
deciding rules are in ``verdicts/rules.py``. This module runs them together, and writes
``observations.md`` and the comparison with the paper's printed numbers.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from depthprune.errors import InputError
from depthprune.reporting.aggregate import load_aggregate
from depthprune.reporting.statistics.noise_null import UNINFORMATIVE_LEVEL
from depthprune.reporting.verdicts.alignment import DEFAULT_STRONG_RHO, observe_rho
from depthprune.reporting.verdicts.rules import COLUMNS, NOT_TESTABLE
from depthprune.reporting.verdicts.sensitivity import observe_informative
from depthprune.reporting.verdicts.sets import observe_sets
from depthprune.reporting.verdicts.variance import DEFAULT_COMPARABLE_BAND, observe_variance

CLAIMS = {
    "5.1": "Calibration reshapes the pruned layer sets (Figure 1, Tables 5-6).",
    "5.2": "Calibration dominates perplexity, but its effect on accuracy is comparable to the search algorithm's (Tables 1-3, Figure 2).",
    "5.3": "Under TLM pruning perplexity and accuracy are misaligned (ρ > 0); under perplexity pruning they align only weakly (ρ negative, median −0.27) (Figure 3).",
}


def paper_values() -> dict:
    """The paper's reported figures (``reporting/paper_values.yaml``)."""
    text = (importlib.resources.files("depthprune.reporting") / "paper_values.yaml").read_text("utf-8")
    return yaml.safe_load(text)


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
        raise InputError(f"comparable_band must be > 1 (a ratio band [1/b, b]), got {comparable_band}")
    if not 0 < strong_rho < 1:
        raise InputError(f"strong_rho must be in (0, 1), got {strong_rho}")
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
    return rows[[*columns, "null_pass_probability", "null_fail_probability", "verdict"]].reset_index(drop=True)


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
            elif col == "null fail":
                values.append(_fmt_p(r.null_fail_probability))
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
        "sets of the same size and depth; p: permutation p-value against it. null pass / null fail: how often "
        "the claim's test passes / does not hold in simulated studies where no factor has any effect (each "
        "document's scores shuffled among the runs, or ρ's exact permutation null); when that rate of the "
        f"verdict reached is above {UNINFORMATIVE_LEVEL:.0%}, the verdict is `uninformative`. Thresholds marked (ours) are not in the paper (docs/method.md §7).",
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
            columns = [
                "scope",
                "statistic",
                "value",
                "95% interval",
                "null",
                "p",
                "null pass",
                "null fail",
                "paper_value",
            ]
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
    columns = [
        "claim",
        "scope",
        "statistic",
        "paper_value",
        "value",
        "95% interval",
        "null pass",
        "null fail",
        "verdict",
    ]
    lines.append(_markdown(frame, columns))
    return "\n".join(lines).rstrip() + "\n"


def summarise_observations(aggregate_dir: str | Path) -> str:
    """Markdown stating, from the aggregated numbers, whether each of the paper's observations holds."""
    agg = load_aggregate(aggregate_dir, tables=("selections", "summary"))
    return observations_markdown(evaluate_observations(agg.selections, agg.summary))

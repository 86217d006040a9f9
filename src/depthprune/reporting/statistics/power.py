"""How many documents per task the evaluation needs: the evaluation-size rule (docs/method.md §7, "Power").

Every paired comparison reports ``mdd = (z_0.975 + z_0.8) · SE`` (``bootstrap.mdd``), the smallest
true difference a two-sided 5 % test detects with 80 % power. The paired standard error of a
difference of average accuracies scales as 1 / sqrt(documents per task), so from the committed
per-document results at ``limit`` documents the smallest ``limit`` at which a TLM-vs-perplexity
difference of ``TARGET_POINTS`` is detectable is limit · (MDD_FACTOR · SE / target)², rounded up.

The rule then asks whether a default study at that limit fits one working session on the slowest
2-core CPU measured (SESSION_MINUTES_SLOWEST_CPU there, BUDGET_MINUTES on the CPU its committed run
was measured on, SLOWEST_CPU_FACTOR times faster). Only the evaluation pass grows with the
limit (LAMBADA and the six zero-shot tasks; the perplexity windows, the priors, the searches and the
held-out scoring do not), so a cold run at a new limit n takes COLD_RUN_MINUTES − EVALUATION_MINUTES
+ EVALUATION_MINUTES · n / MEASURED_LIMIT. If the smallest detecting limit does not fit, the largest
limit that fits is chosen and its mdd stated; if no limit fits, the study keeps its limit and the
outcome says that the study itself must shrink. What the chosen run takes on the slowest VM is
stated beside it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from depthprune.reporting.statistics.bootstrap import MDD_FACTOR

TARGET_POINTS = 3.0  # the paper's smallest effect of interest: BO's +2.91 over one-shot (its Table 4)
# The default study's cold run (config.yaml: [22]'s barrier, held-out scoring, the seven searches,
# limit 100), install included, on a 2-core AMD EPYC (Zen 3) AVX2 CPU, float32, and its evaluation
# pass's LAMBADA and six zero-shot tasks: the record below (tests/test_reporting_verdicts.py reads it).
COLD_RUN_RECORD = "benchmarks/records/2026-12-04-default-cold-amd-zen3-avx2-float32.txt"
COLD_RUN_MINUTES = 79.2  # 1 h 19 min 12 s (/usr/bin/time -v)
EVALUATION_MINUTES = 24.38  # 1,463.0 s of the pass's 2,139.6 s
MEASURED_LIMIT = 100
# The slowest 2-core VM measured (another AMD EPYC Zen 3 VM, same day) ran 16 of these searches, with
# the same settings, this many times slower than the cold run above (sum of their job seconds; the
# two search records under benchmarks/records/). Its evaluation pass is assumed to slow down alike.
SLOWEST_CPU_FACTOR = 1.98  # 13 searches in both records (3 of the 16 were controls), all the same sets
# The study must run inside one 3-hour working session on every 2-core CPU measured, so the budget is
# set on the slowest: 180 min less the 15-min test suite the session that lands the study also runs
# (15 min 43 s there). In minutes of the CPU the study was measured on: 165 / 1.98 = 83.3.
SESSION_MINUTES_SLOWEST_CPU = 165.0
BUDGET_MINUTES = SESSION_MINUTES_SLOWEST_CPU / SLOWEST_CPU_FACTOR


def fixed_minutes() -> float:
    """Minutes of a default cold run that do not grow with the limit, on the measured CPU."""
    return COLD_RUN_MINUTES - EVALUATION_MINUTES


def run_minutes(limit: float) -> float:
    """Predicted cold-run minutes of the default study at ``limit`` documents per task (measured CPU)."""
    return fixed_minutes() + EVALUATION_MINUTES * limit / MEASURED_LIMIT


def largest_fitting_limit(budget_minutes: float = BUDGET_MINUTES) -> int:
    """The largest limit whose predicted cold run fits in ``budget_minutes``; 0 when none does."""
    spare = budget_minutes - fixed_minutes()
    return max(0, math.floor(MEASURED_LIMIT * spare / EVALUATION_MINUTES))


def limit_for(se_points: float, limit: int, target_points: float = TARGET_POINTS) -> int:
    """Smallest documents per task at which mdd ≤ target, from the SE (points) measured at ``limit``.

    At least one: a zero SE (every paired model answered alike, e.g. the same sets under both
    calibrations) meets any target, and zero documents would leave ``mdd_at`` nothing to divide by."""
    return max(1, math.ceil(limit * (MDD_FACTOR * se_points / target_points) ** 2))


def mdd_at(se_points: float, limit: int, new_limit: int) -> float:
    """mdd (points) at ``new_limit`` documents from the SE (points) measured at ``limit``."""
    return MDD_FACTOR * se_points * math.sqrt(limit / new_limit)


def evaluation_size(contrast: pd.DataFrame, limit: int | None, budget_minutes: float = BUDGET_MINUTES) -> pd.DataFrame:
    """The rule's one-row outcome from calibration_contrast (per-algorithm rows, ``diff_se`` in fractions).

    The SE is the median over the (model, M, algorithm) pairs of TLM- against perplexity-pruned
    models. Empty without paired standard errors (no per-document results).
    """
    columns = [
        "limit",
        "n_pairs",
        "median_se_points",
        "mdd_points",
        "target_points",
        "limit_needed",
        "minutes_needed",
        "fits_session",
        "budget_minutes",
        "limit_chosen",
        "minutes_chosen",
        "minutes_chosen_slowest_cpu",
        "mdd_points_chosen",
    ]
    if contrast.empty or limit is None or "diff_se" not in contrast.columns:
        return pd.DataFrame(columns=columns)
    per_pair = contrast[contrast["algorithm"] != "mean of the algorithms"]["diff_se"].dropna()
    if per_pair.empty:
        return pd.DataFrame(columns=columns)
    se = 100 * float(np.median(per_pair))
    needed = limit_for(se, limit)
    fits = run_minutes(needed) <= budget_minutes
    largest = largest_fitting_limit(budget_minutes)
    chosen = needed if fits else largest if largest >= 1 else limit  # none fits: the study must shrink
    if limit >= needed:  # the results already reach the target (a study sized apart, docs/method.md §11)
        chosen = limit
    return pd.DataFrame(
        [
            {
                "limit": limit,
                "n_pairs": len(per_pair),
                "median_se_points": se,
                "mdd_points": MDD_FACTOR * se,
                "target_points": TARGET_POINTS,
                "limit_needed": needed,
                "minutes_needed": run_minutes(needed),
                "fits_session": fits,
                "budget_minutes": budget_minutes,
                "limit_chosen": chosen,
                "minutes_chosen": run_minutes(chosen),
                "minutes_chosen_slowest_cpu": SLOWEST_CPU_FACTOR * run_minutes(chosen),
                "mdd_points_chosen": mdd_at(se, limit, chosen),
            }
        ],
        columns=columns,
    )


def evaluation_size_markdown(rule: pd.DataFrame) -> str:
    """The "Power and evaluation size" section of observations.md."""
    lines = ["", "## Power and evaluation size", ""]
    if rule.empty:
        return "\n".join(lines + ["Not computed: no per-document results.", ""])
    r = rule.iloc[0]
    first = (
        f"At {int(r.limit)} documents per task the paired standard error of a TLM-vs-perplexity difference in "
        f"average accuracy is {r.median_se_points:.2f} points (median over {int(r.n_pairs)} pairs): "
        f"mdd = (z_0.975 + z_0.8) · SE = {r.mdd_points:.2f} points at 80 % power, two-sided α = 0.05."
    )
    if int(r.limit) >= int(r.limit_needed):
        lines += [
            first,
            f"Detecting {r.target_points:g} points needs {int(r.limit_needed)} documents per task (SE ∝ 1/√n): "
            f"these results' {int(r.limit)} reach it, and the rule keeps their limit (tables/evaluation_size.csv).",
            "",
        ]
        return "\n".join(lines)
    lines += [
        first,
        f"Detecting {r.target_points:g} points needs {int(r.limit_needed)} documents per task "
        f"(SE ∝ 1/√n): a predicted cold run of the default study (config.yaml) of {r.minutes_needed:.0f} min on the "
        f"2-core CPU it was measured on, against a budget of {r.budget_minutes:.1f} min there: one working session "
        f"less the test suite ({SESSION_MINUTES_SLOWEST_CPU:.0f} min) on the slowest 2-core VM measured, "
        f"{SLOWEST_CPU_FACTOR:.2f}× slower ({'fits' if r.fits_session else 'does not fit'}).",
    ]
    if r.minutes_chosen > r.budget_minutes:
        lines.append(
            f"No limit fits: the study's searches, priors and perplexity windows alone take {fixed_minutes():.0f} min "
            f"there, so the limit stays at {int(r.limit_chosen)} (predicted {r.minutes_chosen:.0f} min, mdd "
            f"{r.mdd_points_chosen:.2f} points) and the study itself must shrink to fit a session."
        )
    else:
        committed = (
            "the committed results' limit"
            if int(r.limit_chosen) == int(r.limit)
            else f"these results use limit {int(r.limit)}, so the chosen one needs a rerun"
        )
        lines.append(
            f"Rule outcome: limit {int(r.limit_chosen)} (a predicted {r.minutes_chosen:.0f} min), mdd "
            f"{r.mdd_points_chosen:.2f} points; {committed} (tables/evaluation_size.csv)."
        )
    lines.append(
        f"On the slowest 2-core VM measured ({SLOWEST_CPU_FACTOR:.2f}× slower) that run would take about "
        f"{r.minutes_chosen_slowest_cpu:.0f} min."
    )
    lines.append("")
    return "\n".join(lines)

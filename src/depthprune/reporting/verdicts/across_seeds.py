"""The cross-seed decision rule (docs/method.md §10), applied to a study run at several seeds.

Each seed alone is judged as a single-seed study is (``observations.py``; ``seeds.verdicts_by_seed``
counts them). Across seeds, per claim:

- §5.2 and the TLM − perplexity gap: each statistic per seed with its document replicates, then the
  two-stage interval (``statistics/two_stage.py``: seeds, then documents within each seed) judged by
  the single-seed test: the gap excludes zero; a condition's calibration shift lies at or above one
  order, its algorithm spread below one (``paper_shifts.threshold_side``), each half holding in most
  conditions (``paper_shifts.most``); the pooled accuracy ratio lies in [1/band, band].
- §5.3: the sign of ρ on distinct sets in each of the (M, seed) cells; the claimed sign holds when
  at least ``cells_needed`` cells have it (7 of 8 with four seeds, 6 of 6 with three, 4 of 4 with
  two), does not hold when as many have the other sign, else inconclusive. A cell with ρ = 0 or undefined counts on neither side.
  Under perplexity pruning the weak-alignment claim is judged on the median ρ over all cells with
  its pooled two-stage interval (``two_stage_pooled``).
- §5.1: within − across Jaccard averaged over the seeds, against a label-swap null that flips each
  algorithm's two calibration labels independently in every seed (``SETS_NULL_DRAWS`` seeded draws).
"""

from __future__ import annotations

from collections.abc import Mapping
from math import comb

import numpy as np
import pandas as pd

from depthprune.io import parse_layers
from depthprune.reporting.analysis.agreement import jaccard
from depthprune.reporting.statistics.distinct import distinct_spearman_table
from depthprune.reporting.statistics.noise_null import UNINFORMATIVE_LEVEL
from depthprune.reporting.statistics.two_stage import (
    ACCURACY_RATIO,
    ALGORITHM_SPREAD,
    CALIBRATION_SHIFT,
    GAP,
    TWO_STAGE,
    difference_verdict,
    gap_replicates,
    seeds_two_stage_table,
    two_stage_pooled,
)
from depthprune.reporting.style import PAPER_CALIBRATIONS
from depthprune.reporting.verdicts.alignment import rho_replicates
from depthprune.reporting.verdicts.paper_shifts import (
    ORDER,
    cell_grids,
    condition_values,
    most,
    pooled_ratio,
    threshold_side,
)
from depthprune.reporting.verdicts.rules import (
    FAILS,
    HOLDS,
    NOT_TESTABLE,
    UNSURE,
    combine,
    uninformative_if_noise_passes,
    within_band,
)

SETS_NULL_DRAWS = 10_000
SETS_NULL_SEED = 20_261_206
ALPHA = 0.05
CLAIMS_COLUMNS = [
    "claim",
    "statistic",
    "n_seeds",
    "estimate",
    "ci_low",
    "ci_high",
    "seed_variance",
    "document_variance",
    "seeds_holding",
    "per_seed",
    "verdict",
    "rule",
]


def per_seed_statistics(summary: pd.DataFrame, reps) -> dict[tuple, tuple[float, np.ndarray]]:
    """One seed's (model, M, statistic, condition) -> (observed, document replicates): the gap, every
    §5.2 perplexity condition and the pooled accuracy ratio (model "all", M 0)."""
    out = gap_replicates(summary, reps)
    statistic = {"calibration shift": CALIBRATION_SHIFT, "algorithm spread": ALGORITHM_SPREAD}
    for g in cell_grids(summary, "log10_avg_perplexity", reps):
        for kind, condition, value, replicates in condition_values(g):
            key = (g["model"], int(g["budget"]), statistic[kind], condition)
            out[key] = (value, replicates if replicates is not None else np.array([value]))
    grids = cell_grids(summary, "avg_accuracy_points", reps)
    if grids:
        ratio, rep_ratio = pooled_ratio(grids)
        out[("all", 0, ACCURACY_RATIO, "")] = (ratio, rep_ratio if rep_ratio is not None else np.array([ratio]))
    return out


def two_stage_table(summaries: Mapping[int, pd.DataFrame], reps: Mapping[int, object], band: float, n_resamples: int):
    """``tables/seeds_two_stage.csv``: every statistic per seed and two-stage, each with its verdict."""
    tests = {
        GAP: difference_verdict,
        CALIBRATION_SHIFT: lambda lo, hi: _verdict(threshold_side(lo, hi, np.nan, ORDER, above=True)),
        ALGORITHM_SPREAD: lambda lo, hi: _verdict(threshold_side(lo, hi, np.nan, ORDER, above=False)),
        ACCURACY_RATIO: lambda lo, hi: _verdict(within_band(lo, hi, np.nan, band)),
    }
    per_seed = {s: per_seed_statistics(summaries[s], reps[s]) for s in sorted(summaries)}
    return seeds_two_stage_table(per_seed, n_resamples, tests)


def _verdict(verdict: str) -> dict[str, str]:
    return {"direction": "", "verdict": verdict}


# --------------------------------------------------------------------------- §5.3: signs over cells


def rho_cells(summaries: Mapping[int, pd.DataFrame], reps: Mapping[int, object]) -> pd.DataFrame:
    """One row per (seed, model, M, calibration) of the paper's calibrations: ρ on distinct sets and
    its document replicates (``replicates``: (B,) array or None)."""
    rows = []
    for seed in sorted(summaries):
        summary = summaries[seed]
        pruned = summary[summary["algorithm"] != "dense"]
        table = distinct_spearman_table(summary)
        for r in table[table["calibration"].isin(PAPER_CALIBRATIONS)].itertuples(index=False):
            group = pruned[
                (pruned["model"] == r.model) & (pruned["budget"] == r.budget) & (pruned["calibration"] == r.calibration)
            ]
            rows.append(
                {
                    "seed": seed,
                    "model": r.model,
                    "budget": int(r.budget),
                    "calibration": r.calibration,
                    "kind": r.calibration_kind,
                    "rho": r.rho,
                    "replicates": rho_replicates(group, reps.get(seed) if reps else None),
                }
            )
    return pd.DataFrame(rows, columns=["seed", "model", "budget", "calibration", "kind", "rho", "replicates"])


def cells_needed(n_cells: int, level: float = ALPHA) -> int:
    """How many of n cells must share a sign: the smallest count that n fair-coin signs reach on one
    given side with probability at most ``level`` (7 of 8), or all n when none does (4 of 4, 1/16)."""
    for k in range(1, n_cells + 1):
        if sign_count_noise_probability(n_cells, k) <= level:
            return k
    return n_cells


def sign_count_noise_probability(n_cells: int, needed: int | None = None) -> float:
    """P(at least ``needed`` of n fair-coin signs on one given side) (default: ``cells_needed``)."""
    if n_cells == 0:
        return float("nan")
    needed = cells_needed(n_cells) if needed is None else needed
    return sum(comb(n_cells, k) for k in range(needed, n_cells + 1)) / 2**n_cells


def sign_count_verdict(rho: np.ndarray, claimed_sign: int) -> tuple[str, int, int, int]:
    """(verdict, cells with the claimed sign, cells with the other, cells counted): holds when at
    least ``cells_needed`` cells have the claimed sign, does not hold when as many have the other,
    else inconclusive. Zero or undefined ρ counts on neither side."""
    rho = np.asarray(rho, dtype=float)
    n = rho.size
    if n == 0:
        return NOT_TESTABLE, 0, 0, 0
    with np.errstate(invalid="ignore"):
        claimed = int(np.sum(np.sign(rho) == claimed_sign))
        other = int(np.sum(np.sign(rho) == -claimed_sign))
    needed = cells_needed(n)
    verdict = HOLDS if claimed >= needed else FAILS if other >= needed else UNSURE
    return verdict, claimed, other, n


# --------------------------------------------------------------------------- §5.1: sets across seeds


def within_across_terms(sets: Mapping[tuple[str, str], object]) -> tuple[np.ndarray, np.ndarray, float, int] | None:
    """For the algorithms with a set under both paper calibrations: per pair of algorithms a < b the
    within sum when their labels are aligned (J(a0, b0) + J(a1, b1)) and when one is swapped
    (J(a0, b1) + J(a1, b0)), the across mean (a swap leaves it unchanged) and the number of
    algorithms; None below two. ``within − across`` for a flip vector f is then the mean over pairs
    of the aligned or swapped sum (by f_a == f_b), halved, less the across mean."""
    first, second = PAPER_CALIBRATIONS
    algorithms = sorted(a for a, c in sets if c == first and (a, second) in sets)
    if len(algorithms) < 2:
        return None
    layers = {a: (parse_layers(sets[(a, first)]), parse_layers(sets[(a, second)])) for a in algorithms}
    aligned, swapped = [], []
    for i, a in enumerate(algorithms):
        for b in algorithms[i + 1 :]:
            (a0, a1), (b0, b1) = layers[a], layers[b]
            aligned.append(jaccard(a0, b0) + jaccard(a1, b1))
            swapped.append(jaccard(a0, b1) + jaccard(a1, b0))
    across = float(np.mean([jaccard(*layers[a]) for a in algorithms]))
    return np.array(aligned), np.array(swapped), across, len(algorithms)


def within_across_under_flips(terms, flips: np.ndarray) -> np.ndarray:
    """within − across for each row of ``flips`` ((N, A) booleans: swap algorithm a's two labels)."""
    aligned, swapped, across, _ = terms
    i, j = np.triu_indices(flips.shape[1], k=1)  # the pairs' order in within_across_terms
    same = flips[:, i] == flips[:, j]
    within = np.where(same, aligned, swapped).mean(axis=1) / 2
    return within - across


def sets_across_seeds(selections: Mapping[int, pd.DataFrame], draws: int = SETS_NULL_DRAWS) -> pd.DataFrame:
    """Per (model, M): within − across averaged over the seeds, its label-swap p over independent
    flips in every seed, and the verdict (holds: mean > 0 and p < ALPHA; does not hold: mean ≤ 0)."""
    cells: dict[tuple, dict[int, tuple]] = {}
    for seed, frame in selections.items():
        paper = frame[frame["calibration"].isin(PAPER_CALIBRATIONS) & (frame["algorithm"] != "dense")]
        for (model, budget), group in paper.groupby(["model", "budget"], sort=True):
            sets = {(r.algorithm, r.calibration): r.removed for r in group.itertuples(index=False)}
            terms = within_across_terms(sets)
            if terms is not None:
                cells.setdefault((model, int(budget)), {})[seed] = terms
    rows = []
    for (model, budget), by_seed in sorted(cells.items()):
        seeds = sorted(by_seed)
        rng = np.random.default_rng([SETS_NULL_SEED, budget, len(seeds)])
        observed = [float(within_across_under_flips(by_seed[s], np.zeros((1, by_seed[s][3]), bool))[0]) for s in seeds]
        null = np.zeros(draws)
        for s in seeds:
            null += within_across_under_flips(by_seed[s], rng.random((draws, by_seed[s][3])) < 0.5)
        null /= len(seeds)
        mean = float(np.mean(observed))
        p_value = float((1 + np.sum(null >= mean - 1e-12)) / (1 + draws))
        verdict = FAILS if mean <= 0 else HOLDS if p_value < ALPHA else UNSURE
        rows.append(
            {
                "model": model,
                "budget": budget,
                "n_seeds": len(seeds),
                "per_seed": observed,
                "estimate": mean,
                "p_value": p_value,
                "verdict": verdict,
            }
        )
    return pd.DataFrame(rows, columns=["model", "budget", "n_seeds", "per_seed", "estimate", "p_value", "verdict"])


# --------------------------------------------------------------------------- the decision table


def decision_table(
    two_stage: pd.DataFrame,
    rho: pd.DataFrame,
    sets: pd.DataFrame,
    per_seed_verdicts: pd.DataFrame | None,
    strong_rho: float,
    n_resamples: int = 10_000,
    accuracy_null_pass: Mapping[int, float] | None = None,
) -> pd.DataFrame:
    """``tables/seeds_claims.csv``: per claim and statistic the cross-seed estimate, interval and
    verdict under §10's rule, the number of seeds whose own interval passes the same test, and each
    seed's verdict (``per_seed``, in seed order); one ``claim`` row per paper claim with its per-seed
    verdicts (``seeds.verdicts_by_seed``) beside the cross-seed one."""
    rows: list[dict] = []
    pooled = two_stage[two_stage["seed"] == TWO_STAGE]
    singles = two_stage[two_stage["seed"] != TWO_STAGE]

    def statistic_row(claim: str, r, label: str) -> dict:
        mine = singles[
            (singles["model"] == r.model)
            & (singles["budget"] == r.budget)
            & (singles["statistic"] == r.statistic)
            & (singles["condition"] == r.condition)
        ]
        verdicts = list(mine["verdict"])
        return {
            "claim": claim,
            "statistic": label,
            "n_seeds": int(r.n_seeds),
            "estimate": r.estimate,
            "ci_low": r.ci_low,
            "ci_high": r.ci_high,
            "seed_variance": r.seed_variance,
            "document_variance": r.document_variance,
            "seeds_holding": f"{verdicts.count(HOLDS)} of {len(verdicts)}",
            "per_seed": ", ".join(verdicts),
            "verdict": r.verdict,
            "rule": "two-stage interval",
        }

    for r in pooled[pooled["statistic"] == GAP].itertuples(index=False):
        row = statistic_row("gap", r, f"{r.model} M={r.budget}: {GAP}")
        row["rule"] = "two-stage interval excludes 0 (direction: " + (r.direction or "none") + ")"
        rows.append(row)
    claim_verdicts: dict[str, list[str]] = {"5.1": [], "5.2": [], "5.3": []}
    # §5.2 perplexity: each condition on its two-stage interval, each half in most conditions.
    halves = {}
    for statistic in (CALIBRATION_SHIFT, ALGORITHM_SPREAD):
        chosen = pooled[pooled["statistic"] == statistic]
        for r in chosen.itertuples(index=False):
            rows.append(statistic_row("5.2", r, f"{r.model} M={r.budget} {r.condition}: {statistic}"))
        if len(chosen):
            halves[statistic] = most(list(chosen["verdict"]))
            verdicts = list(chosen["verdict"])
            rows.append(
                {
                    "claim": "5.2",
                    "statistic": f"perplexity: conditions whose {statistic.split(' (')[0]} passes (claim: most)",
                    "n_seeds": int(chosen["n_seeds"].max()),
                    "estimate": verdicts.count(HOLDS),
                    "seeds_holding": "",
                    "per_seed": f"of {len(verdicts)} conditions; {verdicts.count(UNSURE)} inconclusive",
                    "verdict": halves[statistic],
                    "rule": "more than half of the conditions hold",
                }
            )
    if len(halves) == 2:
        both = list(halves.values())
        claim = HOLDS if all(v == HOLDS for v in both) else FAILS if FAILS in both else UNSURE
        claim_verdicts["5.2"].append(claim)
        rows.append(
            {
                "claim": "5.2",
                "statistic": "perplexity: calibration dominates (both halves hold)",
                "n_seeds": int(pooled["n_seeds"].max()),
                "verdict": claim,
                "rule": "both halves hold",
            }
        )
    for r in pooled[pooled["statistic"] == ACCURACY_RATIO].itertuples(index=False):
        row = statistic_row("5.2", r, f"accuracy: {ACCURACY_RATIO} (claim: comparable)")
        if accuracy_null_pass:
            # The single-seed test's last step: noise alone passing the band test more often than
            # UNINFORMATIVE_LEVEL makes a pass uninformative, per seed on its own null pass
            # probability and across seeds on their mean.
            mine = singles[singles["statistic"] == ACCURACY_RATIO].sort_values("seed", key=lambda s: s.astype(int))
            per_seed = [
                uninformative_if_noise_passes(v, accuracy_null_pass.get(int(seed), np.nan))
                for seed, v in zip(mine["seed"], mine["verdict"])
            ]
            known = [v for v in accuracy_null_pass.values() if np.isfinite(v)]
            mean_null = float(np.mean(known)) if known else float("nan")  # none: no noise study ran
            row |= {
                "seeds_holding": f"{per_seed.count(HOLDS)} of {len(per_seed)}",
                "per_seed": ", ".join(per_seed),
                "verdict": uninformative_if_noise_passes(r.verdict, mean_null),
                "rule": f"two-stage interval in the band; uninformative when noise passes > "
                f"{UNINFORMATIVE_LEVEL:.0%} (mean null pass over seeds {mean_null:.0%})",
            }
        rows.append(row)
        claim_verdicts["5.2"].append(row["verdict"])
    # §5.3: signs over the (M, seed) cells, and the median under perplexity pruning.
    for kind, sign, label in (
        ("tlm", 1, "TLM pruning: cells with ρ > 0"),
        ("ppl", -1, "perplexity pruning: cells with ρ < 0"),
    ):
        cells = rho[rho["kind"] == kind]
        if cells.empty:
            continue
        verdict, claimed, other, n = sign_count_verdict(cells["rho"].to_numpy(dtype=float), sign)
        claim_verdicts["5.3"].append(verdict)
        rows.append(
            {
                "claim": "5.3",
                "statistic": f"{label} (distinct sets)",
                "n_seeds": int(cells["seed"].nunique()),
                "estimate": claimed,
                "seeds_holding": "",
                "per_seed": ", ".join(f"{x:+.2f}" for x in cells["rho"]),
                "verdict": verdict,
                "rule": f"at least {cells_needed(n)} of {n} (M, seed) cells ({other} of the other sign; "
                f"noise passes {sign_count_noise_probability(n):.1%})",
            }
        )
        if kind == "ppl":
            by_seed = {}
            for seed, group in cells.groupby("seed"):
                reps = [r for r in group["replicates"] if r is not None]
                if len(reps) == len(group):
                    by_seed[int(seed)] = (group["rho"].to_numpy(dtype=float), np.stack(reps, axis=1))
            estimate, lo, hi = (
                two_stage_pooled(by_seed, np.median, n_resamples)
                if by_seed
                else (float(np.median(cells["rho"])), np.nan, np.nan)
            )
            weak = _weak_alignment(lo, hi, estimate, strong_rho)
            claim_verdicts["5.3"].append(weak)
            rows.append(
                {
                    "claim": "5.3",
                    "statistic": f"perplexity pruning: median ρ over cells (claim: −{strong_rho:g} < median < 0)",
                    "n_seeds": int(cells["seed"].nunique()),
                    "estimate": estimate,
                    "ci_low": lo,
                    "ci_high": hi,
                    "per_seed": ", ".join(
                        f"{float(np.median(g['rho'])):+.2f}" for _, g in cells.groupby("seed", sort=True)
                    ),
                    "verdict": weak,
                    "rule": "pooled two-stage interval inside (−strong, 0)",
                }
            )
    for r in sets.itertuples(index=False):
        claim_verdicts["5.1"].append(r.verdict)
        rows.append(
            {
                "claim": "5.1",
                "statistic": f"{r.model} M={r.budget}: mean Jaccard within − across, averaged over seeds",
                "n_seeds": int(r.n_seeds),
                "estimate": r.estimate,
                "per_seed": ", ".join(f"{x:+.2f}" for x in r.per_seed),
                "verdict": r.verdict,
                "rule": f"> 0 with label-swap p < {ALPHA:g} (p = {r.p_value:.4f}, flips in every seed)",
            }
        )
    for claim, verdicts in claim_verdicts.items():
        seed_rows = (
            per_seed_verdicts[(per_seed_verdicts["claim"] == claim) & (per_seed_verdicts["seed"] != "every seed")]
            if per_seed_verdicts is not None
            else pd.DataFrame(columns=["verdict"])
        )
        single = list(seed_rows["verdict"])
        rows.append(
            {
                "claim": claim,
                "statistic": "claim",
                "n_seeds": len(single) or None,
                "seeds_holding": f"{single.count(HOLDS)} of {len(single)}" if single else "",
                "per_seed": ", ".join(single),
                "verdict": combine(verdicts),
                "rule": "docs/method.md §10",
            }
        )
    return pd.DataFrame(rows, columns=CLAIMS_COLUMNS)


def _weak_alignment(lo: float, hi: float, value: float, strong_rho: float) -> str:
    """The weak-alignment test on an interval: holds inside (−strong, 0), does not hold when wholly
    outside it, else inconclusive; without an interval the value decides."""
    low, high = -strong_rho, 0.0
    if not (np.isfinite(lo) and np.isfinite(hi)):
        if not np.isfinite(value):
            return UNSURE
        return HOLDS if low < value < high else FAILS
    if low < lo and hi < high:
        return HOLDS
    if hi <= low or lo >= high:
        return FAILS
    return UNSURE


def decision_markdown(claims: pd.DataFrame, n_seeds: int, seeds_planned: int | None = None) -> str:
    """The "Across seeds: the decision rule" section of observations.md."""
    partial = (
        f" **Partial study: {n_seeds} of {seeds_planned} planned seeds are complete.**"
        if seeds_planned and n_seeds < seeds_planned
        else ""
    )
    lines = [
        "",
        "## Across seeds: the decision rule (docs/method.md §10)",
        "",
        f"{n_seeds} seeds.{partial} Per claim, the verdict across seeds and each seed's own verdict "
        "(tables/seeds_claims.csv; every statistic per seed and two-stage: tables/seeds_two_stage.csv).",
        "",
        "| claim | statistic | estimate | interval | seeds holding | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in claims.itertuples(index=False):
        if CALIBRATION_SHIFT in r.statistic or ALGORITHM_SPREAD in r.statistic:
            continue  # one row per condition: in the CSV
        estimate = "" if pd.isna(r.estimate) else f"{r.estimate:.3g}"
        ci = "" if pd.isna(r.ci_low) else f"[{r.ci_low:.3g}, {r.ci_high:.3g}]"
        lines.append(f"| {r.claim} | {r.statistic} | {estimate} | {ci} | {r.seeds_holding or ''} | {r.verdict} |")
    return "\n".join(lines) + "\n"


def accuracy_ratio_null_pass(rows: pd.DataFrame) -> float:
    """A seed's null pass probability of the pooled accuracy ratio's band test (its observations.csv
    row), NaN when it has none."""
    chosen = rows[
        (rows["claim"] == "5.2")
        & (rows["scope"] == "all (max over cells)")
        & rows["statistic"].str.startswith("accuracy shift ratio")
    ]
    return float(chosen["null_pass_probability"].iloc[0]) if len(chosen) else float("nan")

"""The cross-seed decision rule (docs/method.md §10), applied to a study run at several seeds.

Each seed alone is judged as a single-seed study is (``observations.py``; ``seeds.verdicts_by_seed``
counts them). Across seeds, per claim:

- §5.2 and the TLM − perplexity gap: each statistic per seed with its document replicates, then the
  crossed two-stage interval (``statistics/two_stage.py``: seeds, and the documents every seed shares;
  t-based seed stage) judged by the single-seed test: the gap excludes zero; a condition's calibration shift lies at or above one
  order, its algorithm spread below one (``paper_shifts.threshold_side``), each half holding in most
  conditions (``paper_shifts.most``); the pooled accuracy ratio lies in [1/band, band].
- §5.3: the sign of ρ on distinct sets in each of the (M, seed) cells; the claimed sign holds when
  at least ``cells_needed`` cells have it (7 of 8 with four seeds, 6 of 6 with three, 4 of 4 with
  two), does not hold when as many have the other sign, else inconclusive. A cell with ρ = 0 or undefined counts on neither side.
  Under perplexity pruning the weak-alignment claim is judged on the median ρ over all cells with
  its pooled two-stage interval (``two_stage_pooled``).
- §5.1: within − across Jaccard averaged over the seeds, against a label-swap null that flips each
  algorithm's two calibration labels independently in every seed (``SETS_NULL_DRAWS`` seeded draws).

Noise (docs/method.md §7, §10): a verdict that a study without any effect reaches more often than
UNINFORMATIVE_LEVEL is ``uninformative``, a ``does not hold`` as a pass. Each rate is that of the rule
applied: a seed's row, the single-seed rule on that seed's null studies; a two-stage row and the §5.2
perplexity claim, simulated null studies of the whole multi-seed study judged by the across-seeds
rule (``noise_null.across_seeds_verdict_rates``); §5.3's sign count, fair-coin signs; §5.1, its
label-swap null. One verdict per statistic: ``tables/seeds_claims.csv`` reads the seeds' and the
two-stage verdicts from ``tables/seeds_two_stage.csv``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import comb

import numpy as np
import pandas as pd

from depthprune.errors import InputError
from depthprune.io import parse_layers
from depthprune.memory import DEFAULT_RESAMPLES
from depthprune.reporting.analysis.agreement import jaccard
from depthprune.reporting.statistics.distinct import distinct_sets, distinct_spearman_table
from depthprune.reporting.statistics.noise_null import UNINFORMATIVE_LEVEL, across_seeds_verdict_rates
from depthprune.reporting.statistics.two_stage import (
    ACCURACY_RATIO,
    ALGORITHM_SPREAD,
    CALIBRATION_SHIFT,
    GAP,
    TWO_STAGE,
    difference_verdict,
    gap_replicates,
    seeds_two_stage_table,
    two_stage,
    two_stage_pooled,
)
from depthprune.reporting.style import PAPER_CALIBRATIONS
from depthprune.reporting.verdicts.alignment import DEFAULT_STRONG_RHO, either, rho_replicates
from depthprune.reporting.verdicts.paper_shifts import (
    ORDER,
    accuracy_decision,
    cell_grids,
    condition_values,
    in_spread_claim,
    most,
    pooled_ratio,
    regrid,
    threshold_side,
)
from depthprune.reporting.verdicts.rho_combination import ALPHA as MAGNITUDE_ALPHA
from depthprune.reporting.verdicts.rho_combination import (
    boundary_rates,
    defined_cells,
    either_noise_rates,
    magnitude_test,
    most_influential,
    null_means,
    representatives_of,
    weak_verdict,
)
from depthprune.reporting.verdicts.rules import (
    DESCRIPTIVE,
    FAILS,
    HOLDS,
    NOT_TESTABLE,
    UNINFORMATIVE,
    UNSURE,
    conjunction,
    uninformative_under_noise,
    within_band,
)
from depthprune.reporting.verdicts.variance import accuracy_rule_name, noise_cells, noise_pass_fail, noise_transform

SETS_COLUMNS = [
    "model",
    "budget",
    "n_seeds",
    "per_seed",
    "estimate",
    "p_value",
    "null_pass_probability",
    "null_fail_probability",
    "verdict",
]
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
    "null_pass_probability",
    "null_fail_probability",
    "verdict",
    "rule",
    "changed_by_informative",
]
PERPLEXITY_CLAIM = "perplexity: calibration dominates (both halves hold)"
EITHER_CLAIM = "perplexity pruning: negative or weak"  # §5.3's "or" (docs/method.md §7, §10)


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


def shared_documents(reps: Mapping[int, object]) -> None:
    """The crossed design's premise, checked: every seed's replicates resample the same documents
    with the same generator (same bootstrap seed and resamples, same documents per benchmark), so
    that replicate b is one document resample in every seed (docs/method.md §10)."""
    present = {s: r for s, r in reps.items() if r is not None}
    designs = {(r.seed, r.n_resamples, tuple(sorted((r.units or {}).items()))) for r in present.values()}
    if len(designs) > 1:
        raise InputError(
            "across seeds: the seeds' document bootstraps differ (bootstrap seed, resamples or documents per "
            "benchmark); the two-stage interval needs every seed evaluated on the same documents"
        )


def two_stage_tests(band: float) -> dict:
    """Per two-stage statistic, the single-seed test of its interval: (lo, hi) -> direction and verdict."""
    return {
        GAP: difference_verdict,
        CALIBRATION_SHIFT: lambda lo, hi: _verdict(threshold_side(lo, hi, np.nan, ORDER, above=True)),
        ALGORITHM_SPREAD: lambda lo, hi: _verdict(threshold_side(lo, hi, np.nan, ORDER, above=False)),
        ACCURACY_RATIO: lambda lo, hi: _verdict(within_band(lo, hi, np.nan, band)),
    }


def two_stage_table(
    summaries: Mapping[int, pd.DataFrame], reps: Mapping[int, object], band: float, noise: Mapping | None = None
):
    """``tables/seeds_two_stage.csv``: every statistic per seed and two-stage, each with its verdict;
    ``noise`` (``across_seeds_noise``) gives the accuracy ratio's noise rates, which can make its
    verdicts ``uninformative``."""
    shared_documents(reps)
    per_seed = {s: per_seed_statistics(summaries[s], reps[s]) for s in sorted(summaries)}
    table = seeds_two_stage_table(per_seed, two_stage_tests(band))
    for label, (null_pass, null_fail) in (noise or {}).get(ACCURACY_RATIO, {}).items():
        row = (table["statistic"] == ACCURACY_RATIO) & (table["seed"] == label)
        table.loc[row, "null_pass_probability"] = null_pass
        table.loc[row, "null_fail_probability"] = null_fail
        table.loc[row, "verdict"] = [
            uninformative_under_noise(v, null_pass, null_fail) for v in table.loc[row, "verdict"]
        ]
    return table


def perplexity_claim(calibration_halves: list[str], spread_halves: list[str]) -> tuple[str, str, str]:
    """(calibration half, algorithm half, claim) from the conditions' verdicts: each half holds in
    most conditions (``most``); the claim holds when both do, does not hold when either does not."""
    halves = most(calibration_halves), most(spread_halves)
    claim = HOLDS if all(v == HOLDS for v in halves) else FAILS if FAILS in halves else UNSURE
    return halves[0], halves[1], claim


def across_seeds_noise(
    summaries: Mapping[int, pd.DataFrame],
    reps: Mapping[int, object],
    samples: Mapping[int, pd.DataFrame | None],
    band: float,
    strong_rho: float = DEFAULT_STRONG_RHO,
    tasks: dict | None = None,
    with_perplexity: bool = True,
) -> dict:
    """The noise rates of the verdicts that carry one: ``{ACCURACY_RATIO: {seed label: (pass, fail)},
    PERPLEXITY_CLAIM: (pass, fail), EITHER_CLAIM: (strong_rho, pass, fail)}``. A seed's label ("0",
    ...) gets its own single-seed rule's rates (its null studies, as its observations row); TWO_STAGE,
    the perplexity claim and §5.3's "negative or weak" get those of the across-seeds rule
    (``noise_null.across_seeds_verdict_rates``). ``tasks`` (model -> tasks) restricts accuracy to
    those tasks (the informative-task twin); ``with_perplexity`` False leaves out the §5.2 perplexity
    claim, which reads no accuracy. Empty without per-document results."""
    seeds = sorted(summaries)
    if any(samples.get(s) is None or reps.get(s) is None for s in seeds):
        return {}
    out: dict = {}
    accuracy = accuracy_ratio_rates(summaries, reps, samples, band, tasks)
    if accuracy is not None:
        out[ACCURACY_RATIO] = accuracy
    gap = gap_noise_rates(summaries, samples, tasks)
    if gap is not None:
        out[GAP] = gap
    perplexity = perplexity_claim_rates(summaries, reps, samples, band) if with_perplexity else None
    if perplexity is not None:
        out[PERPLEXITY_CLAIM] = perplexity
    ppl_cells = rho_cells(summaries, reps)
    ppl_cells = ppl_cells[ppl_cells["kind"] == "ppl"]
    if len(seeds) > 1 and not defined_cells(ppl_cells).empty:
        # Stored with the threshold it was simulated for: a table with another strong_rho leaves it out.
        out[EITHER_CLAIM] = (strong_rho, *either_noise_rates(ppl_cells, summaries, samples, strong_rho, tasks))
    return out


def gap_noise_rates(summaries, samples, tasks: dict | None = None) -> dict | None:
    """Per (model, M): the shares of null studies of the whole study whose two-stage gap interval
    (TLM − perplexity, mean of the algorithms) excludes 0 below and above (``difference_verdict``'s
    directions "lower", "higher"); every cell's documents permuted among its runs in every seed, the
    seeds sharing their document resamples (``across_seeds_verdict_rates``). None with one seed or
    without every seed's per-document accuracies. (Issue 66: the gap rows carried no noise rate.)"""
    seeds = sorted(summaries)
    grids = {s: cell_grids(summaries[s], "avg_accuracy_points", None) for s in seeds}
    if len(seeds) < 2 or not all(grids.values()):
        return None
    cells = {s: noise_cells(samples[s], grids[s], "accuracy", tasks) for s in seeds}
    if not all(c is not None for c in cells.values()):
        return None
    transform = noise_transform("accuracy")
    tlm = next(k for k, c in enumerate(PAPER_CALIBRATIONS) if c.startswith("tlm"))
    ppl = 1 - tlm
    keys = [(g["model"], int(g["budget"])) for g in grids[seeds[0]]]

    def gap_directions(observed, replicates):
        per_seed = {}
        for s in observed:
            for g in regrid(grids[s], observed[s], replicates[s], transform):
                obs, rep = g["observed"], g["replicates"]
                gap = (obs[..., tlm] - obs[..., ppl]).mean(axis=1)[0], (rep[..., tlm] - rep[..., ppl]).mean(axis=1)
                per_seed.setdefault((g["model"], int(g["budget"])), {})[s] = gap
        directions = []
        for key in keys:
            result = two_stage({s: v[0] for s, v in per_seed[key].items()}, {s: v[1] for s, v in per_seed[key].items()})
            directions.append(difference_verdict(result.ci_low, result.ci_high)["direction"])
        return tuple(directions)

    found = across_seeds_verdict_rates(cells, gap_directions, "accuracy")
    return {
        key: tuple(sum(rate for verdict, rate in found.items() if verdict[i] == side) for side in ("lower", "higher"))
        for i, key in enumerate(keys)
    }


def accuracy_ratio_rates(summaries, reps, samples, band: float, tasks: dict | None = None) -> dict | None:
    """The pooled accuracy ratio's (pass, fail) rates per seed label: each seed's single-seed rule on
    its own null studies, and TWO_STAGE the across-seeds rule (a t interval over seeds in the band)
    on null studies of the whole study; None without every seed's cell grids."""
    seeds = sorted(summaries)
    tests = two_stage_tests(band)  # the two-stage rows' own tests (``two_stage_table``)
    accuracy = {s: cell_grids(summaries[s], "avg_accuracy_points", reps[s]) for s in seeds}
    if not all(accuracy.values()):
        return None
    rates = {
        str(s): noise_pass_fail(
            samples[s],
            accuracy[s],
            "accuracy",
            lambda g: accuracy_decision(g, band),
            tasks=tasks,
            rule=accuracy_rule_name(band),
        )
        for s in seeds
    }
    cells = {s: noise_cells(samples[s], accuracy[s], "accuracy", tasks) for s in seeds}
    if len(seeds) > 1 and all(c is not None for c in cells.values()):
        transform = noise_transform("accuracy")

        def accuracy_rule(observed, replicates):
            ratios = {s: pooled_ratio(regrid(accuracy[s], observed[s], replicates[s], transform)) for s in observed}
            result = two_stage({s: r[0] for s, r in ratios.items()}, {s: r[1] for s, r in ratios.items()})
            return tests[ACCURACY_RATIO](result.ci_low, result.ci_high)["verdict"]

        found = across_seeds_verdict_rates(cells, accuracy_rule, "accuracy")
        rates[TWO_STAGE] = (found.get(HOLDS, 0.0), found.get(FAILS, 0.0))
    return rates


def perplexity_claim_rates(summaries, reps, samples, band: float) -> tuple[float, float] | None:
    """(pass, fail) of the §5.2 perplexity claim across seeds on null studies of the whole study,
    judged by the across-seeds rule (each condition's two-stage interval, each half in most
    conditions); None with one seed or without every seed's per-document perplexities."""
    seeds = sorted(summaries)
    tests = two_stage_tests(band)
    perplexity = {s: cell_grids(summaries[s], "log10_avg_perplexity", reps[s]) for s in seeds}
    cells = {s: noise_cells(samples[s], perplexity[s], "perplexity") if perplexity[s] else None for s in seeds}
    if len(seeds) < 2 or any(c is None for c in cells.values()):
        return None
    transform = noise_transform("perplexity")

    def perplexity_rule(observed, replicates):
        values: dict[tuple, tuple[dict, dict]] = {}
        for s in observed:
            for g in regrid(perplexity[s], observed[s], replicates[s], transform):
                for kind, condition, value, rep in condition_values(g):
                    slot = values.setdefault((kind, g["model"], g["budget"], condition), ({}, {}))
                    slot[0][s], slot[1][s] = value, rep
        verdicts: dict[str, list[str]] = {"calibration shift": [], "algorithm spread": []}
        for (kind, _model, _budget, condition), (value, rep) in values.items():
            if kind == "algorithm spread" and not in_spread_claim(condition):
                continue  # the claim's algorithm half counts the perplexity-pruned conditions (§7)
            result = two_stage(value, rep)
            test = tests[CALIBRATION_SHIFT if kind == "calibration shift" else ALGORITHM_SPREAD]
            verdicts[kind].append(test(result.ci_low, result.ci_high)["verdict"])
        return perplexity_claim(verdicts["calibration shift"], verdicts["algorithm spread"])[2]

    found = across_seeds_verdict_rates(cells, perplexity_rule, "perplexity")
    return found.get(HOLDS, 0.0), found.get(FAILS, 0.0)


def informative_across_seeds(
    summaries: Mapping[int, pd.DataFrame],
    reps: Mapping[int, object],
    samples: Mapping[int, pd.DataFrame | None],
    found,
    band: float,
    strong_rho: float = DEFAULT_STRONG_RHO,
) -> dict:
    """The secondary analysis across seeds (docs/method.md §10): the two-stage table, ρ cells and
    noise rates of every accuracy statistic on each run's mean over the informative tasks
    (``found``: ``informative.InformativeTasks``, from the first seed's dense model), for
    ``decision_table(informative=...)``."""
    from depthprune.reporting.statistics.informative import informative_view

    views = {s: informative_view(summaries[s], reps[s], found) for s in sorted(summaries)}
    view_summaries = {s: v[0] for s, v in views.items()}
    view_reps = {s: v[1] for s, v in views.items()}
    noise = across_seeds_noise(
        view_summaries, view_reps, samples, band, strong_rho, tasks=found.tasks, with_perplexity=False
    )
    return {
        "two_stage": two_stage_table(view_summaries, view_reps, band, noise),
        "rho": rho_cells(view_summaries, view_reps),
        "noise": noise,
        "tasks": found.label(),
    }


def _verdict(verdict: str) -> dict[str, str]:
    return {"direction": "", "verdict": verdict}


# --------------------------------------------------------------------------- §5.3: signs over cells


RHO_CELL_COLUMNS = [
    "seed",
    "model",
    "budget",
    "calibration",
    "kind",
    "rho",
    "replicates",
    "perplexity",
    "accuracy",
    "representatives",
    "finders",
]


def rho_cells(summaries: Mapping[int, pd.DataFrame], reps: Mapping[int, object]) -> pd.DataFrame:
    """One row per (seed, model, M, calibration) of the paper's calibrations: ρ on distinct sets, its
    document replicates (``replicates``: (B,) array or None) and the distinct sets' design (their
    average perplexities and accuracies, and the algorithm representing each: ``rho_combination``)."""
    rows = []
    for seed in sorted(summaries):
        summary = summaries[seed]
        pruned = summary[summary["algorithm"] != "dense"]
        table = distinct_spearman_table(summary)
        for r in table[table["calibration"].isin(PAPER_CALIBRATIONS)].itertuples(index=False):
            group = pruned[
                (pruned["model"] == r.model) & (pruned["budget"] == r.budget) & (pruned["calibration"] == r.calibration)
            ]
            sets = distinct_sets(group)
            rows.append(
                {
                    "seed": seed,
                    "model": r.model,
                    "budget": int(r.budget),
                    "calibration": r.calibration,
                    "kind": r.calibration_kind,
                    "rho": r.rho,
                    "replicates": rho_replicates(group, reps.get(seed) if reps else None),
                    "perplexity": sets["avg_perplexity"].to_numpy(dtype=float),
                    "accuracy": sets["avg_accuracy"].to_numpy(dtype=float),
                    "representatives": representatives_of(sets["algorithms"]),
                    "finders": [tuple(a.split("+")) for a in sets["algorithms"]],
                }
            )
    return pd.DataFrame(rows, columns=RHO_CELL_COLUMNS)


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
        # The same rule on each null draw: its p against the others (ties as above), its sign.
        ordered = np.sort(null)
        null_p = (1 + draws - np.searchsorted(ordered, null - 1e-12, side="left")) / (1 + draws)
        null_pass = float(np.mean((null > 0) & (null_p < ALPHA)))
        null_fail = float(np.mean(null <= 0))
        verdict = uninformative_under_noise(verdict, null_pass, null_fail)
        rows.append(
            {
                "model": model,
                "budget": budget,
                "n_seeds": len(seeds),
                "per_seed": observed,
                "estimate": mean,
                "p_value": p_value,
                "null_pass_probability": null_pass,
                "null_fail_probability": null_fail,
                "verdict": verdict,
            }
        )
    return pd.DataFrame(rows, columns=SETS_COLUMNS)


# --------------------------------------------------------------------------- the decision table


@dataclass(frozen=True)
class ClaimsInputs:
    """What the decision table's row builders read: the two-stage table (``two_stage_table``), ρ per
    (seed, M) cell (``rho_cells``), §5.1 across seeds (``sets_across_seeds``), the per-seed claim
    verdicts (``seeds.verdicts_by_seed``), the weak-alignment threshold, the pooled interval's
    resamples and the noise rates (``across_seeds_noise``)."""

    two_stage: pd.DataFrame
    rho: pd.DataFrame
    sets: pd.DataFrame
    per_seed_verdicts: pd.DataFrame | None = None
    strong_rho: float = 0.5
    n_resamples: int = DEFAULT_RESAMPLES
    noise: Mapping = field(default_factory=dict)

    @property
    def pooled(self) -> pd.DataFrame:
        return self.two_stage[self.two_stage["seed"] == TWO_STAGE]

    @property
    def singles(self) -> pd.DataFrame:
        return self.two_stage[self.two_stage["seed"] != TWO_STAGE]


# A row whose verdict enters its claim's verdict carries ENTERS_CLAIM: True (a key that is not a
# column of seeds_claims.csv, so the table drops it).
ENTERS_CLAIM = "enters_claim"


def statistic_row(inputs: ClaimsInputs, claim: str, r, label: str) -> dict:
    """One two-stage statistic's row: its cross-seed estimate, interval, components and verdict, and
    each seed's verdict of the same statistic."""
    singles = inputs.singles
    mine = singles[
        (singles["model"] == r.model)
        & (singles["budget"] == r.budget)
        & (singles["statistic"] == r.statistic)
        & (singles["condition"] == r.condition)
    ]
    verdicts = list(mine.sort_values("seed", key=lambda seed: seed.astype(int))["verdict"])
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
        "null_pass_probability": getattr(r, "null_pass_probability", np.nan),
        "null_fail_probability": getattr(r, "null_fail_probability", np.nan),
        "verdict": r.verdict,
        "rule": "two-stage interval (t over seeds, documents shared)",
    }


def gap_rows(inputs: ClaimsInputs) -> list[dict]:
    """The TLM − perplexity gap per (model, M): its two-stage interval excludes zero."""
    pooled = inputs.pooled
    rows = []
    for r in pooled[pooled["statistic"] == GAP].itertuples(index=False):
        row = statistic_row(inputs, "gap", r, f"{r.model} M={r.budget}: {GAP}")
        row["rule"] = "two-stage interval excludes 0 (direction: " + (r.direction or "none") + ")"
        rates = inputs.noise.get(GAP, {}).get((r.model, int(r.budget)))
        if rates is not None:
            # noise: the share of null studies excluding 0 on the observed side (pass) and on the other (fail)
            lower, higher = rates
            null_pass, null_fail = (higher, lower) if r.direction == "higher" else (lower, higher)
            row["null_pass_probability"], row["null_fail_probability"] = null_pass, null_fail
            row["verdict"] = uninformative_under_noise(row["verdict"], null_pass, null_fail)
            row["rule"] += "; noise: null studies excluding 0 on this side / the other"
        rows.append(row)
    return rows


def perplexity_rows(inputs: ClaimsInputs) -> list[dict]:
    """§5.2 perplexity: each condition on its two-stage interval, each half in most conditions, and
    the claim (both halves) with the across-seeds rule's noise rates."""
    pooled = inputs.pooled
    rows, halves = [], {}
    for statistic in (CALIBRATION_SHIFT, ALGORITHM_SPREAD):
        listed = pooled[pooled["statistic"] == statistic]
        for r in listed.itertuples(index=False):
            rows.append(statistic_row(inputs, "5.2", r, f"{r.model} M={r.budget} {r.condition}: {statistic}"))
            if statistic == ALGORITHM_SPREAD and not in_spread_claim(r.condition):
                rows[-1]["rule"] += "; a TLM condition: not counted in the claim's algorithm half (§7)"
        chosen = spread_claim_conditions(listed) if statistic == ALGORITHM_SPREAD else listed
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
        conditions = {
            CALIBRATION_SHIFT: list(pooled.loc[pooled["statistic"] == CALIBRATION_SHIFT, "verdict"]),
            ALGORITHM_SPREAD: list(spread_claim_conditions(pooled[pooled["statistic"] == ALGORITHM_SPREAD])["verdict"]),
        }
        claim = perplexity_claim(conditions[CALIBRATION_SHIFT], conditions[ALGORITHM_SPREAD])[2]
        null_pass, null_fail = inputs.noise.get(PERPLEXITY_CLAIM, (np.nan, np.nan))
        rows.append(
            {
                "claim": "5.2",
                "statistic": PERPLEXITY_CLAIM,
                "n_seeds": int(pooled["n_seeds"].max()),
                "null_pass_probability": null_pass,
                "null_fail_probability": null_fail,
                "verdict": uninformative_under_noise(claim, null_pass, null_fail),
                "rule": "both halves hold; uninformative when null studies of the across-seeds rule reach the "
                f"verdict > {UNINFORMATIVE_LEVEL:.0%}",
                ENTERS_CLAIM: True,
            }
        )
    return rows


def spread_claim_conditions(spread: pd.DataFrame) -> pd.DataFrame:
    """The algorithm-spread rows the claim's algorithm half counts (``paper_shifts.in_spread_claim``)."""
    return spread[spread["condition"].map(in_spread_claim).astype(bool)]


def accuracy_ratio_rows(inputs: ClaimsInputs) -> list[dict]:
    """§5.2 accuracy: the pooled max-shift ratio's two-stage interval in the comparable band, the
    paper's own number beside the variance-component test that decides "comparable" (§10; its rows
    come from ``across_seeds_variance``): this row keeps its verdict but does not enter the claim."""
    pooled = inputs.pooled
    rows = []
    for r in pooled[pooled["statistic"] == ACCURACY_RATIO].itertuples(index=False):
        row = statistic_row(inputs, "5.2", r, f"accuracy: {ACCURACY_RATIO} (claim: comparable)")
        row["rule"] = (
            f"two-stage interval in the band; uninformative when null studies of the across-seeds rule "
            f"reach the verdict > {UNINFORMATIVE_LEVEL:.0%}; the paper's statistic, beside the SD-ratio "
            "test that decides the claim (§10)"
        )
        rows.append(row)
    return rows


def sign_count_row(cells: pd.DataFrame, sign: int, label: str) -> dict:
    """§5.3's sign count over the (M, seed) cells: a description (the first rule's test, with the
    count it needed and fair-coin signs' chance of reaching it); the mean ρ decides."""
    verdict, claimed, other, n = sign_count_verdict(cells["rho"].to_numpy(dtype=float), sign)
    noise_rate = sign_count_noise_probability(n)  # fair-coin signs reach either side's count equally often
    return {
        "claim": "5.3",
        "statistic": f"{label} (distinct sets)",
        "n_seeds": int(cells["seed"].nunique()),
        "estimate": claimed,
        "seeds_holding": "",
        "per_seed": ", ".join(f"{x:+.2f}" for x in cells["rho"]),
        "null_pass_probability": noise_rate,
        "null_fail_probability": noise_rate,
        "verdict": DESCRIPTIVE,
        "rule": f"description ({other} of the other sign; the first rule needed {cells_needed(n)} of {n} cells, "
        f"noise {noise_rate:.1%}, and would say {verdict}); the mean ρ decides",
    }


def magnitude_row(cells: pd.DataFrame, sign: int, label: str, null: np.ndarray | None = None) -> dict:
    """The mean ρ over the (M, seed) cells against the joint within-seed permutation null
    (``rho_combination``; ``null``: ``null_means`` of the defined cells, when the caller has it):
    the claimed sign's verdict, its p-values and noise rates."""
    cells = defined_cells(cells)
    mean = float(np.mean(cells["rho"]))
    test = magnitude_test(mean, null_means(cells) if null is None else null, sign)
    side = "> 0" if sign > 0 else "< 0"
    influential = most_influential(cells, sign)
    share = (
        ""
        if influential is None
        else f"; without {influential['algorithm']} (the search whose removal moves the mean most): mean "
        f"{influential['mean']:+.2f} over {influential['cells']} cells, p claimed {influential['p_claimed']:.4f}, "
        f"{influential['verdict']}"
    )
    return {
        "claim": "5.3",
        "statistic": label.format(side=side),
        "n_seeds": int(cells["seed"].nunique()),
        "estimate": mean,
        "seeds_holding": "",
        "per_seed": ", ".join(f"{x:+.2f}" for x in cells["rho"]),
        "null_pass_probability": test["null_pass_probability"],
        "null_fail_probability": test["null_fail_probability"],
        "verdict": uninformative_under_noise(
            test["verdict"], test["null_pass_probability"], test["null_fail_probability"]
        ),
        "rule": f"one-sided p ≤ {MAGNITUDE_ALPHA:g} on the claimed side holds, on the other does not hold (p claimed "
        f"{test['p_claimed']:.4f}, other {test['p_other']:.4f}; {len(cells)} cells, a seed's cells permuted jointly)"
        + share,
    }


def median_replicates(cells: pd.DataFrame) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """seed -> (its cells' ρ, (B, cells) document replicates), the seeds whose every cell has them."""
    by_seed = {}
    for seed, group in cells.groupby("seed"):
        reps = [r for r in group["replicates"] if r is not None]
        if len(reps) == len(group):
            by_seed[int(seed)] = (group["rho"].to_numpy(dtype=float), np.stack(reps, axis=1))
    return by_seed


def pooled_median(cells: pd.DataFrame, n_resamples: int) -> tuple[float, float, float]:
    """(median ρ over every (M, seed) cell, its pooled two-stage interval); no interval without every
    cell's replicates."""
    by_seed = median_replicates(cells)
    if not by_seed:
        return float(np.median(cells["rho"])), np.nan, np.nan
    return two_stage_pooled(by_seed, np.median, n_resamples)


def median_row(cells: pd.DataFrame, inputs: ClaimsInputs, weak_pass: float = np.nan) -> dict:
    """The weak part of "negative or weak": the pooled median's interval inside (−strong, strong);
    ``weak_pass``: how often it holds where alignment is strong (``rho_combination.boundary_rates``)."""
    estimate, lo, hi = pooled_median(cells, inputs.n_resamples)
    verdict = weak_verdict(lo, hi, estimate, inputs.strong_rho)
    return {
        "claim": "5.3",
        "statistic": f"perplexity pruning: median ρ over cells (part 'weak': −{inputs.strong_rho:g} < median < {inputs.strong_rho:g})",
        "n_seeds": int(cells["seed"].nunique()),
        "estimate": estimate,
        "ci_low": lo,
        "ci_high": hi,
        "per_seed": ", ".join(f"{float(np.median(g['rho'])):+.2f}" for _, g in cells.groupby("seed", sort=True)),
        "null_pass_probability": weak_pass,
        "verdict": uninformative_under_noise(verdict, weak_pass),
        "rule": "pooled two-stage interval inside (−strong, strong); a part of the 'or', not in the claim; "
        f"null pass: studies resampled from these seeds and documents with the median ρ moved to ±{inputs.strong_rho:g} "
        "(strong alignment, where 'weak' is false) that pass, the larger of the two",
    }


def either_row(negative: dict, weak: dict, inputs: ClaimsInputs, either_pass: float = np.nan) -> dict:
    """Perplexity pruning's claim, "negative or weak": ``either`` of its parts. Its null pass is the
    rate at which the whole "or" holds where it is false (``either_pass``: median ρ at +strong,
    ``rho_combination.boundary_rates``); its null fail the rate at which it does not hold with no
    association at all, where it is true (``across_seeds_noise``: shuffled documents)."""
    strong, zero_pass, null_fail = inputs.noise.get(EITHER_CLAIM, (inputs.strong_rho, np.nan, np.nan))
    if strong != inputs.strong_rho:
        zero_pass = null_fail = np.nan
    claim = either(negative["verdict"], weak["verdict"])  # an uninformative part supports nothing
    return {
        "claim": "5.3",
        "statistic": f"{EITHER_CLAIM} (claim: mean ρ < 0, or −{inputs.strong_rho:g} < median ρ < {inputs.strong_rho:g})",
        "n_seeds": negative["n_seeds"],
        "seeds_holding": "",
        "per_seed": f"negative: {negative['verdict']}; weak: {weak['verdict']}",
        "null_pass_probability": either_pass,
        "null_fail_probability": null_fail,
        "verdict": uninformative_under_noise(claim, either_pass, null_fail),
        "rule": "holds when either part holds, does not hold when both do not; uninformative when the "
        f"verdict's rate exceeds {UNINFORMATIVE_LEVEL:.0%}; null pass: studies with the median ρ moved to "
        f"+{inputs.strong_rho:g} (strong misalignment, where the claim is false) that pass; null fail: null studies "
        f"without association (where it is true) that do not hold; with no association it holds in "
        f"{zero_pass:.1%} of them ('weak' is true there)",
        ENTERS_CLAIM: True,
    }


def alignment_rows(inputs: ClaimsInputs) -> list[dict]:
    """§5.3 across seeds: TLM pruning's mean ρ > 0 (the claim); perplexity pruning's "negative or
    weak" and its two parts; the sign counts as description."""
    rows = []
    rho = inputs.rho
    tlm = rho[rho["kind"] == "tlm"]
    if not defined_cells(tlm).empty:
        rows.append(
            {**magnitude_row(tlm, 1, "TLM pruning: mean ρ over (M, seed) cells (claim: {side})"), ENTERS_CLAIM: True}
        )
        rows.append(sign_count_row(tlm, 1, "TLM pruning: cells with ρ > 0"))
    ppl = rho[rho["kind"] == "ppl"]
    defined = defined_cells(ppl)
    if not defined.empty:
        null = null_means(defined)  # the mean ρ's joint null: its test and the boundary studies' share it
        label = "perplexity pruning: mean ρ over (M, seed) cells (part 'negative': {side})"
        negative = magnitude_row(ppl, -1, label, null)
        by_seed = median_replicates(defined)
        weak_pass, either_pass = boundary_rates(by_seed, null, inputs.strong_rho) if by_seed else (np.nan, np.nan)
        weak = median_row(defined, inputs, weak_pass)
        rows += [
            either_row(negative, weak, inputs, either_pass),
            negative,
            weak,
            sign_count_row(ppl, -1, "perplexity pruning: cells with ρ < 0"),
        ]
    return rows


def sets_rows(inputs: ClaimsInputs) -> list[dict]:
    """§5.1: within − across Jaccard averaged over the seeds, against its label-swap null."""
    return [
        {
            "claim": "5.1",
            "statistic": f"{r.model} M={r.budget}: mean Jaccard within − across, averaged over seeds",
            "n_seeds": int(r.n_seeds),
            "estimate": r.estimate,
            "per_seed": ", ".join(f"{x:+.2f}" for x in r.per_seed),
            "null_pass_probability": r.null_pass_probability,
            "null_fail_probability": r.null_fail_probability,
            "verdict": r.verdict,
            "rule": f"> 0 with label-swap p < {ALPHA:g} (p = {r.p_value:.4f}, flips in every seed)",
            ENTERS_CLAIM: True,
        }
        for r in inputs.sets.itertuples(index=False)
    ]


def claim_rows(inputs: ClaimsInputs, rows: list[dict]) -> list[dict]:
    """One row per claim: the cross-seed verdict (``conjunction`` of the rows that enter it, its
    ``rule`` naming the parts that decide it) beside each seed's own verdict of the claim."""
    out = []
    for claim in ("5.1", "5.2", "5.3"):
        entering = [row for row in rows if row["claim"] == claim and row.get(ENTERS_CLAIM)]
        verdict = conjunction([row["verdict"] for row in entering])
        twin_verdict = conjunction([row.get(TWIN, row["verdict"]) for row in entering])
        per_seed = inputs.per_seed_verdicts
        seed_rows = (
            per_seed[(per_seed["claim"] == claim) & (per_seed["seed"] != "every seed")]
            if per_seed is not None
            else pd.DataFrame(columns=["verdict"])
        )
        single = list(seed_rows["verdict"])
        out.append(
            {
                "claim": claim,
                "statistic": "claim",
                "n_seeds": len(single) or None,
                "seeds_holding": f"{single.count(HOLDS)} of {len(single)}" if single else "",
                "per_seed": ", ".join(single),
                "verdict": verdict,
                "rule": conjunction_rule(entering, verdict),
                "changed_by_informative": ""
                if not any(TWIN in row for row in entering)
                else "yes"
                if twin_verdict != verdict
                else "no",
            }
        )
    return out


def conjunction_rule(entering: list[dict], verdict: str) -> str:
    """The claim row's ``rule``: the conjunction of its parts (docs/method.md §7, §10), and which
    parts decide a ``does not hold`` (each with the rate at which noise alone fails it) or leave the
    claim open."""
    if not entering:
        return "docs/method.md §10: no part tested"
    text = f"docs/method.md §10: all of its {len(entering)} parts (a conjunction)"
    if verdict == FAILS:
        failing = [row for row in entering if row["verdict"] == FAILS]
        return f"{text}; does not hold: " + "; ".join(f"{row['statistic']}{noise_note(row)}" for row in failing)
    if verdict in (UNSURE, UNINFORMATIVE):
        open_parts = sum(row["verdict"] != HOLDS for row in entering)
        return f"{text}; {open_parts} part(s) {verdict}, none does not hold"
    return text


def noise_note(row: dict) -> str:
    """`` (noise fails it x %)`` when the row carries its null fail rate."""
    rate = row.get("null_fail_probability")
    return f" (noise fails it {rate:.1%})" if rate is not None and np.isfinite(rate) else ""


# The row builders, in the table's order. Each is a function of ClaimsInputs alone; rows built
# elsewhere (``decision_table(extra_rows=...)``: e.g. §5.2 variance components, §5.1 draw
# stability) follow them, before the claim rows.
ROW_BUILDERS = (gap_rows, perplexity_rows, accuracy_ratio_rows, alignment_rows, sets_rows)
# The builders whose rows read accuracy: each gets an informative-task twin (docs/method.md §10).
ACCURACY_BUILDERS = (gap_rows, accuracy_ratio_rows, alignment_rows)


def decision_table(
    two_stage: pd.DataFrame,
    rho: pd.DataFrame,
    sets: pd.DataFrame,
    per_seed_verdicts: pd.DataFrame | None,
    strong_rho: float,
    n_resamples: int = DEFAULT_RESAMPLES,
    noise: Mapping | None = None,
    extra_rows: Sequence[dict] = (),
    informative: Mapping | None = None,
) -> pd.DataFrame:
    """``tables/seeds_claims.csv``: per claim and statistic the cross-seed estimate, interval and
    verdict under §10's rule, the number of seeds whose own interval passes the same test, and each
    seed's verdict (``per_seed``, in seed order); one ``claim`` row per paper claim with its per-seed
    verdicts (``seeds.verdicts_by_seed``) beside the cross-seed one. A statistic's verdicts are those
    of ``two_stage`` (``two_stage_table``, noise checks included); ``noise`` (``across_seeds_noise``)
    gives the perplexity claim's noise rates. ``extra_rows`` (seeds_claims.csv's columns) are appended
    after ROW_BUILDERS' rows; each that bears a verdict (not ``descriptive``) enters its claim's.
    ``informative`` (``informative_across_seeds``) adds after each accuracy row its informative-task
    twin, and marks in ``changed_by_informative`` the rows (claims included) whose verdict it changes."""
    inputs = ClaimsInputs(two_stage, rho, sets, per_seed_verdicts, strong_rho, n_resamples, noise or {})
    twins = None
    if informative is not None:
        twins = ClaimsInputs(
            informative["two_stage"], informative["rho"], sets, None, strong_rho, n_resamples, informative["noise"]
        )
    rows = []
    for build in ROW_BUILDERS:
        built = build(inputs)
        rows += with_twins(built, build(twins)) if twins is not None and build in ACCURACY_BUILDERS else built
    rows += [{**row, ENTERS_CLAIM: row["verdict"] != DESCRIPTIVE} for row in extra_rows]
    return pd.DataFrame(rows + claim_rows(inputs, rows), columns=CLAIMS_COLUMNS)


INFORMATIVE_SCOPE = ", informative tasks"
TWIN = "twin"  # a twin row's key: the verdict it gives in place of its primary row's (not a column)


def with_twins(primary: list[dict], twins: list[dict]) -> list[dict]:
    """Each primary row followed by its informative-task twin (same statistic, scoped
    INFORMATIVE_SCOPE; never entering a claim), the primary row's ``changed_by_informative`` saying
    whether the twin's verdict differs. A row the twin analysis cannot compute gets no twin."""
    by_statistic = {row["statistic"]: row for row in twins}
    out = []
    for row in primary:
        twin = by_statistic.get(row["statistic"])
        if twin is None:
            out.append(row)
            continue
        changed = "" if row["verdict"] == DESCRIPTIVE else "yes" if twin["verdict"] != row["verdict"] else "no"
        out.append({**row, "changed_by_informative": changed, TWIN: twin["verdict"]})
        twin = {k: v for k, v in twin.items() if k != ENTERS_CLAIM}
        out.append({**twin, "statistic": row["statistic"] + INFORMATIVE_SCOPE, "changed_by_informative": ""})
    return out


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
        "| claim | statistic | estimate | interval | seeds holding | verdict | changed on informative tasks |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in claims.itertuples(index=False):
        if CALIBRATION_SHIFT in r.statistic or ALGORITHM_SPREAD in r.statistic:
            continue  # one row per condition: in the CSV
        estimate = "" if pd.isna(r.estimate) else f"{r.estimate:.3g}"
        ci = "" if pd.isna(r.ci_low) else f"[{r.ci_low:.3g}, {r.ci_high:.3g}]"
        changed = "" if pd.isna(r.changed_by_informative) else r.changed_by_informative
        holding = "" if pd.isna(r.seeds_holding) else r.seeds_holding  # a row without per-seed tests has none
        lines.append(f"| {r.claim} | {r.statistic} | {estimate} | {ci} | {holding} | {r.verdict} | {changed} |")
    return "\n".join(lines) + "\n"

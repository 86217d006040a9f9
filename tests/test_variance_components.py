"""§5.2's variance components across seeds and §5.1's draw stability (docs/method.md §10, issue 57)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from depthprune.reporting.statistics.variance_components import (
    both_agree,
    comparability,
    crossed_ratio_intervals,
    equivalence_verdict,
    leave_one_out,
    split_plot,
)
from depthprune.reporting.style import PAPER_CALIBRATIONS
from depthprune.reporting.verdicts.across_seeds import CLAIMS_COLUMNS
from depthprune.reporting.verdicts.across_seeds_variance import (
    claim_verdicts,
    draw_agreement,
    draw_stability_rows,
    split_plots,
    variance_component_rows,
)

ALGORITHMS = ["one_shot", "greedy", "beam", "ga", "bo", "cbo", "fast_block_select"]


def synthetic(n_seeds, sd_cal, sd_alg, whole=0.3, sub=0.5, seed=0):
    """y (S, 7, 2) with calibration and algorithm level means of exactly the given SDs (ddof 1)."""
    rng = np.random.default_rng(seed)
    cal = np.array([-1.0, 1.0]) * sd_cal / np.sqrt(2)
    alg = rng.normal(size=len(ALGORITHMS))
    alg = (alg - alg.mean()) * sd_alg / (alg - alg.mean()).std(ddof=1)
    noise = rng.normal(0, whole, (n_seeds, 1, 2)) + rng.normal(0, sub, (n_seeds, len(ALGORITHMS), 2))
    return 50 + alg[None, :, None] + cal[None, None, :] + noise


def test_split_plot_recovers_both_components():
    fit = split_plot(synthetic(200, 3.0, 1.5))
    assert np.sqrt(fit.var_calibration) == pytest.approx(3.0, rel=0.1)
    assert np.sqrt(fit.var_algorithm) == pytest.approx(1.5, rel=0.1)
    assert fit.p_value("calibration") < 1e-3 and fit.p_value("algorithm") < 1e-3
    # the sums of squares partition the total
    y = synthetic(5, 1.0, 1.0)
    one = split_plot(y)
    ss = sum(one.ms[t] * one.df[t] for t in one.ms)
    assert ss == pytest.approx(((y - y.mean()) ** 2).sum())


def test_no_calibration_effect_is_not_significant():
    fit = split_plot(synthetic(8, 0.0, 2.0, seed=3))
    assert fit.p_value("calibration") > 0.05
    assert np.sqrt(fit.var_calibration) < 0.5


@pytest.mark.parametrize(("ratio", "expected"), [(1.0, "holds"), (3.0, "does not hold"), (0.0, "does not hold")])
def test_equivalence_verdict_of_known_ratios(ratio, expected):
    result = comparability(synthetic(12, 2.0 * ratio, 2.0, seed=1), band=2.0, draws=500, studies=0)
    assert result.ratio == pytest.approx(ratio, abs=0.3)
    assert result.verdict == expected


def test_equivalence_verdict_reads_both_intervals():
    assert equivalence_verdict((0.6, 1.9, 0.4, 2.2), 2.0) == "holds"  # 90 % inside, 95 % not: TOST passes
    assert equivalence_verdict((2.2, 5.0, 2.1, 6.0), 2.0) == "does not hold"
    assert equivalence_verdict((1.8, 5.0, 1.5, 6.0), 2.0) == "inconclusive"
    assert equivalence_verdict((3.0, np.inf, 2.5, np.inf), 2.0) == "does not hold"
    assert equivalence_verdict((np.nan,) * 4, 2.0) == "inconclusive"


def test_noise_rates_are_the_rules_own():
    result = comparability(synthetic(4, 2.0, 2.0, seed=2), band=2.0, draws=200, studies=40, noise_draws=100)
    # without a calibration effect the ratio sits near 0: the rule seldom calls it comparable
    assert 0.0 <= result.null_pass <= 0.2
    assert 0.0 <= result.null_fail <= 1.0


def seed_summaries(n_seeds, sd_cal, sd_alg):
    y = synthetic(n_seeds, sd_cal, sd_alg, seed=4)
    out = {}
    for s in range(n_seeds):
        rows = [
            {
                "model": "m",
                "budget": 7,
                "seed": s,
                "calibration": c,
                "algorithm": a,
                "avg_accuracy": y[s, i, k] / 100,
                "avg_perplexity": 10 ** (1 + y[s, i, k] / 50),
            }
            for i, a in enumerate(ALGORITHMS)
            for k, c in enumerate(PAPER_CALIBRATIONS)
        ]
        out[s] = pd.DataFrame(rows)
    return out, y


def test_rows_from_summaries_in_the_claims_format():
    summaries, y = seed_summaries(6, 6.0, 2.0)
    grids = split_plots(summaries, "avg_accuracy_points")
    assert np.allclose(grids[("m", 7)][0], y)
    rows = variance_component_rows(summaries, 2.0, studies=20)
    assert all(set(r) <= set(CLAIMS_COLUMNS) for r in rows)
    verdicts = [r["verdict"] for r in rows if "claim: comparable" in r["statistic"]]
    assert verdicts == ["does not hold"]
    # perplexity: the same decomposition, descriptive
    assert all(r["verdict"] == "descriptive" for r in rows if "perplexity" in r["statistic"])


def selections(sets_by_seed):
    """seed -> selections frame from {(algorithm, calibration): layers}."""
    return {
        seed: pd.DataFrame(
            [
                {
                    "model": "m",
                    "budget": 3,
                    "calibration": c,
                    "algorithm": a,
                    "removed": " ".join(map(str, sorted(layers))),
                    "n_layers": 20,
                    "protected": "",
                }
                for (a, c), layers in sets.items()
            ]
        )
        for seed, sets in sets_by_seed.items()
    }


def test_draw_stability_identical_sets_hold_random_sets_do_not():
    rng = np.random.default_rng(7)
    fixed = {(a, c): set(rng.choice(20, 3, replace=False)) for a in ALGORITHMS for c in PAPER_CALIBRATIONS}
    agreement = draw_agreement(selections(dict.fromkeys(range(4), fixed)))
    assert (agreement["draw_agreement"] == 1.0).all() and (agreement["verdict"] == "holds").all()
    random = {s: {k: set(rng.choice(20, 3, replace=False)) for k in fixed} for s in range(4)}
    agreement = draw_agreement(selections(random))
    assert (agreement["verdict"] == "inconclusive").all()
    assert agreement["random"].iloc[0] == pytest.approx(agreement["draw_agreement"].mean(), abs=0.08)
    rows = draw_stability_rows(agreement)
    assert all(set(r) <= set(CLAIMS_COLUMNS) for r in rows) and {r["claim"] for r in rows} == {"5.1"}


def test_claim_verdicts_take_only_the_tested_rows():
    summaries, _ = seed_summaries(6, 2.0, 2.0)
    rows = variance_component_rows(summaries, 2.0, studies=0)
    rng = np.random.default_rng(7)
    fixed = {(a, c): set(rng.choice(20, 3, replace=False)) for a in ALGORITHMS for c in PAPER_CALIBRATIONS}
    rows += draw_stability_rows(draw_agreement(selections(dict.fromkeys(range(3), fixed))))
    verdicts = claim_verdicts(rows)
    assert verdicts["5.1"] == ["holds", "holds"]
    assert len(verdicts["5.2"]) == 1  # the accuracy ratio of the one cell; perplexity is descriptive


def test_the_crossed_bootstrap_resamples_seeds_and_documents_as_sampled():
    """Replicate b of every seed reads the same document resample, and a draw takes S seeds with
    replacement: with neither seed nor document variation the interval is the point ratio; each
    source alone widens it (issue 66 item 7)."""
    y = synthetic(4, 3.0, 1.0, seed=5)
    ratio = float(split_plot(y).sd_ratio)
    rng = np.random.default_rng(0)
    same_seeds = np.broadcast_to(y[:1], (200, 4, *y.shape[1:]))  # four copies of seed 0, no document noise
    assert crossed_ratio_intervals(same_seeds, 300, rng) == pytest.approx(
        (float(split_plot(same_seeds[0]).sd_ratio),) * 4
    )
    seeds_only = np.broadcast_to(y, (200, *y.shape))
    lo90, hi90, lo95, hi95 = crossed_ratio_intervals(seeds_only, 2000, rng)
    assert lo95 <= lo90 < ratio < hi90 <= hi95
    documents = same_seeds + rng.normal(0, 0.5, (200, 1, *y.shape[1:]))  # shared by the seeds, as in the design
    lo90, hi90, _, _ = crossed_ratio_intervals(documents, 2000, rng)
    assert hi90 - lo90 > 0.1


def test_the_sd_ratio_needs_both_intervals_to_agree():
    assert both_agree("does not hold", "does not hold") == "does not hold"
    assert both_agree("does not hold", "inconclusive") == "inconclusive"
    assert both_agree("holds", "does not hold") == "inconclusive"
    assert both_agree("holds", None) == "holds"  # no replicates: the parametric interval alone


def test_leave_one_out_finds_the_search_that_carries_the_algorithm_variance():
    """One search far from the others carries the algorithm SD: without it the SD collapses and the
    ratio grows, and the row names it (issue 66 item 7: CBO's share)."""
    y = synthetic(4, 3.0, 0.0, sub=0.1, seed=6)
    y[:, 5, :] += 4.0  # cbo
    k, sd, ratio = leave_one_out(y)
    assert ALGORITHMS[k] == "cbo"
    assert sd < 0.2 * np.sqrt(split_plot(y).var_algorithm) and ratio > 5 * split_plot(y).sd_ratio


class Replicates:
    """Paired document replicates of one seed's summary (``reps.aligned``'s contract): replicate b of
    a run is its value plus the document draw b, shared by every run and seed."""

    def __init__(self, draws: np.ndarray):
        self.draws, self.n_resamples = draws, len(draws)

    def aligned(self, frame: pd.DataFrame, column: str) -> np.ndarray:
        return frame[column].to_numpy(dtype=float)[None, :] * (1 + self.draws[:, None])


def test_the_ratio_row_shows_both_intervals_and_the_largest_share():
    summaries, _ = seed_summaries(4, 6.0, 2.0)
    draws = np.random.default_rng(8).normal(0, 0.01, 500)
    rows = variance_component_rows(summaries, 2.0, studies=0, reps={s: Replicates(draws) for s in summaries})
    ratio = next(r for r in rows if "claim: comparable" in r["statistic"])
    assert "crossed bootstrap (seeds and documents resampled as sampled): 90 % [" in ratio["rule"]
    assert "parametric says" in ratio["rule"] and "without " in ratio["rule"]
    plain = next(r for r in variance_component_rows(summaries, 2.0, studies=0) if "claim: comparable" in r["statistic"])
    assert "crossed" not in plain["rule"]

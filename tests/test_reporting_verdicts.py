"""Verdicts that survive a second look (issue 34): the Monte-Carlo guard, the two-sided band, the
random-set Jaccard null, the minimal detectable difference, the distinct-set rule, failed
searches, the evaluation-size rule, stability to the bootstrap seed, and docs/method.md's text."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from depthprune.reporting.analysis.frames import failed_searches, with_intervals
from depthprune.reporting.statistics.bootstrap import MDD_FACTOR, document_replicates, interval_mc, mdd, resolved
from depthprune.reporting.statistics.nulls import (
    expected_random_jaccard,
    p_value_at_least,
    random_mean_jaccard,
    within_across_permutation,
)
from depthprune.reporting.statistics.power import (
    BUDGET_MINUTES,
    evaluation_size,
    evaluation_size_markdown,
    largest_fitting_limit,
    run_minutes,
)
from depthprune.reporting.verdicts.observations import evaluate_observations
from depthprune.reporting.verdicts.rules import FAILS, HOLDS, UNSURE, above, below, within_band
from test_reporting_statistics import samples_for

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- Monte-Carlo guard


def test_interval_end_mc_error_of_a_uniform_grid():
    # 10,001 evenly spaced values on [0, 1] are their own quantile function: the SE of the 2.5 %
    # end is the binomial sqrt(q (1 − q) / B) in quantile level = 0.0015612 in value.
    values = np.linspace(0, 1, 10_001)
    lo, hi, se_lo, se_hi = interval_mc(values)
    assert lo == pytest.approx(0.025) and hi == pytest.approx(0.975)
    expected = math.sqrt(0.025 * 0.975 / 10_001)
    assert se_lo == pytest.approx(expected, rel=1e-6) and se_hi == pytest.approx(expected, rel=1e-6)


def test_mc_guard_near_a_boundary():
    # Upper end 1.99 with MC error 0.01 is 1 SE from the boundary 2: not resolved -> inconclusive.
    assert below(1.0, 1.99, 1.5, 2.0, se=(0.01, 0.01)) == UNSURE
    assert below(1.0, 1.97, 1.5, 2.0, se=(0.01, 0.01)) == HOLDS  # 3 SE away
    assert below(1.0, 1.99, 1.5, 2.0) == HOLDS  # no MC error given: the old rule
    # The committed seed-0 case: an end within float error of the boundary never decides.
    assert below(1.0, 1.9999999871, 1.5, 2.0, se=(0.0, 0.0)) == UNSURE
    assert above(2.01, 3.0, 2.5, 2.0, se=(0.01, 0.01)) == UNSURE
    assert above(2.03, 3.0, 2.5, 2.0, se=(0.01, 0.01)) == HOLDS
    assert above(1.0, 1.99, 1.5, 2.0, se=(0.01, 0.01)) == UNSURE
    assert above(1.0, 1.97, 1.5, 2.0, se=(0.01, 0.01)) == FAILS
    assert not resolved(2.0, 0.0, 2.0) and resolved(2.1, 0.0, 2.0)


def test_two_sided_comparable_band():
    assert within_band(0.6, 0.9, 0.77, 2.0) == HOLDS
    assert within_band(np.nan, np.nan, 5.76 / 7.51, 2.0) == HOLDS  # the paper's own 0.77
    assert within_band(np.nan, np.nan, 0.4, 2.0) == FAILS  # below 1/2: the algorithm dominates
    assert within_band(0.4, 0.9, 0.7, 2.0) == UNSURE  # straddles 1/2
    assert within_band(1.5, 2.5, 2.0, 2.0) == UNSURE  # straddles 2
    assert within_band(2.5, 3.0, 2.7, 2.0) == FAILS
    assert within_band(0.2, 0.4, 0.3, 2.0) == FAILS
    assert within_band(0.51, 1.9, 1.0, 2.0, se=(0.02, 0.0)) == UNSURE  # lower end within MC error of 1/2


# --------------------------------------------------------------------------- nulls for agreement


def test_random_jaccard_exact_for_n4_m2_by_enumeration():
    subsets = [frozenset(s) for s in itertools.combinations(range(4), 2)]
    values = [len(a & b) / len(a | b) for a in subsets for b in subsets]
    assert np.mean(values) == pytest.approx(7 / 18)  # (1·1 + 4·1/3 + 1·0) / 6
    assert expected_random_jaccard(4, 2) == pytest.approx(7 / 18)
    assert expected_random_jaccard(5, 0) == 1.0 and expected_random_jaccard(3, 3) == 1.0
    assert expected_random_jaccard(30, 7) == pytest.approx(0.1398, abs=1e-4)
    with pytest.raises(ValueError, match="depth"):
        expected_random_jaccard(3, 4)


def test_simulated_null_matches_the_exact_expectation_and_gives_p_values():
    null = random_mean_jaccard(30, 7, 7)
    assert null.mean() == pytest.approx(expected_random_jaccard(30, 7), abs=2e-3)
    assert np.array_equal(null, random_mean_jaccard(30, 7, 7))  # seeded by the design
    assert p_value_at_least(1.0, null) == pytest.approx(1 / (1 + null.size))
    assert p_value_at_least(0.0, null) == 1.0


def test_within_across_label_swap_permutation():
    # Three algorithms, identical sets within each calibration, disjoint across: only the identity
    # and the global swap reach the observed within − across = 1, so p = 2 / 2^3.
    sets = {(a, "ppl_c4"): {0, 1} for a in "xyz"} | {(a, "tlm_cs170k"): {2, 3} for a in "xyz"}
    diff, p = within_across_permutation(sets, ["ppl_c4", "tlm_cs170k"])
    assert diff == pytest.approx(1.0) and p == pytest.approx(2 / 8)


# --------------------------------------------------------------------------- power


def test_mdd_of_a_known_paired_design():
    # Greedy answers all 200 documents of each task, one-shot the first 100: the per-document
    # difference is 1 on half of them, population SD 0.5. The six tasks are resampled independently,
    # so the SE of the difference of average accuracies is 0.5 / sqrt(200) / sqrt(6) = 0.014434.
    n = 200
    runs = {("m", "ppl_c4", 7, "greedy"): np.ones(n), ("m", "ppl_c4", 7, "one_shot"): np.arange(n) < 100}
    reps = document_replicates(samples_for(runs), n_resamples=10_000, seed=0)
    summary = pd.DataFrame(
        {
            "model": "m",
            "calibration": "ppl_c4",
            "budget": 7,
            "algorithm": ["greedy", "one_shot"],
            "avg_accuracy": [1.0, 0.5],
            "avg_perplexity": [2.0, 2.0],
        }
    )
    out = with_intervals(summary, reps).set_index("algorithm")
    se = 0.5 / math.sqrt(n) / math.sqrt(6)
    assert out.loc["greedy", "mdd"] == pytest.approx(MDD_FACTOR * se, rel=0.03)
    assert mdd(1.0) == pytest.approx(1.959964 + 0.841621, abs=1e-6)


def test_evaluation_size_rule_by_hand():
    # SE 2 points at limit 100: mdd 5.60; 3 points need 100 · (2.8016 · 2 / 3)² = 348.8 -> 349 documents.
    # The default's cold run at n takes 79.2 − 24.38 + 24.38 · n / 100 minutes: 349 -> 139.9 min.
    contrast = pd.DataFrame({"algorithm": ["a", "b", "mean of the algorithms"], "diff_se": [0.02, 0.02, 0.01]})
    assert run_minutes(100) == pytest.approx(79.2) and run_minutes(0) == pytest.approx(54.82)
    # The budget: 165 min on the slowest VM (1.98x) = 83.33 min here. 349 does not fit; the largest
    # limit that does is floor(100 · (83.33 − 54.82) / 24.38) = 116 (83.10 min; 164.5 on the slowest VM).
    assert pytest.approx(165 / 1.98) == BUDGET_MINUTES
    rule = evaluation_size(contrast, 100).iloc[0]
    assert rule.median_se_points == pytest.approx(2.0)
    assert rule.limit_needed == 349 and rule.minutes_needed == pytest.approx(139.9062)
    assert not rule.fits_session
    assert rule.limit_chosen == largest_fitting_limit() == 116
    assert rule.minutes_chosen == pytest.approx(83.1008) and rule.minutes_chosen <= BUDGET_MINUTES
    assert rule.minutes_chosen_slowest_cpu == pytest.approx(164.5396) and rule.minutes_chosen_slowest_cpu <= 165
    assert rule.mdd_points_chosen == pytest.approx(MDD_FACTOR * 2 * math.sqrt(100 / 116))
    assert "these results use limit 100, so the chosen one needs a rerun" in evaluation_size_markdown(
        evaluation_size(contrast, 100)
    )
    # With a 200-min budget the 349 documents (139.9 min) fit: the smallest limit that reaches the target.
    assert evaluation_size(contrast, 100, budget_minutes=200).iloc[0].limit_chosen == 349
    # Results whose limit already reaches it keep their limit, and the text says so without a rerun
    # (the rescore study: 1000 documents sized apart, docs/method.md §11).
    rule = evaluation_size(contrast.assign(diff_se=0.005), 100)
    assert rule.iloc[0].limit_needed == 22 and rule.iloc[0].limit_chosen == 100
    text = evaluation_size_markdown(rule)
    assert "these results' 100 reach it, and the rule keeps their limit" in text and "rerun" not in text
    # SE 0 (every pair answered alike): one document meets any target, and its mdd is 0, not a
    # division by zero (an evaluation-only smoke study of identical sets hit it).
    rule = evaluation_size(contrast.assign(diff_se=0.0), 100).iloc[0]
    assert rule.limit_needed == 1 and rule.limit_chosen == 100 and rule.mdd_points_chosen == 0
    # A 50-min budget: even the fixed part (54.8 min) does not fit, so the limit stays and the text says so.
    rule = evaluation_size(contrast, 100, budget_minutes=50)
    assert largest_fitting_limit(50) == 0 and rule.iloc[0].limit_chosen == 100 and not rule.iloc[0].fits_session
    assert "the study itself must shrink" in evaluation_size_markdown(rule)


def test_evaluation_size_rule_reads_the_default_cold_run_record():
    """The rule's timings are the committed record's: the cold run's wall minutes, its evaluation
    pass's limit-dependent minutes, and the slowest VM's seconds ratio over the searches both ran."""
    import re

    from depthprune.reporting.statistics import power

    record = (REPO / power.COLD_RUN_RECORD).read_text(encoding="utf-8")
    values = dict(re.findall(r"^(\w+)=([\d.]+)$", record, flags=re.M))
    assert float(values["wall_minutes"]) == power.COLD_RUN_MINUTES
    assert float(values["evaluation_limit_dependent_minutes"]) == power.EVALUATION_MINUTES
    assert power.MEASURED_LIMIT == 100
    searches = (REPO / "benchmarks/records/2026-12-04-default-cold-searches-amd-zen3-avx2-float32.csv").read_text()
    ratio = re.search(r"over those \d+ = ([\d.]+); identical removed sets and losses: yes", searches)
    assert ratio is not None and round(float(ratio[1]), 2) == power.SLOWEST_CPU_FACTOR


# --------------------------------------------------------------------------- distinct sets, failed searches


def _summary(removed_ppl: list[str]) -> pd.DataFrame:
    algorithms = ["one_shot", "greedy", "beam", "ga", "bo", "cbo", "fast_block_select"]
    rows = []
    for calibration, removed in (("ppl_c4", removed_ppl), ("tlm_cs170k", [f"{i} {i + 10}" for i in range(7)])):
        for j, (algorithm, layers) in enumerate(zip(algorithms, removed)):
            rows.append(
                {
                    "model": "m",
                    "calibration": calibration,
                    "calibration_kind": calibration[:3],
                    "budget": 2,
                    "algorithm": algorithm,
                    "removed": layers,
                    "n_layers": 30,
                    "loss": 1.0 + j if algorithm != "one_shot" else 3.5,
                    "avg_perplexity": 10.0 + j,
                    "avg_accuracy": 0.6 - 0.01 * j,  # rho = -1 under both calibrations
                }
            )
    return pd.DataFrame(rows)


def test_distinct_set_rule():
    """Identical sets count once: seven algorithms with four distinct sets give ρ over four points,
    and its exact permutation p over the 4! orders."""
    distinct = _summary([f"{i} {i + 1}" for i in range(7)])
    few = _summary(["0 1", "0 1", "0 1", "2 3", "4 5", "6 7", "6 7"])  # 4 distinct sets
    for summary, n_sets, p_value in ((distinct, 7, 2 / 5040), (few, 4, 2 / 24)):
        obs = evaluate_observations(summary, summary)
        cell = obs.rows[obs.rows["statistic"].str.startswith("ρ over distinct sets")].iloc[0]
        assert cell["value"] == -1.0 and cell["p_value"] == pytest.approx(p_value)
        assert f"{n_sets} distinct sets among 7 algorithms" in cell["note"]


def test_failed_searches_are_flagged():
    summary = _summary([f"{i} {i + 1}" for i in range(7)])
    failed = summary[failed_searches(summary)]
    # one-shot's loss is 3.5: the searches with loss 4..7 (indices 3..6) failed, under both calibrations
    assert sorted(set(failed["algorithm"])) == ["bo", "cbo", "fast_block_select", "ga"]
    obs = evaluate_observations(summary, summary)
    assert obs.rows["scope"].str.endswith("without failed searches").any()
    assert any("Failed searches" in remark for remark in obs.remarks["5.2"])


# --------------------------------------------------------------------------- the committed study


@pytest.mark.slow
@pytest.mark.skipif(not (REPO / "results/aggregate/samples.parquet").exists(), reason="no committed aggregate")
def test_committed_verdicts_do_not_depend_on_the_bootstrap_seed():
    """Marked ``slow``: the committed study's verdicts re-computed at a second bootstrap seed (about 21 s under AVX2)."""
    from depthprune.reporting.aggregate import load_aggregate
    from depthprune.reporting.render import load_samples, paper_only
    from depthprune.reporting.statistics.baselines import task_baselines
    from depthprune.reporting.statistics.informative import find_informative_tasks
    from depthprune.reporting.verdicts.seeds import for_seed, seeds_of

    aggregate = REPO / "results/aggregate"
    agg = load_aggregate(aggregate, tables=("selections", "summary"))
    seed = seeds_of(agg.summary)[0]
    selections, summary = paper_only(for_seed(agg.selections, seed)), paper_only(for_seed(agg.summary, seed))
    samples = for_seed(load_samples(aggregate), seed)
    verdicts = {}
    for bootstrap_seed in (0, 2, 4):
        reps = document_replicates(samples, 10_000, bootstrap_seed)
        # as render does: the informative-task sensitivity rows come with the verdicts
        informative = find_informative_tasks(for_seed(agg.summary, seed), reps, task_baselines(samples))
        obs = evaluate_observations(selections, summary, reps, samples=samples, informative=informative)
        verdicts[bootstrap_seed] = obs.rows["verdict"].tolist()
    assert verdicts[0] == verdicts[2] == verdicts[4]
    committed = pd.read_csv(REPO / "figures/tables/observations.csv")
    assert committed["verdict"].tolist() == verdicts[0]


# --------------------------------------------------------------------------- docs/method.md


def test_method_text_matches_the_code():
    from depthprune.reporting.render import paper_only
    from depthprune.reporting.style import CONTROL_ALGORITHMS

    text = (REPO / "docs/method.md").read_text(encoding="utf-8")
    assert "come out empty" not in text and "nine algorithms" not in text
    # LAMBADA's per-document log-likelihoods do give average-perplexity intervals.
    runs = {("m", "ppl_c4", 7, "one_shot"): np.ones(10)}
    lambada = samples_for(runs)
    lambada = lambada[lambada["benchmark"] != "lambada_openai"]
    extra = lambada[lambada["benchmark"] == "piqa"].assign(benchmark="lambada_openai", metric="perplexity", value=-2.0)
    reps = document_replicates(pd.concat([lambada, extra]), n_resamples=50, seed=0)
    assert np.isfinite(reps.avg_perplexity).all()
    # The statistics use the paper's seven algorithms: every control named in the text is dropped.
    frame = pd.DataFrame({"algorithm": ["one_shot", *CONTROL_ALGORITHMS]})
    assert paper_only(frame)["algorithm"].tolist() == ["one_shot"]
    for name in CONTROL_ALGORITHMS:
        assert f"`{name}`" in text.split("**Algorithms in the statistics.**")[1].split("**Failed searches.**")[0]

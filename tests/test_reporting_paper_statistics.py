"""Issue 46: the paper's own statistics, tests that can fail, distinct sets and the majority
baseline, each on a small table with a hand-computed answer."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from depthprune.reporting.statistics.baselines import average_baseline, majority_accuracy, task_baselines
from depthprune.reporting.statistics.bootstrap import document_replicates
from depthprune.reporting.statistics.distinct import distinct_sets, distinct_spearman_table, spearman_exact
from depthprune.reporting.verdicts.observations import evaluate_observations
from depthprune.reporting.verdicts.paper_shifts import FAILS, HOLDS, UNSURE, most
from depthprune.reporting.verdicts.rules import UNINFORMATIVE
from test_reporting_statistics import TASKS, samples_for


def test_majority_baseline_on_a_toy_label_set():
    # 7 "yes" (1) of 10: always answering yes scores 0.7; a tie goes to the smaller label.
    assert majority_accuracy([1, 1, 0, 1, 1, 0, 1, 0, 1, 1]) == (1, 0.7)
    assert majority_accuracy([0, 1]) == (0, 0.5)
    samples = samples_for({("m", "ppl_c4", 2, "greedy"): np.ones(10)})
    labels = pd.DataFrame(
        {
            "model": "m",
            "calibration": "ppl_c4",
            "budget": 2,
            "algorithm": "greedy",
            "removed": "",
            "benchmark": "boolq",
            "unit": np.arange(10),
            "metric": "target",
            "value": [1, 1, 0, 1, 1, 0, 1, 0, 1, 1],
            "headline": False,
        }
    )
    table = task_baselines(pd.concat([samples, labels], ignore_index=True)).set_index("benchmark")
    assert table.loc["boolq", "majority"] == pytest.approx(0.7) and table.loc["boolq", "baseline"] == pytest.approx(0.7)
    # answer positions of the other tasks are arbitrary: chance stays 1/k, no majority
    assert math.isnan(table.loc["arc_easy", "majority"]) and table.loc["arc_easy", "baseline"] == 0.25
    # mean over the six tasks: (0.25 + 0.5 + 0.25 + 0.25 + 0.5 + 0.7) / 6
    assert average_baseline(table.reset_index()) == pytest.approx(2.45 / 6)


def test_distinct_set_rho_and_its_exact_p_by_hand():
    # Five algorithms, four distinct sets: a and b removed the same layers (one model).
    summary = pd.DataFrame(
        {
            "model": "m",
            "budget": 2,
            "calibration": "ppl_c4",
            "algorithm": ["a", "b", "c", "d", "e"],
            "removed": ["1 2", "1 2", "3 4", "5 6", "7 8"],
            "avg_perplexity": [10.0, 10.0, 20.0, 30.0, 40.0],
            "avg_accuracy": [0.40, 0.40, 0.45, 0.42, 0.50],
        }
    )
    sets = distinct_sets(summary)
    assert list(sets["algorithms"]) == ["a+b", "c", "d", "e"]
    # ranks of accuracy 1, 3, 2, 4 against 1, 2, 3, 4: Σd² = 2, ρ = 1 − 6·2 / (4·15) = 0.8.
    # |ρ| ≥ 0.8 in 8 of the 24 orders (the identity, 3 adjacent swaps, and their 4 reversals): p = 1/3.
    rho, p_value, method = spearman_exact(sets["avg_perplexity"], sets["avg_accuracy"])
    assert rho == pytest.approx(0.8) and p_value == pytest.approx(1 / 3) and method == "exact (24 permutations)"
    table = distinct_spearman_table(summary)
    assert table.loc[0, "n_distinct_sets"] == 4 and table.loc[0, "n_algorithms"] == 5
    # the duplicated set counted twice gives another ρ (the old reading)
    assert stats.spearmanr(summary["avg_perplexity"], summary["avg_accuracy"]).statistic != pytest.approx(0.8)


def test_most_conditions_rule():
    assert most([HOLDS, HOLDS, FAILS]) == HOLDS
    assert most([HOLDS, FAILS]) == FAILS  # half is not most
    assert most([HOLDS, UNSURE, FAILS]) == UNSURE
    assert most([FAILS, FAILS, UNSURE]) == FAILS


ALGORITHMS = ("one_shot", "greedy", "beam", "ga")
SEVEN = ("one_shot", "greedy", "beam", "ga", "bo", "cbo", "fast_block_select")


def _study(rng, accuracy: dict, log_ppl: dict, n_docs: int = 60, algorithms=ALGORITHMS, budgets=(2,)):
    """Per-document results and the summary of 2 calibrations × the algorithms, per M."""
    runs, nll, rows = {}, {}, []
    for budget, calibration in itertools.product(budgets, ("ppl_c4", "tlm_cs170k")):
        for j, algorithm in enumerate(algorithms):
            key = ("m", calibration, budget, algorithm)
            correct = {task: rng.random(n_docs) < accuracy[(calibration, algorithm)] for task in TASKS}
            windows = rng.normal(log_ppl[(calibration, algorithm)] * 100, 1.0, size=8)
            runs[key], nll[key] = correct, windows
            ppl = math.exp(windows.sum() / (100 * len(windows)))
            rows.append(
                {
                    "model": "m",
                    "calibration": calibration,
                    "budget": budget,
                    "algorithm": algorithm,
                    "removed": f"{j} {j + 10 * (calibration == 'tlm_cs170k') + 1}",
                    "n_layers": 30,
                    "loss": 1.0,
                    "avg_accuracy": round(float(np.mean([c.mean() for c in correct.values()])), 9),
                    # the three corpora share the windows: their mean perplexity is this one
                    "avg_perplexity": ppl,
                }
            )
    return samples_for(runs, nll), pd.DataFrame(rows)


def test_a_study_with_no_effect_is_uninformative_for_section_5_2_accuracy():
    """The paper's design (seven algorithms, two cells pooled by the max) with every run answering
    each of 116 documents per task correctly with probability 1/2: the pooled ratio's interval lands
    in [1/2, 2] in about 60 % of such studies, so "comparable" says nothing."""
    rng = np.random.default_rng(46)
    flat_acc = {(c, a): 0.5 for c in ("ppl_c4", "tlm_cs170k") for a in SEVEN}
    flat_ppl = {(c, a): 3.0 for c in ("ppl_c4", "tlm_cs170k") for a in SEVEN}
    samples, summary = _study(rng, flat_acc, flat_ppl, n_docs=116, algorithms=SEVEN, budgets=(2, 3))
    reps = document_replicates(samples, n_resamples=300, seed=0)
    obs = evaluate_observations(summary, summary, reps, samples=samples)
    pooled = obs.rows[obs.rows["scope"] == "all (max over cells)"]
    row = pooled[pooled["statistic"].str.startswith("accuracy shift ratio")].iloc[0]
    assert row["null_pass_probability"] > 0.2
    assert row["verdict"] == UNINFORMATIVE
    # The perplexity claim (an effect) does not pass on a study without one; but "does not hold" is
    # what every such study reaches (no calibration shift at all), so it is uninformative too.
    claim = obs.rows[obs.rows["statistic"] == "perplexity: calibration dominates (both halves hold)"].iloc[0]
    assert claim["null_pass_probability"] < 0.05 and claim["null_fail_probability"] > 0.95
    assert claim["verdict"] == UNINFORMATIVE


def test_a_large_calibration_effect_on_perplexity_holds():
    rng = np.random.default_rng(7)
    acc = {(c, a): 0.5 for c in ("ppl_c4", "tlm_cs170k") for a in ALGORITHMS}
    # ln ppl 2.0 ± 0.05 under ppl_c4; 2 orders of magnitude (+2 ln 10) under TLM
    log_ppl = {("ppl_c4", a): 2.0 + 0.05 * j for j, a in enumerate(ALGORITHMS)}
    log_ppl |= {("tlm_cs170k", a): 2.0 + 2 * math.log(10) + 0.05 * j for j, a in enumerate(ALGORITHMS)}
    samples, summary = _study(rng, acc, log_ppl)
    reps = document_replicates(samples, n_resamples=300, seed=0)
    obs = evaluate_observations(summary, summary, reps, samples=samples)
    rows = obs.rows.set_index(["scope", "statistic"])
    claim = rows.loc[("all", "perplexity: calibration dominates (both halves hold)")]
    assert claim["verdict"] == HOLDS and claim["null_pass_probability"] < 0.05
    assert claim["null_fail_probability"] > 0.95  # reached by noise, but not the verdict reached
    shifts = obs.rows[obs.rows["statistic"].str.startswith("calibration shift of avg perplexity")]
    assert len(shifts) == len(ALGORITHMS) and set(shifts["verdict"]) == {HOLDS}
    assert shifts["value"].to_numpy() == pytest.approx(2.0, abs=0.01)
    assert (shifts["p_value"] < 0.01).all()  # each shift exceeds its noise null
    spreads = obs.rows[obs.rows["statistic"].str.startswith("algorithm spread of avg perplexity")]
    assert spreads["value"].to_numpy() == pytest.approx(0.15 / math.log(10), abs=0.01)


@pytest.mark.parametrize("tlm_sign", [1, -1])
def test_section_5_3_is_judged_across_cells_with_its_null_pass_probability(tlm_sign):
    # One TLM cell with ρ = ±1 over 4 distinct sets: P(ρ > 0 | no association) = 11/24 > 20 %, and
    # P(ρ ≤ 0) = 13/24 > 20 %: a pass (ρ = +1) and a failure (ρ = −1) are both uninformative.
    rows = []
    for calibration, sign in (("tlm_cs170k", tlm_sign), ("ppl_c4", -1)):
        for j, algorithm in enumerate(ALGORITHMS):
            rows.append(
                {
                    "model": "m",
                    "calibration": calibration,
                    "budget": 2,
                    "algorithm": algorithm,
                    "removed": f"{j} {j + 1}",
                    "n_layers": 30,
                    "loss": 1.0,
                    "avg_perplexity": 10.0 + j,
                    "avg_accuracy": 0.5 + sign * 0.01 * j,
                }
            )
    summary = pd.DataFrame(rows)
    obs = evaluate_observations(summary, summary)
    tlm = obs.rows[obs.rows["statistic"].str.startswith("cells with ρ > 0")].iloc[0]
    assert tlm["value"] == (1 if tlm_sign > 0 else 0)
    assert tlm["null_pass_probability"] == pytest.approx(11 / 24)
    assert tlm["null_fail_probability"] == pytest.approx(13 / 24)
    assert tlm["verdict"] == UNINFORMATIVE
    per_cell = obs.rows[obs.rows["statistic"].str.startswith("ρ over distinct sets")]
    assert set(per_cell["verdict"]) == {"descriptive"}
    assert per_cell["p_value"].to_numpy() == pytest.approx([2 / 24, 2 / 24])

"""The paired document bootstrap, the §5.2 range statistic, exact ties and the verdict rules, on
synthetic per-document results with hand-computed answers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from depthprune.reporting.aggregate import (
    ACCURACY_COLUMNS,
    PERPLEXITY_COLUMNS,
    SELECTION_COLUMNS,
    TIE_DECIMALS,
    build_summary,
)
from depthprune.reporting.analysis.contrast import MEAN_OVER_ALGORITHMS, calibration_contrast
from depthprune.reporting.analysis.correlation import loss_accuracy_table, spearman_table
from depthprune.reporting.analysis.frames import with_intervals
from depthprune.reporting.analysis.spread import range_statistic
from depthprune.reporting.statistics.baselines import chance_accuracy
from depthprune.reporting.statistics.bootstrap import document_replicates, interval, range_shifts, spearman_rows
from depthprune.reporting.tables.table_format import Column, ReportTable, to_csv_frame
from depthprune.reporting.verdicts.observations import evaluate_observations
from depthprune.reporting.verdicts.rules import FAILS, HOLDS, UNSURE, above, below

TASKS = [c.removeprefix("acc_") for c in ACCURACY_COLUMNS]
CORPORA = [c.removeprefix("ppl_") for c in PERPLEXITY_COLUMNS]


def samples_for(runs: dict[tuple, np.ndarray | dict], nll: dict[tuple, np.ndarray] | None = None) -> pd.DataFrame:
    """Per-document rows: each task gets the 0/1 vector ``runs[key]`` (or ``runs[key][task]``); every
    corpus the windows ``nll[key]`` (default four windows of NLL 200 over 100 tokens)."""
    parts = []

    def block(key, benchmark, metric, values):
        model, calibration, budget, algorithm = key
        n = len(values)
        return pd.DataFrame(
            {
                "model": model,
                "calibration": calibration,
                "budget": budget,
                "algorithm": algorithm,
                "removed": "",
                "benchmark": benchmark,
                "unit": np.arange(n),
                "metric": metric,
                "value": np.asarray(values, dtype=float),
                "headline": True,
            }
        )

    for key, correct in runs.items():
        for task in TASKS:
            parts.append(block(key, task, "acc", correct[task] if isinstance(correct, dict) else correct))
        windows = nll[key] if nll else np.full(4, 200.0)
        for corpus in CORPORA:
            parts.append(block(key, corpus, "nll_sum", windows))
            parts.append(block(key, corpus, "n_tokens", np.full(len(windows), 100.0)))
    return pd.concat(parts, ignore_index=True)


def test_bootstrap_interval_covers_the_truth_in_a_simulation():
    """Six tasks of 100 independent documents, each correct with p = 0.6: the 95 % interval of the
    average accuracy covers 0.6 in about 95 % of 120 simulated studies (binomial sd of the coverage
    2 points; the lower bound leaves about 4 sd)."""
    rng = np.random.default_rng(12)
    covered = 0
    studies = 120
    for study in range(studies):
        correct = {task: rng.random(100) < 0.6 for task in TASKS}
        reps = document_replicates(samples_for({("m", "ppl_c4", 2, "greedy"): correct}), n_resamples=1000, seed=study)
        lo, hi = interval(reps.avg_accuracy[:, 0])
        covered += lo <= 0.6 <= hi
    assert 0.87 <= covered / studies < 1.0  # never missing would mean intervals far too wide


def test_bootstrap_is_paired_seeded_and_reproduces_the_point_values():
    a = np.array([1, 0, 1, 1, 0, 1, 0, 1, 1, 0])
    b = a.copy()
    b[0] = 0  # b is a except one document
    nll = {
        k: np.array([100.0, 200.0, 300.0, 400.0]) for k in [("m", "ppl_c4", 2, "one_shot"), ("m", "ppl_c4", 2, "bo")]
    }
    samples = samples_for({("m", "ppl_c4", 2, "one_shot"): a, ("m", "ppl_c4", 2, "bo"): b}, nll)
    reps = document_replicates(samples, n_resamples=500, seed=3)
    again = document_replicates(samples, n_resamples=500, seed=3)
    np.testing.assert_array_equal(reps.avg_accuracy, again.avg_accuracy)
    assert not np.array_equal(reps.avg_accuracy, document_replicates(samples, n_resamples=500, seed=4).avg_accuracy)
    # Same resampled documents for both runs: their difference is -(count of document 0) / 10 per
    # replicate, never positive; independent resampling would give positive differences too.
    one_shot = reps.column({"model": "m", "calibration": "ppl_c4", "budget": 2, "algorithm": "one_shot"})
    bo = reps.column({"model": "m", "calibration": "ppl_c4", "budget": 2, "algorithm": "bo"})
    diff = reps.avg_accuracy[:, bo] - reps.avg_accuracy[:, one_shot]
    assert (diff <= 0).all() and (diff < 0).any()
    # Perplexity replicates are exp(ΣNLL/Σtokens) of resampled windows: within [exp(1), exp(4)].
    assert (reps.avg_perplexity >= math.exp(1) - 1e-9).all() and (reps.avg_perplexity <= math.exp(4) + 1e-9).all()
    # The summary's intervals: diff to one-shot, paired.
    summary = pd.DataFrame(
        {
            "model": "m",
            "calibration": "ppl_c4",
            "budget": 2,
            "algorithm": ["one_shot", "bo"],
            "avg_accuracy": [a.mean(), b.mean()],
            "avg_perplexity": [math.exp(2.5)] * 2,
        }
    )
    out = with_intervals(summary, reps).set_index("algorithm")
    assert out.loc["bo", "diff_one_shot"] == pytest.approx(-0.1)
    assert out.loc["bo", "diff_one_shot_ci_high"] <= 0 and out.loc["one_shot", "diff_one_shot"] == 0
    assert out.loc["bo", "avg_acc_ci_low"] < b.mean() < out.loc["bo", "avg_acc_ci_high"]


def test_range_statistic_by_hand():
    # grid (1 replicate, 3 algorithms, 2 calibrations), accuracy in points.
    grid = np.array([[[50.0, 44.0], [52.0, 51.0], [45.0, 47.0]]])
    cal, alg = range_shifts(grid)
    assert cal[0] == 6.0  # algorithm 0: |50 - 44|
    assert alg[0] == 7.0  # calibration 1: 51 - 44
    summary = pd.DataFrame(
        {
            "model": "m",
            "budget": 7,
            "calibration": ["ppl_c4"] * 3 + ["tlm_cs170k"] * 3 + ["ppl_cs170k"] * 3,
            "algorithm": ["one_shot", "greedy", "beam"] * 3,
            "avg_accuracy": [0.50, 0.52, 0.45, 0.44, 0.51, 0.47, 0.0, 1.0, 0.5],  # the cross-control would dominate
            "avg_perplexity": [10.0, 20.0, 10.0, 1e4, 1e3, 1e3, 1e9, 1.0, 1.0],
        }
    )
    r = range_statistic(summary).set_index(["model", "response"])
    assert r.loc[("m", "avg_accuracy_points"), "shift_calibration"] == pytest.approx(6.0)
    assert r.loc[("m", "avg_accuracy_points"), "shift_algorithm"] == pytest.approx(7.0)
    assert r.loc[("m", "log10_avg_perplexity"), "shift_calibration"] == pytest.approx(3.0)  # 10 -> 1e4
    assert r.loc[("m", "log10_avg_perplexity"), "shift_algorithm"] == pytest.approx(1.0)  # 1e3 -> 1e4
    assert r.loc[("all", "avg_accuracy_points"), "ratio"] == pytest.approx(6 / 7)


def test_equal_accuracies_tie_in_ranks_rho_and_bold():
    # The same six accuracies in another order: unrounded means 0.44999999999999996 and 0.45.
    metrics = []
    values = {"one_shot": 0.425, "greedy": None, "beam": None, "ga": 0.4683333333333333}
    per_task = {"greedy": [0.33, 0.6, 0.36, 0.21, 0.61, 0.59], "beam": [0.59, 0.61, 0.21, 0.36, 0.6, 0.33]}
    ppl = {"one_shot": 30.0, "greedy": 20.0, "beam": 10.0, "ga": 40.0}
    for algorithm in values:
        accs = per_task.get(algorithm, [values[algorithm]] * 6)
        for task, acc in zip(TASKS, accs):
            metrics.append(_metric(algorithm, task, "acc", acc))
        for corpus in CORPORA:
            metrics.append(_metric(algorithm, corpus, "perplexity", ppl[algorithm]))
    frame = pd.DataFrame(metrics)
    summary = build_summary(pd.DataFrame(columns=SELECTION_COLUMNS), frame)
    by = summary.set_index("algorithm")["avg_accuracy"]
    assert sum(per_task["greedy"]) / 6 != sum(per_task["beam"]) / 6  # the noise the rounding removes
    assert by["greedy"] == by["beam"] == round(0.45, TIE_DECIMALS)
    # ρ with the tie ranked as a tie: ppl ranks 3,2,1,4; acc ranks 1, 2.5, 2.5, 4.
    rho = spearman_table(summary).iloc[0]["rho"]
    expected = np.corrcoef([3, 2, 1, 4], [1, 2.5, 2.5, 4])[0, 1]
    assert rho == pytest.approx(expected)
    assert spearman_rows(np.array([[3, 2, 1, 4.0]]), np.array([[0.425, 0.45, 0.45, 0.47]]))[0] == pytest.approx(
        expected
    )
    # Bold: both tied cells of a tied best are bold.
    table = ReportTable(
        name="t",
        title="T",
        caption="",
        frame=summary.assign(block=1),
        columns=[Column("avg_accuracy", "Avg", best="max")],
        block=["block"],
    )
    tied = summary.assign(avg_accuracy=summary["avg_accuracy"].where(summary["algorithm"] != "ga", 0.40))
    table.frame = tied.assign(block=1)
    flags = to_csv_frame(table).set_index("algorithm")["best_avg_accuracy"]
    assert flags["greedy"] and flags["beam"] and not flags["one_shot"]


def _metric(algorithm, benchmark, metric, value):
    return {
        "model": "m",
        "calibration": "ppl_c4",
        "budget": 7,
        "algorithm": algorithm,
        "removed": "1 2",
        "benchmark": benchmark,
        "metric": metric,
        "value": value,
        "stderr": None,
        "n": 100,
        "headline": True,
        "source": "x",
    }


def test_verdict_rules_use_the_interval():
    assert above(0.1, 0.5, 0.3, 0.0) == HOLDS
    assert above(-0.5, -0.1, -0.3, 0.0) == FAILS
    assert above(-0.1, 0.5, 0.3, 0.0) == UNSURE
    assert above(np.nan, np.nan, 0.3, 0.0) == HOLDS  # no interval: the point value decides
    assert below(0.5, 1.9, 1.3, 2.0) == HOLDS
    assert below(2.1, 3.0, 2.5, 2.0) == FAILS
    assert below(1.5, 2.5, 1.9, 2.0) == UNSURE
    assert below(-0.2, 0.0, -0.1, 0.0, strict=True) == UNSURE


def test_observations_with_intervals_on_synthetic_documents():
    """Two calibrations × three algorithms with per-document results: every ratio and ρ gets an
    interval, and a ρ whose interval straddles zero is inconclusive."""
    rng = np.random.default_rng(0)
    runs, nll = {}, {}
    p = {
        ("ppl_c4", "one_shot"): 0.50,
        ("ppl_c4", "greedy"): 0.52,
        ("ppl_c4", "beam"): 0.51,
        ("tlm_cs170k", "one_shot"): 0.47,
        ("tlm_cs170k", "greedy"): 0.55,
        ("tlm_cs170k", "beam"): 0.49,
    }
    base = {"ppl_c4": 2.0, "tlm_cs170k": 5.0}
    for (calibration, algorithm), prob in p.items():
        key = ("m", calibration, 7, algorithm)
        runs[key] = rng.random(60) < prob
        nll[key] = rng.normal(base[calibration] * 100, 5, size=8)
    samples = samples_for(runs, nll)
    reps = document_replicates(samples, n_resamples=300, seed=0)
    rows = []
    for (_, calibration, budget, algorithm), correct in runs.items():
        key = ("m", calibration, budget, algorithm)
        rows.append(
            {
                "model": "m",
                "calibration": calibration,
                "budget": budget,
                "algorithm": algorithm,
                "avg_accuracy": round(correct.mean(), 9),
                "avg_perplexity": math.exp(nll[key].sum() / (100 * len(nll[key]))),
            }
        )
    summary = pd.DataFrame(rows)
    selections = summary.assign(removed=["1 2", "1 2", "1 3", "4 5", "4 6", "5 6"])
    obs = evaluate_observations(selections, summary, reps)
    ratio = obs.rows[obs.rows["statistic"].str.contains("perplexity shift ratio") & (obs.rows["scope"] != "m M=7")]
    assert ratio["ci_low"].notna().all() and (ratio["ci_low"] <= ratio["value"]).all()
    shifts = obs.rows[obs.rows["statistic"].str.startswith("calibration shift of avg perplexity")]
    assert len(shifts) == 3 and shifts["ci_low"].notna().all() and set(shifts["verdict"]) <= {HOLDS, FAILS, UNSURE}
    rho = obs.rows[obs.rows["statistic"].str.startswith("ρ")]
    assert rho["ci_low"].notna().all()
    assert set(rho["verdict"]) == {"descriptive"}  # §5.3 is judged across cells, not per cell
    # Within > across, but three algorithms allow only 2^3 label swaps: p >= 1/4 cannot reject.
    assert obs.verdicts["5.1"] == UNSURE


def test_lambada_perplexity_is_resampled_from_per_document_logliks():
    """LAMBADA comes from lm-eval: each document's "perplexity" value is its log-likelihood and the
    corpus perplexity is exp(-mean); its replicates must be finite and centred on that value."""
    samples = samples_for({("m", "ppl_c4", 2, "greedy"): np.ones(10)})
    lambada = samples["benchmark"] == "lambada_openai"
    loglik = -np.linspace(1.0, 4.0, 10)
    rows = samples[lambada & (samples["metric"] == "nll_sum")].copy()
    rows["metric"], rows["value"], rows["unit"] = "perplexity", loglik[: len(rows)], np.arange(len(rows))
    rows = pd.concat([rows] * 3, ignore_index=True).iloc[:10]
    rows["unit"], rows["value"] = np.arange(10), loglik
    samples = pd.concat([samples[~lambada], rows], ignore_index=True)
    reps = document_replicates(samples, n_resamples=2000, seed=0)
    assert np.isfinite(reps.avg_perplexity).all()
    # the other two corpora are exp(2) per window; LAMBADA's replicates lie in [exp(1), exp(4)]
    expected = (2 * math.exp(2.0) + math.exp(-loglik.mean())) / 3
    assert np.median(reps.avg_perplexity) == pytest.approx(expected, rel=0.05)
    lo, hi = interval(reps.avg_perplexity[:, 0])
    assert lo < expected < hi


def test_paper_claims_leave_out_the_controls():
    """Tables 5-6, Jaccard, rho, variance and the observations use the paper's seven algorithms only."""
    from depthprune.reporting.render import paper_only

    frame = pd.DataFrame({"algorithm": ["dense", "one_shot", "bo", "ga_random", "bo_random", "exhaustive"]})
    assert paper_only(frame)["algorithm"].tolist() == ["dense", "one_shot", "bo"]


def test_calibration_contrast_against_perplexity_pruning_and_chance():
    """Two algorithms under both calibrations, 200 documents per task. one_shot: TLM-pruned correct on
    30 % of every task, perplexity-pruned on 60 % (the same documents plus 60 more): clearly lower and
    below chance (37.5 %). greedy: both models correct on the same 45 %: level, and its margin over
    chance (+7.5 points) is about three standard errors, so above chance."""
    assert chance_accuracy() == pytest.approx(0.375)
    n = 200
    docs = np.arange(n)
    runs = {
        ("m", "ppl_c4", 7, "one_shot"): (docs % 10) < 6,
        ("m", "tlm_cs170k", 7, "one_shot"): (docs % 10) < 3,
        ("m", "ppl_c4", 7, "greedy"): (docs % 20) < 9,
        ("m", "tlm_cs170k", 7, "greedy"): (docs % 20) < 9,
    }
    reps = document_replicates(samples_for(runs), n_resamples=1000, seed=0)
    summary = pd.DataFrame(
        [
            {"model": m, "calibration": c, "budget": b, "algorithm": a, "avg_accuracy": v.mean()}
            for (m, c, b, a), v in runs.items()
        ]
    )
    out = calibration_contrast(summary, reps).set_index("algorithm")
    assert list(out.index) == ["one_shot", "greedy", MEAN_OVER_ALGORITHMS]
    one = out.loc["one_shot"]
    assert one["acc_tlm_pruned"] == pytest.approx(0.3) and one["acc_perplexity_pruned"] == pytest.approx(0.6)
    assert one["diff_tlm_minus_ppl"] == pytest.approx(-0.3) and one["diff_ci_high"] < 0
    assert one["tlm_vs_ppl"] == "lower" and one["tlm_vs_chance"] == "below"
    greedy = out.loc["greedy"]
    # Paired: the same documents resampled for both models, so the difference is exactly 0 every time.
    assert greedy["diff_ci_low"] == greedy["diff_ci_high"] == 0 and greedy["tlm_vs_ppl"] == "level"
    assert greedy["tlm_minus_chance"] == pytest.approx(0.075) and greedy["tlm_vs_chance"] == "above"
    mean = out.loc[MEAN_OVER_ALGORITHMS]
    assert mean["diff_tlm_minus_ppl"] == pytest.approx(-0.15) and mean["tlm_vs_ppl"] == "lower"
    assert mean["diff_ci_low"] < -0.15 < mean["diff_ci_high"]
    # Without per-document results: point values, no intervals, no sides.
    bare = calibration_contrast(summary).set_index("algorithm")
    assert bare.loc["one_shot", "diff_tlm_minus_ppl"] == pytest.approx(-0.3)
    assert np.isnan(bare.loc["one_shot", "diff_ci_low"]) and bare.loc["one_shot", "tlm_vs_ppl"] == ""


def test_loss_accuracy_rho_by_hand_with_document_intervals():
    """Four algorithms whose accuracy falls as their calibration loss falls (ρ = +1: the lowest losses
    made the worst models) while the held-out loss ranks them the other way (ρ = −1); accuracies 20-80 %
    of 400 documents per task lie far apart, so every resample keeps the ranks and the interval is the point."""
    n = 400
    docs = np.arange(n)
    accuracy = {"one_shot": 0.8, "greedy": 0.6, "beam": 0.4, "ga": 0.2}
    loss = {"one_shot": 3.0, "greedy": 2.0, "beam": 1.0, "ga": -5.0}
    heldout = {"one_shot": 1.0, "greedy": 2.0, "beam": 3.0, "ga": 4.0}
    runs = {("m", "tlm_cs170k", 7, a): (docs % 10) < round(10 * v) for a, v in accuracy.items()}
    reps = document_replicates(samples_for(runs), n_resamples=500, seed=0)
    summary = pd.DataFrame(
        [
            {
                "model": "m",
                "calibration": "tlm_cs170k",
                "budget": 7,
                "algorithm": a,
                "removed": str(i),
                "loss": loss[a],
                "heldout_loss": heldout[a],
                "avg_accuracy": v,
            }
            for i, (a, v) in enumerate(accuracy.items())
        ]
    )
    out = loss_accuracy_table(summary, reps).set_index("loss_kind")
    assert list(out.index) == ["calibration", "heldout"]
    cal, held = out.loc["calibration"], out.loc["heldout"]
    assert cal["rho"] == pytest.approx(1.0) and held["rho"] == pytest.approx(-1.0)
    assert cal["n"] == 4 and cal["n_distinct_sets"] == 4
    assert cal["rho_ci_low"] == pytest.approx(1.0) and held["rho_ci_high"] == pytest.approx(-1.0)
    # scipy's p-value is the t-test's: t = ρ sqrt((n − 2) / (1 − ρ²)) is infinite at |ρ| = 1
    assert cal["p_value"] == 0.0 and held["p_value"] == 0.0
    # Without a held-out column there is no held-out row, and without replicates no interval.
    bare = loss_accuracy_table(summary.drop(columns="heldout_loss"))
    assert list(bare["loss_kind"]) == ["calibration"] and np.isnan(bare.iloc[0]["rho_ci_low"])

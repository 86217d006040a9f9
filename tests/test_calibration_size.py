"""Calibration-size study: variant labels, the statistics across seeds, and the rendered files."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from depthprune.calibration.variants import CalibrationVariant, parse_label, parse_size, study_variants
from depthprune.reporting.calibration_size import render_calibration_size
from depthprune.reporting.statistics.calibration_size import (
    add_bootstrap_intervals,
    calibration_size_table,
    mean_pairwise_jaccard,
)


@pytest.mark.parametrize(
    "variant, label",
    [
        (CalibrationVariant("tlm_cs170k"), "tlm_cs170k"),
        (CalibrationVariant("tlm_cs170k", 16), "tlm_cs170k-n16"),
        (CalibrationVariant("tlm_cs170k", 16, None, 2), "tlm_cs170k-n16-s2"),
        (CalibrationVariant("ppl_c4", 64, 128, 0), "ppl_c4-64x128-s0"),
        (CalibrationVariant("ppl_cs170k", None, None, 1), "ppl_cs170k-s1"),
    ],
)
def test_labels_round_trip(variant, label):
    assert variant.label == label and parse_label(label) == variant


def test_study_variants_cross_sizes_and_seeds():
    labels = [
        v.label for v in study_variants(["ppl_c4", "tlm_cs170k"], {"tlm": [8, 16], "perplexity": ["8x64"]}, [0, 1])
    ]
    assert labels == [
        "ppl_c4-8x64-s0",
        "ppl_c4-8x64-s1",
        "tlm_cs170k-n8-s0",
        "tlm_cs170k-n8-s1",
        "tlm_cs170k-n16-s0",
        "tlm_cs170k-n16-s1",
    ]
    assert [v.label for v in study_variants(["ppl_c4"], None, None)] == ["ppl_c4"]  # the default study
    with pytest.raises(ValueError, match=r"calibration_sizes\.perplexity"):
        study_variants(["ppl_c4"], {"perplexity": ["64by128"]}, None)
    assert parse_size("64x128") == (64, 128) and parse_size(8) == (8, None)


def test_mean_pairwise_jaccard():
    assert mean_pairwise_jaccard([{1, 2}, {1, 2}, {1, 2}]) == 1.0
    # {1,2} vs {2,3}: 1/3; {1,2} vs {4,5}: 0; {2,3} vs {4,5}: 0
    assert mean_pairwise_jaccard([{1, 2}, {2, 3}, {4, 5}]) == pytest.approx(1 / 9)
    assert math.isnan(mean_pairwise_jaccard([{1, 2}]))


def synthetic_summary() -> pd.DataFrame:
    rows = [
        {
            "model": "m",
            "calibration": "none",
            "budget": 0,
            "algorithm": "dense",
            "removed": "",
            "loss": float("nan"),
            "avg_accuracy": 0.45,
            "avg_perplexity": 40.0,
            "calibration_accuracy": float("nan"),
            "seed": 0,
        }
    ]
    removed = {  # (size, seed) -> removed set: unstable at 8 items, stable at 32
        ("n8", 0): "1 2",
        ("n8", 1): "3 4",
        ("n8", 2): "1 4",
        ("n32", 0): "2 5",
        ("n32", 1): "2 5",
        ("n32", 2): "2 5",
    }
    for (size, seed), sets in removed.items():
        for algorithm in ("one_shot", "greedy"):
            rows.append(
                {
                    "model": "m",
                    "calibration": f"tlm_cs170k-{size}-s{seed}",
                    "budget": 2,
                    "algorithm": algorithm,
                    "removed": sets,
                    "loss": -1.0 - seed,
                    "avg_accuracy": 0.30 + 0.01 * seed if size == "n8" else 0.42,
                    "avg_perplexity": 10.0 ** (3 + seed) if size == "n8" else 50.0,
                    "calibration_accuracy": 0.5,
                    "seed": seed,
                }
            )
    rows.append(
        {
            "model": "m",
            "calibration": "ppl_c4-64x32-s0",
            "budget": 2,
            "algorithm": "one_shot",
            "removed": "2 5",
            "loss": 3.0,
            "avg_accuracy": 0.44,
            "avg_perplexity": 60.0,
            "calibration_accuracy": float("nan"),
            "seed": 0,
        }
    )
    return pd.DataFrame(rows)


def test_statistics_across_seeds():
    table = calibration_size_table(synthetic_summary()).set_index(["calibration", "size", "algorithm"])
    small, large = table.loc[("tlm_cs170k", "8", "one_shot")], table.loc[("tlm_cs170k", "32", "one_shot")]
    # {1,2},{3,4}: 0; {1,2},{1,4}: 1/3; {3,4},{1,4}: 1/3
    assert small["jaccard_mean"] == pytest.approx(2 / 9) and small["distinct_sets"] == 3
    assert large["jaccard_mean"] == 1.0 and large["distinct_sets"] == 1 and large["n_seeds"] == 3
    assert large["stable"] and not small["stable"]  # stable: mean pairwise Jaccard >= 0.5
    assert small["loss_mean"] == pytest.approx(-2.0) and small["loss_std"] == pytest.approx(1.0)
    assert small["avg_accuracy_mean"] == pytest.approx(0.31)
    assert (small["avg_accuracy_min"], small["avg_accuracy_max"]) == pytest.approx((0.30, 0.32))
    assert small["avg_perplexity_geomean"] == pytest.approx(1e4)  # geometric mean of 1e3, 1e4, 1e5
    single = table.loc[("ppl_c4", "64x32", "one_shot")]
    assert single["n_seeds"] == 1 and math.isnan(single["jaccard_mean"]) and not single["stable"]
    # sizes in increasing order within a calibration and algorithm
    order = calibration_size_table(synthetic_summary())
    assert list(order[(order.calibration == "tlm_cs170k") & (order.algorithm == "greedy")]["size"]) == ["8", "32"]


def test_nulls_draw_from_the_unprotected_blocks_and_held_out_loss_is_summarised():
    """Under `protect: boundary` random sets come from n_layers − 2 candidates; the held-out loss is
    averaged over the draws like the calibration loss."""
    from depthprune.reporting.statistics.nulls import expected_random_jaccard

    summary = synthetic_summary()
    pruned = summary["algorithm"] != "dense"
    summary.loc[pruned, "n_layers"] = 6
    summary.loc[pruned, "heldout_loss"] = [0.5, 0.5, 1.0, 1.0, 3.0, 3.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 4.0]
    table = calibration_size_table(summary).set_index(["calibration", "size", "algorithm"])
    assert table.loc[("tlm_cs170k", "8", "one_shot"), "n_candidates"] == 6
    # The same sets with blocks 0 and 5 protected: 2-of-4 random sets agree more (E[J] = 7/18).
    protected = summary.assign(protected=summary["algorithm"].map(lambda a: "" if a == "dense" else "0 5"))
    guarded = calibration_size_table(protected).set_index(["calibration", "size", "algorithm"])
    small = guarded.loc[("tlm_cs170k", "8", "one_shot")]
    assert small["n_candidates"] == 4
    assert small["jaccard_random"] == pytest.approx(expected_random_jaccard(4, 2)) == pytest.approx(7 / 18)
    assert small["jaccard_random_lo"] <= small["jaccard_random"] <= small["jaccard_random_hi"]
    assert small["heldout_loss_mean"] == pytest.approx(1.5) and small["heldout_loss_max"] == 3.0
    assert table.loc[("tlm_cs170k", "32", "one_shot"), "heldout_loss_mean"] == pytest.approx(2.0)


def test_draw_bootstrap_interval_of_the_mean_jaccard():
    from depthprune.reporting.statistics.nulls import draw_bootstrap_mean_jaccard

    # Identical draws: every resample's mean is 1.
    assert draw_bootstrap_mean_jaccard([{1, 2}] * 4) == (1.0, 1.0)
    # Two disjoint pairs of identical draws: pairs within a pair give 1, across 0; the observed mean
    # 2/6 = 1/3 lies inside, and resamples of one pair alone reach 1, of one draw per pair 0.
    lo, hi = draw_bootstrap_mean_jaccard([{1, 2}, {1, 2}, {3, 4}, {3, 4}], n_resamples=2000)
    assert lo == 0.0 and hi == 1.0
    lo, hi = draw_bootstrap_mean_jaccard([{1, 2}, {1, 2}, {1, 2}, {1, 2}, {1, 2}, {1, 2}, {1, 2}, {3, 4}])
    assert lo < 0.75 < hi  # 21 of 28 pairs identical
    assert all(math.isnan(v) for v in draw_bootstrap_mean_jaccard([{1}, {2}]))  # two draws: no interval


def synthetic_samples(n_docs: int = 40) -> pd.DataFrame:
    """Per-document accuracies of the TLM runs of ``synthetic_summary`` on the six zero-shot tasks: at
    8 items seed k answers the first 10 k documents of every task right (0, 25, 50 % correct); at 32
    items every seed answers every even document right (50 %)."""
    from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS

    rows = []
    for size, seeds in (("n8", (0, 1, 2)), ("n32", (0, 1, 2))):
        for seed in seeds:
            for benchmark in ZERO_SHOT_BENCHMARKS:
                for unit in range(n_docs):
                    right = unit < 10 * seed if size == "n8" else unit % 2 == 0
                    rows.append(
                        {
                            "model": "m",
                            "calibration": f"tlm_cs170k-{size}-s{seed}",
                            "budget": 2,
                            "algorithm": "one_shot",
                            "removed": "",
                            "benchmark": benchmark,
                            "unit": unit,
                            "metric": "acc",
                            "value": float(right),
                            "headline": True,
                            "seed": seed,
                        }
                    )
    return pd.DataFrame(rows)


def test_bootstrap_intervals_of_the_mean_over_seeds():
    table = add_bootstrap_intervals(calibration_size_table(synthetic_summary()), synthetic_samples(), n_resamples=400)
    rows = table.set_index(["calibration", "size", "algorithm"])
    small, large = rows.loc[("tlm_cs170k", "8", "one_shot")], rows.loc[("tlm_cs170k", "32", "one_shot")]
    # mean over seeds of 0, 25 and 50 % correct: 25 %, and the documents' resampling moves it
    assert (
        small["avg_accuracy_lo"] < 0.25 < small["avg_accuracy_hi"]
        and small["avg_accuracy_hi"] - small["avg_accuracy_lo"] < 0.2
    )
    assert large["avg_accuracy_lo"] < 0.5 < large["avg_accuracy_hi"]
    # no perplexity documents: no perplexity interval; runs without samples: no interval at all
    assert math.isnan(small["avg_perplexity_lo"]) and math.isnan(
        rows.loc[("tlm_cs170k", "8", "greedy")]["avg_accuracy_lo"]
    )


def test_tlm_accuracy_against_the_perplexity_calibration_is_paired_over_documents():
    """The perplexity run answers every even document right (50 %). At 32 items every TLM seed does
    the same, so each resample moves both alike and the paired difference is exactly 0; at 8 items
    the TLM seeds average 25 %, so the difference is about -25 points, clear of 0."""
    samples = synthetic_samples()
    ppl = samples[samples["calibration"] == "tlm_cs170k-n32-s0"].assign(calibration="ppl_c4-64x32-s0")
    table = add_bootstrap_intervals(
        calibration_size_table(synthetic_summary()), pd.concat([samples, ppl]), n_resamples=400
    )
    rows = table.set_index(["calibration", "size", "algorithm"])
    small, large = rows.loc[("tlm_cs170k", "8", "one_shot")], rows.loc[("tlm_cs170k", "32", "one_shot")]
    assert small["versus_ppl_size"] == large["versus_ppl_size"] == "64x32"
    # the point estimate comes from the summary: mean(30, 31, 32 %) - 44 %
    assert small["acc_minus_ppl"] == pytest.approx(0.31 - 0.44)
    assert large["acc_minus_ppl_lo"] == pytest.approx(0.0, abs=1e-12) == large["acc_minus_ppl_hi"]
    assert small["acc_minus_ppl_lo"] < -0.25 < small["acc_minus_ppl_hi"] < -0.1
    # greedy has no perplexity run to compare with; the perplexity row is the reference itself
    assert math.isnan(rows.loc[("tlm_cs170k", "8", "greedy")]["acc_minus_ppl"])
    assert math.isnan(rows.loc[("ppl_c4", "64x32", "one_shot")]["acc_minus_ppl"])


def test_render_writes_figure_and_tables(tmp_path):
    aggregate = tmp_path / "aggregate"
    aggregate.mkdir()
    synthetic_summary().to_csv(aggregate / "summary.csv", index=False)
    written = render_calibration_size(aggregate, tmp_path / "figures")
    names = sorted(p.relative_to(tmp_path / "figures").as_posix() for p in written)
    assert names == [
        "calibration_size.pdf",
        "calibration_size.png",
        "environment.json",  # the versions it was rendered with
        "tables/calibration_size.csv",
        "tables/calibration_size.md",
        "tables/calibration_size.tex",
    ]
    assert all(p.stat().st_size > 0 for p in written)
    markdown = (tmp_path / "figures" / "tables" / "calibration_size.md").read_text()
    assert "0.22" in markdown and "1.00" in markdown  # the two Jaccard values of one-shot
    csv = pd.read_csv(tmp_path / "figures" / "tables" / "calibration_size.csv")
    assert {"jaccard_mean", "loss_mean", "avg_accuracy_mean", "avg_perplexity_geomean"} <= set(csv.columns)
    assert set(csv["perplexity_of"]) == {"average"}


def test_a_study_of_wikitext2_alone_reports_its_perplexity(tmp_path):
    """The v2 preset evaluates WikiText-2 and no other perplexity: the average is NaN, so the table
    and figure report WikiText-2's."""
    summary = synthetic_summary()
    summary["ppl_wikitext2"] = summary["avg_perplexity"]
    summary["avg_perplexity"] = float("nan")
    table = calibration_size_table(summary).set_index(["calibration", "size", "algorithm"])
    small = table.loc[("tlm_cs170k", "8", "one_shot")]
    assert small["perplexity_of"] == "wikitext2" and small["avg_perplexity_geomean"] == pytest.approx(1e4)
    aggregate = tmp_path / "aggregate"
    aggregate.mkdir()
    summary.to_csv(aggregate / "summary.csv", index=False)
    render_calibration_size(aggregate, tmp_path / "figures")
    assert "wikitext2" in (tmp_path / "figures" / "tables" / "calibration_size.md").read_text()


def test_cli_writes_the_calibration_label(tiny_model_dir, data_dir, tmp_path):
    """prior and search carry a variant's label into their outputs (what aggregate keys on)."""
    import json

    from depthprune.cli import main

    common = [
        "--model",
        str(tiny_model_dir),
        "--name",
        "tiny",
        "--calibration",
        "tlm_cs170k",
        "--data-dir",
        str(data_dir),
        "--n-samples",
        "4",
        "--seq-len",
        "48",
        "--seed",
        "1",
        "--calibration-label",
        "tlm_cs170k-n4-s1",
    ]
    prior = tmp_path / "prior.json"
    assert main(["prior", *common, "--out", str(prior)]) == 0
    assert json.loads(prior.read_text())["calibration"] == "tlm_cs170k-n4-s1"
    selection = tmp_path / "selection.json"
    assert (
        main(
            [
                "search",
                *common,
                "--algorithm",
                "one_shot",
                "--budget",
                "2",
                "--prior",
                str(prior),
                "--workdir",
                str(tmp_path / "work"),
                "--out-selection",
                str(selection),
                "--out-trace",
                str(tmp_path / "trace.csv"),
            ]
        )
        == 0
    )
    record = json.loads(selection.read_text())
    assert record["calibration"] == "tlm_cs170k-n4-s1" and record["seed"] == 1
    # a prior of another variant is refused
    assert (
        main(
            [
                "search",
                *common[:-1],
                "tlm_cs170k-n4-s2",
                "--algorithm",
                "one_shot",
                "--budget",
                "2",
                "--prior",
                str(prior),
                "--workdir",
                str(tmp_path / "w2"),
                "--out-selection",
                str(tmp_path / "s2.json"),
                "--out-trace",
                str(tmp_path / "t2.csv"),
            ]
        )
        == 2
    )


def _dry_run_jobs(configfile):
    from test_workflow import planned_jobs, run_snakemake

    return planned_jobs(run_snakemake("-n", "--configfile", configfile).stdout)


def test_calibration_size_preset_dry_run():
    jobs = _dry_run_jobs("config/calibration_size.yaml")
    searches = [w for rule, w in jobs if rule == "search"]
    runs = {(w["calibration"], w["seed"]) for w in searches}
    # (4 TLM sizes + 2 perplexity sizes) x 3 seeds (seed<k>/ folders), one-shot and greedy at M = 7
    assert len(runs) == 18 and len(searches) == 36
    assert {("tlm_cs170k-n8", "0"), ("tlm_cs170k-n64", "2"), ("ppl_c4-8x64", "1"), ("ppl_c4-64x32", "2")} <= runs
    assert {w["algorithm"] for w in searches} == {"one_shot", "greedy"} and {w["budget"] for w in searches} == {"7"}
    rules = [rule for rule, _ in jobs]
    assert rules.count("prior") == 18 and rules.count("calibration_size") == 1 and rules.count("evaluate_dense") == 1
    assert rules.count("evaluate_pass") == 3  # every size's sets of one seed in one pass


def test_calibration_size_v2_preset_dry_run():
    jobs = _dry_run_jobs("config/calibration_size_v2.yaml")
    searches = [w for rule, w in jobs if rule == "search"]
    # (5 TLM sizes + 2 perplexity sizes) x 8 seeds, one-shot at M = 7
    assert len(searches) == 56 and {w["algorithm"] for w in searches} == {"one_shot"}
    assert {w["calibration"] for w in searches} >= {"tlm_cs170k-n8", "tlm_cs170k-n128", "ppl_c4-64x32"}
    rules = [rule for rule, _ in jobs]
    assert rules.count("prior") == 56 and rules.count("evaluate_pass") == 8


def test_extended_preset_dry_run():
    jobs = _dry_run_jobs("config/extended.yaml")
    searches = [w for rule, w in jobs if rule == "search"]
    budgets = {}
    for w in searches:
        budgets.setdefault(w["model"], set()).add(int(w["budget"]))
    assert budgets == {"smollm2-135m": {7, 9}, "gemma3-270m": {4, 5}}
    runs = {(w["calibration"], w["seed"]) for w in searches}
    assert runs == {(c, str(s)) for c in ("ppl_c4", "tlm_cs170k", "ppl_cs170k") for s in (0, 1, 2)}
    assert len(searches) == 2 * 3 * 3 * 2 * 11  # models x calibrations x seeds x budgets x algorithms
    assert [rule for rule, _ in jobs].count("calibration_size") == 0


def test_two_families_preset_dry_run():
    jobs = _dry_run_jobs("config/two_families.yaml")
    searches = [w for rule, w in jobs if rule == "search"]
    budgets = {}
    for w in searches:
        budgets.setdefault(w["model"], set()).add(int(w["budget"]))
    assert budgets == {"smollm2-135m": {7, 9}, "gemma3-270m": {4, 5}}  # 7/32 and 9/32 of Gemma's 18 blocks
    assert {w["calibration"] for w in searches} == {"ppl_c4", "tlm_cs170k"} and {w["seed"] for w in searches} == {"0"}
    assert len(searches) == 2 * 2 * 2 * 9  # models x calibrations x budgets x algorithms
    rules = [rule for rule, _ in jobs]
    assert rules.count("evaluate_selections") == 2 * 2 * 2 and rules.count("evaluate_dense") == 2
    assert rules.count("evaluate_pass") == 2  # one per model

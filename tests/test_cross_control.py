"""The cross-control decomposition (issue 50) and the reuse of a committed study's runs (base_study).

A synthetic three-calibration study with per-document scores built so that every effect and its
interval can be worked out by hand:

- every run answers every document right, except: the TLM-pruned models answer the first
  ``WRONG`` of the ``N_DOCS`` BoolQ documents wrong (objective step: −WRONG/N_DOCS on BoolQ, so
  −WRONG/N_DOCS/6 of average accuracy, with the bootstrap SE of a mean of N_DOCS 0/−1 differences);
- ppl_cs170k and ppl_c4 answer alike (data step exactly 0 on every resample: interval [0, 0]);
- ppl_cs170k's perplexity windows carry ln 10 more NLL per token than ppl_c4's (every perplexity
  ×10: the data step is exactly +1 order of magnitude on every resample), TLM's the same as
  ppl_cs170k's (objective step exactly 0 orders).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS
from depthprune.reporting import cli as reporting_cli
from depthprune.reporting.aggregate import aggregate, collect_samples, write_aggregate, write_samples
from depthprune.reporting.base_study import BASE_STUDY_RECORD, merge_base_study
from depthprune.reporting.statistics.bootstrap import document_replicates
from depthprune.reporting.verdicts.decomposition import (
    MEAN_OVER_ALGORITHMS,
    decomposition_table,
    random_pairs_mean_jaccard,
    set_decomposition_table,
)

ALGORITHMS = ["one_shot", "greedy", "beam", "ga", "bo", "cbo", "fast_block_select"]
CALIBRATIONS = ["ppl_c4", "ppl_cs170k", "tlm_cs170k"]
N_DOCS, WRONG = 100, 30
N_LAYERS, BUDGET = 12, 2
REMOVED = {"ppl_c4": [1, 2], "ppl_cs170k": [1, 2], "tlm_cs170k": [5, 6]}
LOG_PPL = {"ppl_c4": 2.0, "ppl_cs170k": 2.0 + math.log(10), "tlm_cs170k": 2.0 + math.log(10), "none": 2.0}


def samples_rows(calibration: str, algorithm: str, removed: list[int]) -> list[dict]:
    key = {
        "model": "alpha",
        "calibration": calibration,
        "budget": BUDGET if algorithm != "dense" else 0,
        "algorithm": algorithm,
        "removed": " ".join(map(str, removed)),
    }
    rows = []
    for benchmark in ("wikitext2", "c4"):
        for unit in range(4):
            tokens = 100.0 + unit
            rows.append(
                {
                    **key,
                    "benchmark": benchmark,
                    "unit": unit,
                    "metric": "nll_sum",
                    "value": LOG_PPL[calibration] * tokens,
                    "headline": True,
                }
            )
            rows.append(
                {**key, "benchmark": benchmark, "unit": unit, "metric": "n_tokens", "value": tokens, "headline": True}
            )
    for unit in range(N_DOCS):
        rows.append(
            {
                **key,
                "benchmark": "lambada_openai",
                "unit": unit,
                "metric": "perplexity",
                "value": -LOG_PPL[calibration],
                "headline": True,
            }
        )
        rows.append(
            {**key, "benchmark": "lambada_openai", "unit": unit, "metric": "acc", "value": 1.0, "headline": False}
        )
    for benchmark in ZERO_SHOT_BENCHMARKS:
        for unit in range(N_DOCS):
            wrong = calibration == "tlm_cs170k" and benchmark == "boolq" and unit < WRONG
            rows.append(
                {
                    **key,
                    "benchmark": benchmark,
                    "unit": unit,
                    "metric": "acc",
                    "value": 0.0 if wrong else 1.0,
                    "headline": True,
                }
            )
    return rows


def metrics_rows(samples: pd.DataFrame) -> pd.DataFrame:
    """metrics.csv of one run from its samples (headline value per benchmark)."""
    rows = []
    for benchmark, group in samples.groupby("benchmark"):
        head = group[group["headline"]]
        if benchmark in ("wikitext2", "c4"):
            nll = head[head.metric == "nll_sum"]["value"].sum()
            tok = head[head.metric == "n_tokens"]["value"].sum()
            value, metric = math.exp(nll / tok), "perplexity"
        elif benchmark == "lambada_openai":
            value, metric = math.exp(-head["value"].mean()), "perplexity"
        else:
            value, metric = head["value"].mean(), "acc"
        first = group.iloc[0]
        rows.append(
            {
                **{k: first[k] for k in ("model", "calibration", "budget", "algorithm", "removed")},
                "benchmark": benchmark,
                "metric": metric,
                "value": value,
                "stderr": "",
                "n": head["unit"].nunique(),
                "headline": True,
            }
        )
    return pd.DataFrame(rows)


def write_run(root: Path, calibration: str, algorithm: str, dtype: str = "float32", seed: int = 0) -> None:
    if algorithm == "dense":
        run = root / "alpha" / "dense"
        removed: list[int] = []
    else:
        run = root / "alpha" / calibration / f"seed{seed}" / f"M{BUDGET}" / algorithm
        removed = REMOVED[calibration]
    run.mkdir(parents=True)
    samples = pd.DataFrame(samples_rows(calibration if algorithm != "dense" else "none", algorithm, removed))
    samples.to_parquet(run / "samples.parquet")
    metrics_rows(samples).to_csv(run / "metrics.csv", index=False)
    if algorithm != "dense":
        selection = {
            "model": "alpha",
            "calibration": calibration,
            "budget": BUDGET,
            "algorithm": algorithm,
            "removed": removed,
            "n_layers": N_LAYERS,
            "loss": 1.0,
            "seed": seed,
            "dtype": dtype,
        }
        (run / "selection.json").write_text(json.dumps(selection))


def build_aggregate(root: Path, calibrations: list[str], out: Path, dtype: str = "float32") -> Path:
    for calibration in calibrations:
        for algorithm in ALGORITHMS:
            write_run(root, calibration, algorithm, dtype)
    write_run(root, "none", "dense")
    selections = sorted(root.glob("*/*/seed*/M*/*/selection.json"))
    metrics = sorted(root.glob("**/metrics.csv"))
    agg = aggregate(selections, metrics)
    write_aggregate(agg, out)
    write_samples(collect_samples(sorted(root.glob("**/samples.parquet")), agg.selections), out)
    return out


@pytest.fixture(scope="module")
def three_calibrations(tmp_path_factory):
    root = tmp_path_factory.mktemp("three")
    out = build_aggregate(root / "results", CALIBRATIONS, root / "aggregate")
    summary = pd.read_parquet(out / "summary.parquet")
    samples = pd.read_parquet(out / "samples.parquet")
    selections = pd.read_parquet(out / "selections.parquet")
    return summary, samples, selections


def effect(table: pd.DataFrame, response: str, step: str, algorithm: str = MEAN_OVER_ALGORITHMS) -> pd.Series:
    rows = table[(table.response == response) & (table.effect == step) & (table.algorithm == algorithm)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_accuracy_effects_and_intervals_by_hand(three_calibrations):
    summary, samples, _ = three_calibrations
    table = decomposition_table(summary, document_replicates(samples, 2000, 0))
    objective = effect(table, "avg_accuracy", "objective")
    # −WRONG/N_DOCS on one of six tasks, in points: −5.0
    assert objective["estimate"] == pytest.approx(-100 * WRONG / N_DOCS / 6)
    # bootstrap SE of the mean of N_DOCS differences (WRONG of them −1), over six tasks, in points
    p = WRONG / N_DOCS
    hand_se = 100 * math.sqrt(p * (1 - p) / N_DOCS) / 6
    assert objective["se"] == pytest.approx(hand_se, rel=0.05)
    assert objective["ci_low"] == pytest.approx(objective["estimate"] - 1.96 * hand_se, abs=0.25)
    assert objective["ci_high"] == pytest.approx(objective["estimate"] + 1.96 * hand_se, abs=0.25)
    assert (objective["direction"], objective["verdict"]) == ("lower", "holds")
    data = effect(table, "avg_accuracy", "data")
    assert (data["estimate"], data["ci_low"], data["ci_high"]) == (0.0, 0.0, 0.0)
    assert (data["direction"], data["verdict"]) == ("level", "inconclusive")
    total = effect(table, "avg_accuracy", "total")
    assert total["estimate"] == pytest.approx(objective["estimate"] + data["estimate"])
    gap = effect(table, "avg_accuracy", "objective_minus_data")
    assert gap["estimate"] == pytest.approx(objective["estimate"])
    # each algorithm carries the same step (every algorithm's sets are alike here)
    one = effect(table, "avg_accuracy", "objective", "greedy")
    assert one["estimate"] == pytest.approx(objective["estimate"])


def test_perplexity_effects_in_orders_of_magnitude_by_hand(three_calibrations):
    summary, samples, _ = three_calibrations
    table = decomposition_table(summary, document_replicates(samples, 500, 0))
    data = effect(table, "log10_avg_perplexity", "data")
    assert data["estimate"] == pytest.approx(1.0)
    assert (data["ci_low"], data["ci_high"]) == (pytest.approx(1.0), pytest.approx(1.0))
    assert (data["direction"], data["verdict"]) == ("higher", "holds")
    objective = effect(table, "log10_avg_perplexity", "objective")
    assert objective["estimate"] == pytest.approx(0.0, abs=1e-12)
    assert objective["verdict"] == "inconclusive"


def test_removed_sets_within_across_and_exact_permutation_p(three_calibrations):
    _, _, selections = three_calibrations
    table = set_decomposition_table(selections).set_index("effect")
    # data step: every set {1, 2} under both calibrations: within = across = 1, nothing to tell apart
    assert table.loc["data", ["within", "across", "within_minus_across"]].tolist() == [1.0, 1.0, 0.0]
    assert table.loc["data", "p_permutation"] == 1.0
    assert table.loc["data", "verdict"] == "inconclusive"
    # objective step: {1, 2} against {5, 6}: within 1, across 0; only the identity and the global swap
    # of the 2^7 label swaps reach 1, so p = 2 / 128
    assert table.loc["objective", ["within", "across", "within_minus_across"]].tolist() == [1.0, 0.0, 1.0]
    assert table.loc["objective", "p_permutation"] == pytest.approx(2 / 128)
    assert table.loc["objective", "verdict"] == "holds"
    assert table.loc["objective", "n_candidates"] == N_LAYERS


def test_random_pairs_null_matches_the_hypergeometric_expectation():
    from depthprune.reporting.statistics.nulls import expected_random_jaccard

    draws = random_pairs_mean_jaccard(28, 7, 7)
    assert draws.mean() == pytest.approx(expected_random_jaccard(28, 7), abs=0.005)


def test_decomposition_needs_all_three_calibrations(three_calibrations):
    summary, _, selections = three_calibrations
    two = summary[summary.calibration != "ppl_cs170k"]
    assert decomposition_table(two).empty
    assert set_decomposition_table(selections[selections.calibration != "ppl_cs170k"]).empty


# --------------------------------------------------------------------------- base_study


@pytest.fixture()
def base_and_study(tmp_path):
    base = build_aggregate(tmp_path / "base_results", ["ppl_c4", "tlm_cs170k"], tmp_path / "base")
    root = tmp_path / "study_results"
    for algorithm in ALGORITHMS:
        write_run(root, "ppl_cs170k", algorithm)
    write_run(root, "none", "dense")
    return base, root


def study_aggregate(root: Path):
    selections = sorted(root.glob("*/*/seed*/M*/*/selection.json"))
    agg = aggregate(selections, sorted(root.glob("**/metrics.csv")))
    return agg, collect_samples(sorted(root.glob("**/samples.parquet")), agg.selections)


def test_base_study_rows_join_the_aggregate(base_and_study, tmp_path):
    base, root = base_and_study
    out = tmp_path / "merged"
    status = reporting_cli_main(
        [
            "aggregate",
            "--results",
            str(root),
            "--base-aggregate",
            str(base),
            "--base-calibrations",
            "ppl_c4,tlm_cs170k",
            "--out",
            str(out),
        ]
    )
    assert status == 0
    summary = pd.read_parquet(out / "summary.parquet")
    assert sorted(summary["calibration"].unique()) == ["none", "ppl_c4", "ppl_cs170k", "tlm_cs170k"]
    assert len(summary) == 3 * len(ALGORITHMS) + 1
    samples = pd.read_parquet(out / "samples.parquet")
    assert samples.groupby("calibration").size()["tlm_cs170k"] == len(ALGORITHMS) * (16 + 2 * N_DOCS + 6 * N_DOCS)
    record = json.loads((out / BASE_STUDY_RECORD).read_text())
    assert (record["answers_differ"], record["max_perplexity_rel_diff"]) == (0, 0.0)
    # the merged aggregate gives the same decomposition as one computed in a single study
    table = decomposition_table(summary, document_replicates(samples, 500, 0))
    assert effect(table, "avg_accuracy", "objective")["estimate"] == pytest.approx(-100 * WRONG / N_DOCS / 6)


def reporting_cli_main(argv: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="depthprune")
    reporting_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_base_study_refuses_another_precision(tmp_path):
    base = build_aggregate(tmp_path / "base_results", ["ppl_c4"], tmp_path / "base", dtype="bfloat16")
    root = tmp_path / "study_results"
    for algorithm in ALGORITHMS:
        write_run(root, "ppl_cs170k", algorithm)
    write_run(root, "none", "dense")
    agg, samples = study_aggregate(root)
    with pytest.raises(ValueError, match=r"base_study.aggregate .*dtype \['bfloat16'\].*\['float32'\]"):
        merge_base_study(agg, samples, base, ["ppl_c4"])


def test_base_study_refuses_other_documents_and_other_answers(base_and_study):
    base, root = base_and_study
    agg, samples = study_aggregate(root)
    fewer = samples[~((samples.algorithm == "dense") & (samples.benchmark == "piqa") & (samples.unit == 0))]
    with pytest.raises(ValueError, match="other piqa documents"):
        merge_base_study(agg, fewer, base, ["ppl_c4", "tlm_cs170k"])
    flipped = samples.copy()
    dense_boolq = (flipped.algorithm == "dense") & (flipped.benchmark == "boolq") & (flipped.unit < 20)
    flipped.loc[dense_boolq, "value"] = 0.0
    with pytest.raises(ValueError, match=r"answers 20 of .* documents differently"):
        merge_base_study(agg, flipped, base, ["ppl_c4", "tlm_cs170k"])


def test_base_study_refuses_missing_or_own_calibrations(base_and_study):
    base, root = base_and_study
    agg, samples = study_aggregate(root)
    with pytest.raises(ValueError, match="computes ppl_cs170k seed 0 itself"):
        merge_base_study(agg, samples, base, ["ppl_cs170k"])
    with pytest.raises(ValueError, match="holds no ppl_c4_x runs"):
        merge_base_study(agg, samples, base, ["ppl_c4_x"])
    with pytest.raises(FileNotFoundError, match="aggregate file not found"):
        merge_base_study(agg, samples, base.parent / "nowhere", ["ppl_c4"])


def test_small_perplexity_differences_pass_and_are_recorded(base_and_study):
    base, root = base_and_study
    agg, samples = study_aggregate(root)
    nudged = samples.copy()
    nll = (nudged.algorithm == "dense") & (nudged.metric == "nll_sum")
    nudged.loc[nll, "value"] *= 1 + 1e-6
    _, _, agreement = merge_base_study(agg, nudged, base, ["ppl_c4", "tlm_cs170k"])
    assert agreement.max_perplexity_rel_diff == pytest.approx(1e-6, rel=1e-3)
    nudged.loc[nll, "value"] *= 1 + 1e-2
    with pytest.raises(ValueError, match="perplexity units differ"):
        merge_base_study(agg, nudged, base, ["ppl_c4", "tlm_cs170k"])
    assert np.isfinite(agreement.max_perplexity_rel_diff)


def test_base_study_reuses_seed_0_beside_a_study_of_other_seeds(base_and_study, tmp_path):
    """A multi-seed study computes seeds 1.. of the base's calibrations and reuses the committed seed 0:
    the merged aggregate holds both seeds, the dense model at each."""
    base, _ = base_and_study
    root = tmp_path / "seeds_results"
    for algorithm in ALGORITHMS:
        write_run(root, "ppl_c4", algorithm, seed=1)
    write_run(root, "none", "dense")
    agg, samples = study_aggregate(root)
    with pytest.raises(ValueError, match="computes ppl_c4 seed 1 itself"):
        merge_base_study(agg, samples, base, ["ppl_c4"])
    merged, merged_samples, agreement = merge_base_study(agg, samples, base, ["ppl_c4"], seeds=[0])
    assert agreement.seeds == (0,)
    counts = merged.summary.groupby(["seed", "calibration"]).size().to_dict()
    assert counts == {(0, "none"): 1, (0, "ppl_c4"): 7, (1, "none"): 1, (1, "ppl_c4"): 7}
    dense_samples = merged_samples[merged_samples.algorithm == "dense"]
    assert sorted(dense_samples["seed"].unique()) == [0, 1]

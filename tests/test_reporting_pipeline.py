"""End to end on a synthetic results/ tree with known answers: aggregate, render, check the values.

The tree follows the file contract of docs/architecture.md. Numbers are built so that every checked
value can be worked out by hand:

- model ``alpha`` (12 layers), M in {2, 3}, calibrations ppl_c4 and tlm_cs170k, plus a dense run;
- model ``beta`` (10 layers), M = 2, three calibrations; ppl_cs170k lacks ``bo`` and the TLM
  ``greedy`` run lacks BoolQ (graceful NaN).
- Every algorithm has a quality offset q in -3..3 (QUALITY). log10(avg perplexity) = base(calibration)
  + 0.1 q (additive: no residual variance); avg accuracy = 0.5 + 0.015 q under TLM and 0.5 - 0.005 q
  under ppl_c4 (equal calibration means, algorithm means 0.005 q: shares 0 / 0.2 / 0.8).
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from depthprune.reporting import cli as reporting_cli
from depthprune.reporting.verdicts.observations import summarise_observations

ALGORITHMS = ["one_shot", "greedy", "beam", "ga", "bo", "cbo", "fast_block_select"]
QUALITY = {"one_shot": 0, "greedy": -3, "beam": 3, "ga": -2, "bo": 2, "cbo": -1, "fast_block_select": 1}
LOG10_PPL_BASE = {"ppl_c4": 1.0, "tlm_cs170k": 3.0, "ppl_cs170k": 2.0}
TASK_OFFSETS = {
    "hellaswag": -0.03,
    "winogrande": -0.02,
    "arc_easy": -0.01,
    "arc_challenge": 0.01,
    "piqa": 0.02,
    "boolq": 0.03,
}
HAS_ACC_NORM = {"hellaswag", "arc_easy", "arc_challenge", "piqa"}
# beta / ppl_cs170k (bo missing): accuracy ranks swap neighbours of the perplexity ranks.
BETA_CS_ACC_RANK = {"greedy": 2, "ga": 1, "cbo": 4, "one_shot": 3, "fast_block_select": 6, "beam": 5}


def removed_sets(model: str, calibration: str, budget: int) -> dict[str, list[int]]:
    if model == "beta":  # algorithm i removes {i, i+1} under every calibration
        return {a: [i, i + 1] for i, a in enumerate(ALGORITHMS)}
    if calibration == "ppl_c4":
        if budget == 3:
            return {a: [4, 5, 6] for a in ALGORITHMS}
        return {a: ([5, 7] if a == "cbo" else [5, 6]) for a in ALGORITHMS}
    first = {"one_shot", "greedy", "beam", "ga"}
    if budget == 3:
        return {a: ([0, 1, 2] if a in first else [0, 1, 3]) for a in ALGORITHMS}
    return {a: ([1, 2] if a in first else [1, 3]) for a in ALGORITHMS}


def avg_perplexity(calibration: str, algorithm: str) -> float:
    return 10 ** (LOG10_PPL_BASE[calibration] + 0.1 * QUALITY[algorithm])


def avg_accuracy(model: str, calibration: str, algorithm: str) -> float:
    q = QUALITY[algorithm]
    if calibration == "tlm_cs170k":
        return 0.5 + 0.015 * q
    if calibration == "ppl_c4":
        return 0.5 - 0.005 * q
    return 0.4 + 0.01 * BETA_CS_ACC_RANK[algorithm]


def metric_rows(model, calibration, budget, algorithm, removed, ppl, acc, drop=(), booleans=("true", "false")):
    yes, no = booleans
    key = {
        "model": model,
        "calibration": calibration,
        "budget": budget,
        "algorithm": algorithm,
        "removed": " ".join(map(str, removed)),
    }
    rows = []
    for bench, factor in (("wikitext2", 0.5), ("c4", 1.0), ("lambada_openai", 1.5)):
        rows.append(
            {
                **key,
                "benchmark": bench,
                "metric": "perplexity",
                "value": ppl * factor,
                "stderr": "",
                "n": 10,
                "headline": yes,
            }
        )
    rows.append(
        {**key, "benchmark": "lambada_openai", "metric": "acc", "value": 0.9, "stderr": 0.01, "n": 10, "headline": no}
    )
    for task, offset in TASK_OFFSETS.items():
        if task in drop:
            continue
        head = acc + offset
        if task in HAS_ACC_NORM:
            rows.append(
                {
                    **key,
                    "benchmark": task,
                    "metric": "acc",
                    "value": head - 0.05,
                    "stderr": 0.01,
                    "n": 10,
                    "headline": no,
                }
            )
            rows.append(
                {
                    **key,
                    "benchmark": task,
                    "metric": "acc_norm",
                    "value": head,
                    "stderr": 0.01,
                    "n": 10,
                    "headline": yes,
                }
            )
        else:
            rows.append(
                {**key, "benchmark": task, "metric": "acc", "value": head, "stderr": 0.01, "n": 10, "headline": yes}
            )
    return rows


def write_tree(root: Path, grid: list[tuple[str, str, int]], dense: bool = True, seed: int | None = None) -> Path:
    """results/<model>/<calibration>/M<M>/<algorithm>/{selection.json, metrics.csv} (+ dense); with
    ``seed``, the seeds layout .../<calibration>/seed<k>/M<M>/..., the loss raised by ``seed`` and,
    for seed 1, alpha/ppl_c4/M2/cbo removing {5, 8} instead of {5, 7}."""
    n_layers = {"alpha": 12, "beta": 10}
    for model, calibration, budget in grid:
        for algorithm, removed in removed_sets(model, calibration, budget).items():
            if (model, calibration, algorithm) == ("beta", "ppl_cs170k", "bo"):
                continue
            if seed == 1 and (model, calibration, budget, algorithm) == ("alpha", "ppl_c4", 2, "cbo"):
                removed = [5, 8]
            seed_dir = [] if seed is None else [f"seed{seed}"]
            run = root.joinpath(model, calibration, *seed_dir, f"M{budget}", algorithm)
            run.mkdir(parents=True)
            index = ALGORITHMS.index(algorithm)
            selection = {
                "model": model,
                "calibration": calibration,
                "budget": budget,
                "algorithm": algorithm,
                "removed": removed,
                "n_layers": n_layers[model],
                "loss": 1.0 + index + (seed or 0),
                "calibration_perplexity": None,
                "calibration_accuracy": None,
                "distinct_evaluations": 100 + index,
                "memo_hits": 3,
                "blocks_run": 1000,
                "search_seconds": 10.0 * (index + 1),
                "seed": seed or 0,
                "hyperparameters": {"beam_width": 5},
                "versions": {"depthprune": "0.1.0"},
            }
            (run / "selection.json").write_text(json.dumps(selection))
            drop = ("boolq",) if (model, calibration, algorithm) == ("beta", "tlm_cs170k", "greedy") else ()
            rows = metric_rows(
                model,
                calibration,
                budget,
                algorithm,
                removed,
                avg_perplexity(calibration, algorithm),
                avg_accuracy(model, calibration, algorithm),
                drop=drop,
            )
            pd.DataFrame(rows).to_csv(run / "metrics.csv", index=False)
    if dense:
        (root / "alpha" / "dense").mkdir(parents=True, exist_ok=True)
        rows = metric_rows("alpha", "none", 0, "dense", [], 5.0, 0.6, booleans=("True", "False"))
        pd.DataFrame(rows).to_csv(root / "alpha" / "dense" / "metrics.csv", index=False)
    return root


FULL_GRID = [
    ("alpha", "ppl_c4", 2),
    ("alpha", "ppl_c4", 3),
    ("alpha", "tlm_cs170k", 2),
    ("alpha", "tlm_cs170k", 3),
    ("beta", "ppl_c4", 2),
    ("beta", "tlm_cs170k", 2),
    ("beta", "ppl_cs170k", 2),
]


def run_command(argv: list[str]) -> int:
    """Parse with only the reporting sub-commands (the other stages need not be importable here)."""
    parser = argparse.ArgumentParser(prog="depthprune")
    reporting_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    root = tmp_path_factory.mktemp("reporting")
    results = write_tree(root / "results", FULL_GRID)
    assert run_command(["aggregate", "--results", str(results), "--out", str(root / "aggregate")]) == 0
    assert run_command(["render", "--aggregate", str(root / "aggregate"), "--out", str(root / "figures")]) == 0
    return root


def read_table(rendered, name):
    return pd.read_csv(rendered / "figures" / "tables" / f"{name}.csv", keep_default_na=True)


# ----------------------------------------------------------------------------------- aggregation


def test_aggregate_files_and_summary_values(rendered):
    agg = rendered / "aggregate"
    for name in ("selections", "metrics", "summary"):
        assert (agg / f"{name}.csv").exists() and (agg / f"{name}.parquet").exists()
    summary = pd.read_parquet(agg / "summary.parquet")
    assert len(summary) == 2 * 2 * 7 + 1 + 3 * 7 - 1  # alpha runs + dense + beta runs (one missing)
    row = summary.set_index(["model", "calibration", "budget", "algorithm"]).loc[("alpha", "tlm_cs170k", 3, "beam")]
    assert row["avg_perplexity"] == pytest.approx(10**3.3)
    assert row["ppl_wikitext2"] == pytest.approx(0.5 * 10**3.3)
    assert row["avg_accuracy"] == pytest.approx(0.5 + 0.045)
    assert row["acc_hellaswag"] == pytest.approx(0.545 - 0.03)  # the headline acc_norm, not acc
    assert row["removed"] == "0 1 2" and row["search_seconds"] == 30.0 and row["calibration_kind"] == "tlm"
    dense = summary[summary["algorithm"] == "dense"].iloc[0]
    assert dense["calibration"] == "none" and dense["removed"] == "" and dense["avg_perplexity"] == pytest.approx(5.0)
    partial = summary.set_index(["model", "calibration", "algorithm"]).loc[("beta", "tlm_cs170k", "greedy")]
    assert np.isnan(partial["acc_boolq"]) and np.isnan(partial["avg_accuracy"])  # never a partial mean
    assert partial["acc_piqa"] == pytest.approx(0.5 - 0.045 + 0.02)


def test_aggregate_explicit_file_lists_match_discovery(rendered, tmp_path):
    results = rendered / "results"
    selections = sorted(str(p) for p in results.rglob("selection.json"))
    metrics = sorted(str(p) for p in results.rglob("metrics.csv"))
    out = tmp_path / "agg"
    assert run_command(["aggregate", "--selections", *selections, "--metrics", *metrics, "--out", str(out)]) == 0
    expected = pd.read_parquet(rendered / "aggregate" / "summary.parquet")
    pd.testing.assert_frame_equal(pd.read_parquet(out / "summary.parquet"), expected)


def test_aggregate_errors_name_the_file(tmp_path):
    results = write_tree(tmp_path / "results", [("alpha", "ppl_c4", 2)], dense=False)
    metrics = results / "alpha" / "ppl_c4" / "M2" / "greedy" / "metrics.csv"
    frame = pd.read_csv(metrics)
    frame.assign(removed="0 1").to_csv(metrics, index=False)  # evaluates another set: stale
    with pytest.raises(ValueError, match=r"greedy/metrics.csv.*stale"):
        run_command(["aggregate", "--results", str(results), "--out", str(tmp_path / "agg")])
    frame.drop(columns="headline").to_csv(metrics, index=False)
    with pytest.raises(ValueError, match=r"greedy/metrics.csv: metrics.csv lacks columns headline"):
        run_command(["aggregate", "--results", str(results), "--out", str(tmp_path / "agg")])
    with pytest.raises(FileNotFoundError, match=r"no selection\.json or metrics\.csv files in the --selections"):
        run_command(["aggregate", "--selections", "--out", str(tmp_path / "agg")])
    with pytest.raises(FileNotFoundError, match=r"--results .*nowhere: directory not found"):
        run_command(["aggregate", "--results", str(tmp_path / "nowhere"), "--out", str(tmp_path / "agg")])


def test_render_missing_aggregate_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"selections.parquet: aggregate file not found"):
        run_command(["render", "--aggregate", str(tmp_path), "--out", str(tmp_path / "figures")])
    (tmp_path / "selections.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match=r"selections.parquet: not a readable Parquet file"):
        run_command(["render", "--aggregate", str(tmp_path), "--out", str(tmp_path / "figures")])
    with pytest.raises(ValueError, match=r"--only: unknown output\(s\) figure9"):
        run_command(["render", "--aggregate", str(tmp_path), "--out", str(tmp_path / "figures"), "--only", "figure9"])


# ----------------------------------------------------------------------------------- outputs


def test_every_output_exists(rendered):
    out = rendered / "figures"
    for n in (1, 2, 3):
        assert (out / f"figure{n}.pdf").read_bytes().startswith(b"%PDF")
        assert (out / f"figure{n}.png").read_bytes().startswith(b"\x89PNG")
    stems = [f"table{n}" for n in range(1, 6)] + ["table2_alpha", "table2_beta", "table3_alpha", "table3_beta"]
    for stem in stems:
        for ext in ("csv", "md", "tex"):
            assert (out / "tables" / f"{stem}.{ext}").stat().st_size > 0, f"{stem}.{ext}"
    analyses = ("jaccard_pairs", "jaccard_summary", "spearman", "variance_decomposition", "calibration_contrast")
    for name in analyses + ("observations",):
        assert (out / "tables" / f"{name}.csv").exists()
    assert (out / "tables" / "observations.md").exists()


def test_table1_bold_lowest_avg_perplexity(rendered):
    t1 = read_table(rendered, "table1")
    pruned = t1[t1["algorithm"] != "dense"]
    best = pruned[pruned["best_avg_perplexity"]]
    # Greedy has the lowest quality offset in every (model, M, calibration) block: 7 blocks.
    assert sorted(best["algorithm"].unique()) == ["greedy"] and len(best) == 7
    assert not t1.loc[t1["algorithm"] == "dense", "best_avg_perplexity"].any()
    md = (rendered / "figures" / "tables" / "table1.md").read_text()
    assert f"**{10**0.7:.2f}**" in md  # alpha / ppl_c4 greedy: 10^(1 - 0.3)
    tex = (rendered / "figures" / "tables" / "table1.tex").read_text()
    assert rf"\textbf{{{10**0.7:.2f}}}" in tex and r"PPL · C4" in tex


def test_tables_2_and_3_bold_highest_avg_accuracy(rendered):
    t2 = read_table(rendered, "table2")
    assert set(t2["calibration"]) == {"none", "tlm_cs170k"}  # the dense reference row leads alpha
    assert t2.loc[t2["best_avg_accuracy"], "algorithm"].tolist() == ["beam", "beam", "beam"]
    assert t2.loc[
        (t2["model"] == "alpha") & (t2["algorithm"] == "beam") & (t2["budget"] == 2), "avg_accuracy"
    ].item() == pytest.approx(0.545)
    t3 = read_table(rendered, "table3")
    assert set(t3["calibration"]) - {"none"} == {"ppl_c4", "ppl_cs170k"}
    best = t3[t3["best_avg_accuracy"]].set_index(["model", "budget", "calibration"])["algorithm"]
    assert best.to_dict() == {
        ("alpha", 2, "ppl_c4"): "greedy",
        ("alpha", 3, "ppl_c4"): "greedy",
        ("beta", 2, "ppl_c4"): "greedy",
        ("beta", 2, "ppl_cs170k"): "fast_block_select",
    }
    md = (rendered / "figures" / "tables" / "table2.md").read_text()
    assert "**54.50**" in md and "BoolQ" in md
    per_model = read_table(rendered, "table2_beta")
    assert set(per_model["model"]) == {"beta"}
    greedy = per_model[per_model["algorithm"] == "greedy"].iloc[0]
    assert np.isnan(greedy["acc_boolq"]) and np.isnan(greedy["avg_accuracy"]) and not greedy["best_avg_accuracy"]


def test_table4_cost_columns(rendered):
    t4 = read_table(rendered, "table4")
    assert len(t4) == 48 and "dense" not in set(t4["algorithm"])
    row = t4[(t4["model"] == "alpha") & (t4["calibration"] == "tlm_cs170k") & (t4["algorithm"] == "ga")].iloc[0]
    assert row["search_seconds"] == 40.0 and row["distinct_evaluations"] == 103


def test_table5_agreement_values(rendered):
    t5 = read_table(rendered, "table5").set_index(["model", "budget", "calibration"])
    alpha = t5.loc[("alpha", 2, "ppl_c4")]  # six {5,6}, cbo {5,7}
    assert alpha["n_pairs"] == 21
    assert alpha["mean_jaccard"] == pytest.approx(17 / 21)
    assert (alpha["min_jaccard"], alpha["max_jaccard"]) == (pytest.approx(1 / 3), 1.0)
    assert alpha["full_overlap"] == pytest.approx(1 / 3)
    tlm3 = t5.loc[("alpha", 3, "tlm_cs170k")]  # four {0,1,2}, three {0,1,3}
    assert tlm3["mean_jaccard"] == pytest.approx(15 / 21) and tlm3["full_overlap"] == pytest.approx(0.5)
    cs = t5.loc[("beta", 2, "ppl_cs170k")]  # {i, i+1} without bo: 4 neighbouring pairs at 1/3 of 15
    assert cs["n_sets"] == 6 and cs["n_pairs"] == 15 and cs["mean_jaccard"] == pytest.approx(4 / 3 / 15)
    assert cs["full_overlap"] == 0.0
    # Bold: highest mean per (model, M); a block whose values all tie (full overlap 1/3 and 1/3) has none.
    assert (
        t5.loc[("alpha", 2, "ppl_c4"), "best_mean_jaccard"]
        and not t5.loc[("alpha", 2, "tlm_cs170k"), "best_mean_jaccard"]
    )
    assert not t5.loc[("alpha", 2), "best_full_overlap"].any()
    assert (
        t5.loc[("alpha", 3, "ppl_c4"), "best_full_overlap"]
        and not t5.loc[("alpha", 3, "tlm_cs170k"), "best_full_overlap"]
    )
    md = (rendered / "figures" / "tables" / "table5.md").read_text()
    assert "0.33–1.00" in md


def test_spearman_values(rendered):
    rho = read_table(rendered, "spearman").set_index(["model", "budget", "calibration"])
    assert rho.loc[("alpha", 2, "tlm_cs170k"), "rho"] == pytest.approx(1.0)
    assert rho.loc[("alpha", 3, "ppl_c4"), "rho"] == pytest.approx(-1.0)
    assert rho.loc[("beta", 2, "tlm_cs170k"), "n"] == 6  # greedy lacks an average accuracy
    # beta/ppl_cs170k: 6 algorithms, neighbours swapped: sum d^2 = 6, rho = 1 - 36/210.
    assert rho.loc[("beta", 2, "ppl_cs170k"), "rho"] == pytest.approx(1 - 36 / 210)
    assert rho.loc[("beta", 2, "ppl_cs170k"), "p_value"] > 0


def test_variance_decomposition_values(rendered):
    var = read_table(rendered, "variance_decomposition")
    alpha = var[(var["model"] == "alpha") & (var["budget"] == 2)].set_index("response")
    ss_cal, ss_alg = 14.0, 0.56  # 7*2*1^2 and 2*0.01*28
    ppl = alpha.loc["log10_avg_perplexity"]
    assert ppl["share_calibration"] == pytest.approx(ss_cal / (ss_cal + ss_alg))
    assert ppl["share_algorithm"] == pytest.approx(ss_alg / (ss_cal + ss_alg))
    assert ppl["share_interaction"] == pytest.approx(0, abs=1e-9)
    assert (ppl["df_calibration"], ppl["df_algorithm"], ppl["df_interaction"]) == (1, 6, 6)
    acc = alpha.loc["avg_accuracy_points"]
    assert (acc["share_calibration"], acc["share_algorithm"], acc["share_interaction"]) == (
        pytest.approx(0, abs=1e-9),
        pytest.approx(0.2),
        pytest.approx(0.8),
    )
    beta = var[var["model"] == "beta"].set_index("response")
    # Only the paper's two calibrations (the ppl_cs170k cross-control stays out); TLM greedy lacks BoolQ.
    assert beta.loc["avg_accuracy_points", "n_calibrations"] == 2
    assert beta.loc["avg_accuracy_points", "n_algorithms"] == 6
    assert beta.loc["log10_avg_perplexity", "n_algorithms"] == 7


def test_range_statistic_values(rendered):
    """§5.2 as the paper measures it, worked out by hand from the synthetic grid (module docstring)."""
    ranges = read_table(rendered, "range_statistic")
    ranges["budget"] = ranges["budget"].astype(str)
    r = ranges.set_index(["model", "budget", "response"])
    # alpha M=2: accuracy |0.02 q| <= 6 points across calibrations; 0.015 * 6 = 9 points across algorithms.
    assert r.loc[("alpha", "2", "avg_accuracy_points"), "shift_calibration"] == pytest.approx(6)
    assert r.loc[("alpha", "2", "avg_accuracy_points"), "shift_algorithm"] == pytest.approx(9)
    # log10 perplexity: bases 1 and 3 (2 orders) vs 0.1 * 6 = 0.6 orders across algorithms.
    assert r.loc[("alpha", "2", "log10_avg_perplexity"), "shift_calibration"] == pytest.approx(2)
    assert r.loc[("alpha", "2", "log10_avg_perplexity"), "shift_algorithm"] == pytest.approx(0.6)
    # beta: TLM greedy has no average accuracy, so q = -3 drops out: 0.015 * 5 = 7.5 points.
    assert r.loc[("beta", "2", "avg_accuracy_points"), "shift_algorithm"] == pytest.approx(7.5)
    assert r.loc[("all", "all", "avg_accuracy_points"), "ratio"] == pytest.approx(6 / 9)


def test_jaccard_within_and_across(rendered):
    pairs = read_table(rendered, "jaccard_pairs")
    alpha2 = pairs[(pairs["model"] == "alpha") & (pairs["budget"] == 2)]
    assert (alpha2["relation"] == "within").sum() == 42
    assert (alpha2.loc[alpha2["relation"] == "across_same_algorithm", "jaccard"] == 0).all()
    summary = read_table(rendered, "jaccard_summary").set_index(["model", "budget", "relation", "calibrations"])
    assert summary.loc[("alpha", 2, "within", "all"), "mean_jaccard"] == pytest.approx((17 + 13) / 42)
    assert summary.loc[("beta", 2, "across_same_algorithm", "all"), "mean_jaccard"] == pytest.approx(1.0)


def test_observations(rendered):
    obs = read_table(rendered, "observations")
    assert list(obs.columns) == [
        "claim",
        "scope",
        "statistic",
        "value",
        "ci_low",
        "ci_high",
        "ci_low_mc_se",
        "ci_high_mc_se",
        "null_value",
        "p_value",
        "null_pass_probability",
        "null_fail_probability",
        "paper_value",
        "verdict",
        "note",
    ]
    verdicts = obs.set_index(["claim", "scope", "statistic"])["verdict"]
    # §5.1 holds for alpha (disjoint sets across calibrations) but not for beta (identical across).
    assert verdicts[(5.1, "alpha M=2", "mean Jaccard within − across calibrations")] == "holds"
    assert verdicts[(5.1, "beta M=2", "mean Jaccard within − across calibrations")] == "does not hold"
    # §5.2: the pooled accuracy ratio 6/9 is the judged one (in the band, or uninformative once its
    # null pass probability is known); the perplexity ratio is descriptive, its claim per condition.
    pooled = obs[(obs["claim"] == 5.2) & (obs["scope"] == "all (max over cells)")]
    ratios = pooled[pooled["statistic"].str.contains("shift ratio")].set_index("statistic")
    accuracy = ratios[ratios.index.str.startswith("accuracy")]
    assert set(accuracy["verdict"]) <= {"holds", "uninformative"}
    assert accuracy["paper_value"].str.contains("0.77").any()
    assert set(ratios.loc[ratios.index.str.startswith("perplexity"), "verdict"]) == {"descriptive"}
    # §5.3: ρ = −1 under ppl_c4 is a descriptive per-cell row over the distinct sets.
    beta = obs[(obs["claim"] == 5.3) & (obs["scope"] == "beta M=2 ppl_c4")]
    assert beta["value"].tolist() == [-1.0] and set(beta["verdict"]) == {"descriptive"}
    # alpha M=3 ppl_c4: every algorithm removed the same set: one distinct set has no ρ.
    alpha3 = obs[(obs["claim"] == 5.3) & (obs["scope"] == "alpha M=3 ppl_c4")]
    assert alpha3["note"].str.contains("1 distinct sets").all() and alpha3["value"].isna().all()
    assert not obs["scope"].str.contains("ppl_cs170k").any()  # the cross-control is never a paper claim
    text = summarise_observations(rendered / "aggregate")
    md = (rendered / "figures" / "tables" / "observations.md").read_text()
    assert "negative ρ means lower perplexity goes with higher accuracy" in md
    assert "## §5.2" in md and "Verdict: **holds**" in md
    body, controls = md.split("## §5.1")[1].split("\n## Random-initialisation controls")
    # summarise_observations has no informative-task input: the render's body adds that section.
    assert text.split("## §5.1")[1] == body.split("## Informative tasks (sensitivity)")[0].rstrip("\n") + "\n"
    assert "Convergence is not a prior artefact" in controls
    comparison = pd.read_csv(rendered / "figures" / "tables" / "paper_comparison.csv")
    assert {"paper_value", "value", "ci_low", "ci_high", "verdict"} <= set(comparison.columns)
    assert (rendered / "figures" / "tables" / "paper_comparison.md").exists()
    for ext in ("csv", "md", "tex"):
        assert (rendered / "figures" / "tables" / f"table6.{ext}").exists()


def test_render_is_byte_identical(rendered, tmp_path):
    assert run_command(["render", "--aggregate", str(rendered / "aggregate"), "--out", str(tmp_path)]) == 0
    first = sorted(p.relative_to(rendered / "figures") for p in (rendered / "figures").rglob("*") if p.is_file())
    second = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert first == second
    for rel in first:
        assert (rendered / "figures" / rel).read_bytes() == (tmp_path / rel).read_bytes(), str(rel)


def test_render_only_and_single_calibration(tmp_path):
    results = write_tree(tmp_path / "results", [("alpha", "ppl_c4", 2)], dense=False)
    assert run_command(["aggregate", "--results", str(results), "--out", str(tmp_path / "agg")]) == 0
    only = tmp_path / "only"
    assert (
        run_command(["render", "--aggregate", str(tmp_path / "agg"), "--out", str(only), "--only", "table3,figure2"])
        == 0
    )
    assert sorted(p.name for p in only.rglob("*") if p.is_file()) == sorted(
        ["environment.json", "figure2.pdf", "figure2.png", "table3.csv", "table3.md", "table3.tex"]
    )  # environment.json: the versions every render records beside its files
    full = tmp_path / "full"
    assert run_command(["render", "--aggregate", str(tmp_path / "agg"), "--out", str(full)]) == 0
    assert "_No results under task-likelihood-margin (TLM) pruning._" in (full / "tables" / "table2.md").read_text()
    assert "not testable" in (full / "tables" / "observations.md").read_text()
    var = pd.read_csv(full / "tables" / "variance_decomposition.csv")
    assert var["share_calibration"].isna().all()  # one calibration: no decomposition
    for n in (1, 2, 3):
        assert (full / f"figure{n}.png").stat().st_size > 0


def test_render_runs_named_steps_and_logs_each(tmp_path, caplog):
    """The render is its list of named steps: the steps an --only serves run, in order, each logged by
    name; the others do not run."""
    import logging

    from depthprune.reporting.render import STEPS, render

    results = write_tree(tmp_path / "results", [("alpha", "ppl_c4", 2)], dense=False)
    assert run_command(["aggregate", "--results", str(results), "--out", str(tmp_path / "agg")]) == 0
    with caplog.at_level(logging.INFO, logger="depthprune.reporting.render"):
        render(tmp_path / "agg", tmp_path / "out", only={"figure2", "table1"})
    logged = [r.getMessage().split(" (")[0].removeprefix("render step ") for r in caplog.records]
    assert [m for m in logged if m in {s.name for s in STEPS}] == ["figure2", "paper tables"]
    assert len({s.name for s in STEPS}) == len(STEPS)


RENDER_SNIPPET = """
import sys
from depthprune.reporting.render import render
render(sys.argv[1], sys.argv[2])
heavy = sorted(m for m in ("torch", "transformers", "lm_eval") if m in sys.modules)
assert not heavy, heavy
"""


def test_render_imports_neither_torch_nor_transformers(rendered, tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", RENDER_SNIPPET, str(rendered / "aggregate"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_depthprune_render_command_is_light(rendered, tmp_path):
    """The real entry point: building the full parser must not pull torch in either."""
    from depthprune import cli

    for module in cli.COMMANDS:
        try:
            importlib.import_module(module)
        except ImportError as err:
            pytest.skip(f"{module} not importable yet ({err}); the full CLI cannot be built")
    snippet = (
        "import sys; from depthprune.cli import main; rc = main(sys.argv[1:]); "
        "heavy = [m for m in ('torch', 'transformers') if m in sys.modules]; "
        "sys.exit(rc or (3 if heavy else 0))"
    )
    result = subprocess.run(
        [sys.executable, "-c", snippet, "render", "--aggregate", str(rendered / "aggregate"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"exit {result.returncode} (3: torch/transformers imported)\n{result.stderr}"


def test_seeds_as_replicates(tmp_path):
    """Two seeds: the dense model joins each seed, the spread and set stability across seeds are the
    hand-computed ones, and each claim's verdict is given per seed and for every seed."""
    grid = [("alpha", "ppl_c4", 2), ("alpha", "tlm_cs170k", 2)]
    results = write_tree(tmp_path / "results", grid, seed=0)
    write_tree(results, grid, seed=1)
    assert run_command(["aggregate", "--results", str(results), "--out", str(tmp_path / "agg")]) == 0
    summary = pd.read_parquet(tmp_path / "agg" / "summary.parquet")
    assert sorted(summary["seed"].unique()) == [0, 1]
    assert len(summary) == 2 * (2 * 7 + 1)  # each seed: 14 runs and the dense model
    out = tmp_path / "figures"
    assert run_command(["render", "--aggregate", str(tmp_path / "agg"), "--out", str(out)]) == 0
    spread = pd.read_csv(out / "tables" / "seeds_spread.csv").set_index(["calibration", "algorithm"])
    assert spread.loc[("ppl_c4", "greedy"), "loss_mean"] == pytest.approx(2.5)  # 1 + 1 and 1 + 1 + 1
    assert spread.loc[("ppl_c4", "greedy"), "loss_std"] == pytest.approx(math.sqrt(0.5))
    assert spread.loc[("ppl_c4", "greedy"), "avg_accuracy_std"] == pytest.approx(0)
    stability = pd.read_csv(out / "tables" / "seeds_set_stability.csv").set_index(["calibration", "algorithm"])
    assert stability.loc[("ppl_c4", "cbo"), "mean_jaccard_across_seeds"] == pytest.approx(1 / 3)  # {5,7} vs {5,8}
    assert stability.loc[("ppl_c4", "greedy"), "mean_jaccard_across_seeds"] == 1.0
    verdicts = pd.read_csv(out / "tables" / "seeds_verdicts.csv", dtype=str)
    assert set(verdicts["seed"]) == {"0", "1", "every seed"}
    every = verdicts[verdicts["seed"] == "every seed"].set_index("claim")["verdict"]
    assert every["5.1"] == "holds"  # disjoint sets across calibrations in both seeds
    assert "## Across seeds" in (out / "tables" / "observations.md").read_text()
    table3 = pd.read_csv(out / "tables" / "table3.csv")
    assert len(table3) == 1 + 7  # the first seed only: dense + seven algorithms
    # TLM − perplexity per seed and across seeds: 0.02 q per algorithm, q = -3..3, so a mean of 0
    two_stage = pd.read_csv(out / "tables" / "seeds_two_stage.csv", dtype={"seed": str})
    gap = two_stage[two_stage["statistic"].str.startswith("TLM − perplexity")]
    assert list(gap["seed"]) == ["0", "1", "two-stage"]
    assert gap["estimate"].tolist() == pytest.approx([0.0, 0.0, 0.0], abs=1e-9)
    assert gap.iloc[-1]["n_seeds"] == 2
    # §5.2 per seed and two-stage: a calibration shift per algorithm, an algorithm spread per calibration
    shifts = two_stage[two_stage["statistic"].str.startswith("calibration shift") & (two_stage["seed"] == "two-stage")]
    assert sorted(shifts["condition"]) == sorted(ALGORITHMS)
    assert (out / "seeds.png").is_file() and (out / "seeds.pdf").is_file()
    # The §10 decision: §5.1 holds across seeds (disjoint sets across calibrations in both seeds,
    # p over 2^14 label swaps), and every claim row counts the seeds whose own verdict holds.
    claims = pd.read_csv(out / "tables" / "seeds_claims.csv")
    from depthprune.io import parse_layers
    from depthprune.reporting.statistics.nulls import within_minus_across

    selections = pd.read_parquet(tmp_path / "agg" / "selections.parquet")
    by_seed = [
        within_minus_across({(r.algorithm, r.calibration): parse_layers(r.removed) for r in group.itertuples()})
        for _, group in selections[selections["algorithm"] != "dense"].groupby("seed")
    ]
    sets = claims[claims["statistic"].str.contains("within − across")].iloc[0]
    assert sets["estimate"] == pytest.approx(np.mean(by_seed)) and sets["verdict"] == "holds"
    claim = claims[(claims["statistic"] == "claim") & (claims["claim"] == "5.1")].iloc[0]
    assert claim["seeds_holding"] == "2 of 2" and claim["verdict"] == "holds"
    assert "## Across seeds: the decision rule" in (out / "tables" / "observations.md").read_text()


def test_random_init_controls_get_rows_but_stay_out_of_the_paper_statistics(tmp_path):
    """ga_random / bo_random (and CBO's exact-pairs control): rows in Tables 1-4 and the figures,
    tables/controls.csv and their own section in observations.md; Tables 5-6 and the Jaccard
    analyses keep the paper's seven."""
    import shutil

    results = write_tree(tmp_path / "results", [("alpha", "ppl_c4", 2), ("alpha", "tlm_cs170k", 2)])
    for calibration in ("ppl_c4", "tlm_cs170k"):
        cell = results / "alpha" / calibration / "M2"
        for control, guided, removed in (
            ("ga_random", "ga", None),
            ("bo_random", "bo", [9, 10]),
            ("cbo_ablation", "cbo", [3, 4]),
        ):
            shutil.copytree(cell / guided, cell / control)
            selection = json.loads((cell / control / "selection.json").read_text())
            selection["algorithm"] = control
            selection["removed"] = removed or selection["removed"]
            (cell / control / "selection.json").write_text(json.dumps(selection))
            metrics = pd.read_csv(cell / control / "metrics.csv")
            metrics["algorithm"] = control
            metrics["removed"] = " ".join(map(str, selection["removed"]))
            metrics.to_csv(cell / control / "metrics.csv", index=False)
    assert run_command(["aggregate", "--results", str(results), "--out", str(tmp_path / "agg")]) == 0
    out = tmp_path / "figures"
    assert run_command(["render", "--aggregate", str(tmp_path / "agg"), "--out", str(out)]) == 0
    for table in ("table1", "table3", "table4"):
        text = (out / "tables" / f"{table}.md").read_text()
        assert "random" in text.lower(), table  # the controls have rows
        assert "CBO (exact pairs)" in text, table
    pairs = pd.read_csv(out / "tables" / "jaccard_pairs.csv")
    assert not pairs.astype(str).apply(lambda c: c.str.contains("_random|cbo_ablation")).any().any()
    table5 = (out / "tables" / "table5.md").read_text() + (out / "tables" / "table6.md").read_text()
    assert "random" not in table5.lower() and "exact pairs" not in table5
    controls = pd.read_csv(out / "tables" / "controls.csv")
    assert len(controls) == 4 and set(controls["control"]) == {"ga_random", "bo_random"}
    assert controls.set_index(["calibration", "control"])["identical"].to_dict() == {
        ("ppl_c4", "bo_random"): False,
        ("ppl_c4", "ga_random"): True,
        ("tlm_cs170k", "bo_random"): False,
        ("tlm_cs170k", "ga_random"): True,
    }
    observations = (out / "tables" / "observations.md").read_text()
    assert "## Random-initialisation controls" in observations and "Convergence is not a prior artefact" in observations

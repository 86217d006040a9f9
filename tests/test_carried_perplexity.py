"""An evaluation-only study's aggregate carries its source's perplexities (docs/method.md §11):
reporting/carried_perplexity.py, `depthprune aggregate --perplexity-from`, config
`source_study.perplexity`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from depthprune import workflow as wf
from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS
from depthprune.reporting.carried_perplexity import CARRIED_PERPLEXITY_RECORD, carry_perplexity
from test_cross_control import ALGORITHMS, BUDGET, build_aggregate, reporting_cli_main, study_aggregate, write_run

CALIBRATIONS = ["ppl_c4", "tlm_cs170k"]


def drop_perplexity(run: Path) -> None:
    """A rescore run: its zero-shot tasks only."""
    samples = pd.read_parquet(run / "samples.parquet")
    samples[~samples["benchmark"].isin(PERPLEXITY_BENCHMARKS)].to_parquet(run / "samples.parquet")
    metrics = pd.read_csv(run / "metrics.csv")
    metrics[~metrics["benchmark"].isin(PERPLEXITY_BENCHMARKS)].to_csv(run / "metrics.csv", index=False)


def write_random_set(root: Path, scratch: Path, removed: list[int]) -> None:
    """A random-set control run (calibration none), its files made as a search's and relabelled."""
    write_run(scratch, "ppl_c4", "one_shot")
    run = root / "alpha" / "none" / "seed0" / f"M{BUDGET}" / "random_set_00"
    run.parent.mkdir(parents=True)
    (scratch / "alpha" / "ppl_c4" / "seed0" / f"M{BUDGET}" / "one_shot").rename(run)
    labels = {"calibration": "none", "algorithm": "random_set_00", "removed": " ".join(map(str, removed))}
    pd.read_parquet(run / "samples.parquet").assign(**labels).to_parquet(run / "samples.parquet")
    pd.read_csv(run / "metrics.csv").assign(**labels).to_csv(run / "metrics.csv", index=False)
    selection = json.loads((run / "selection.json").read_text())
    selection.update(calibration="none", algorithm="random_set_00", removed=removed)
    (run / "selection.json").write_text(json.dumps(selection))
    drop_perplexity(run)


@pytest.fixture
def source_and_study(tmp_path):
    source = build_aggregate(tmp_path / "source_results", CALIBRATIONS, tmp_path / "source")
    root = tmp_path / "study_results"
    for calibration in CALIBRATIONS:
        for algorithm in ALGORITHMS:
            write_run(root, calibration, algorithm)
    write_run(root, "none", "dense")
    for run in root.glob("**/metrics.csv"):
        drop_perplexity(run.parent)
    write_random_set(root, tmp_path / "scratch", [3, 4])
    return source, root


def test_the_study_gets_its_sources_perplexities_and_keeps_its_accuracies(source_and_study, tmp_path):
    source, root = source_and_study
    out = tmp_path / "carried"
    argv = ["aggregate", "--results", str(root), "--perplexity-from", str(source), "--out", str(out)]
    assert reporting_cli_main(argv) == 0
    summary = pd.read_parquet(out / "summary.parquet")
    theirs = pd.read_parquet(source / "summary.parquet")
    key = ["model", "calibration", "budget", "algorithm", "seed"]
    joined = summary.merge(theirs, on=key, suffixes=("", "_source"))
    assert len(joined) == 2 * len(ALGORITHMS) + 1  # every search and the dense model
    for column in ("ppl_wikitext2", "ppl_c4", "ppl_lambada_openai", "avg_perplexity"):
        assert joined[column].tolist() == pytest.approx(joined[f"{column}_source"].tolist())
    assert (joined["avg_accuracy"] == joined["avg_accuracy_source"]).all()  # the same six tasks here
    random_row = summary[summary["algorithm"] == "random_set_00"].iloc[0]
    assert math.isnan(random_row["avg_perplexity"]) and not math.isnan(random_row["avg_accuracy"])
    samples = pd.read_parquet(out / "samples.parquet")
    carried = samples[samples["benchmark"].isin(PERPLEXITY_BENCHMARKS)]
    assert "random_set_00" not in set(carried["algorithm"])
    assert carried.groupby(key).ngroups == 2 * len(ALGORITHMS) + 1
    record = json.loads((out / CARRIED_PERPLEXITY_RECORD).read_text())
    assert record["source"] == str(source) and record["runs_carried"] == 2 * len(ALGORITHMS) + 1
    assert record["runs_without"] == [f"none/seed0/M{BUDGET}/random_set_00"]
    assert record["units_per_benchmark"] == {"c4": 4, "lambada_openai": 100, "wikitext2": 4}


def test_without_the_option_the_study_has_no_perplexity(source_and_study):
    _, root = source_and_study
    agg, _ = study_aggregate(root)
    assert agg.summary["avg_perplexity"].isna().all()


def test_refused_when_a_set_differs_a_run_is_missing_or_the_study_scores_perplexity(source_and_study):
    source, root = source_and_study
    agg, samples = study_aggregate(root)
    moved = agg.summary.copy()
    moved.loc[moved["algorithm"] == "greedy", "removed"] = "7 8"
    with pytest.raises(ValueError, match=r"source_study.perplexity .*greedy removes \[1 2\], this study's \[7 8\]"):
        carry_perplexity(agg.__class__(agg.selections, agg.metrics, moved), samples, source)
    extra = pd.concat([agg.summary, agg.summary.iloc[[1]].assign(algorithm="ga_random")], ignore_index=True)
    with pytest.raises(ValueError, match=r"holds no run alpha \w+ seed 0 M=2 ga_random \(1 runs missing\)"):
        carry_perplexity(agg.__class__(agg.selections, agg.metrics, extra), samples, source)
    own = pd.concat([agg.metrics, agg.metrics.iloc[[0]].assign(benchmark="wikitext2")], ignore_index=True)
    with pytest.raises(ValueError, match="evaluates wikitext2 itself"):
        carry_perplexity(agg.__class__(agg.selections, own, agg.summary), samples, source)
    with pytest.raises(FileNotFoundError, match="per-window scores are missing"):
        carry_perplexity(agg, samples, source.parent / "nowhere")


def test_config_key_passes_the_source_and_refuses_own_perplexity(tmp_path):
    config = {"source_study": {"runs": "results/seeds_default/runs", "perplexity": "results/seeds_default/aggregate"}}
    assert wf.source_perplexity_args(config) == "--perplexity-from results/seeds_default/aggregate"
    assert wf.source_perplexity_inputs(config)[-1] == "results/seeds_default/aggregate/samples.parquet"
    assert wf.source_perplexity_args({"source_study": {"runs": "x"}}) == "" == wf.source_perplexity_args({})
    study = {
        **config,
        "results_dir": str(tmp_path / "results"),
        "evaluation": {"tasks": ["wikitext2", "piqa"]},
        "models": [],
        "seeds": [],
        "algorithms": [],
    }
    study["source_study"] = {"runs": str(tmp_path), "perplexity": str(tmp_path)}
    with pytest.raises(ValueError, match=r"source_study.perplexity carries the source's wikitext2"):
        wf.check_source_study(study)
    study["evaluation"] = {"tasks": ["piqa"]}
    with pytest.raises(ValueError, match=r"source_study.perplexity .*: missing .*selections.parquet"):
        wf.check_source_study(study)

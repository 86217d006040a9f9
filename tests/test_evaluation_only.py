"""Evaluation-only studies, the random-set control and per-task document counts (issue 58).

The dry runs plan an evaluation-only study on the smoke preset, its sets taken from a temporary
copy of a smoke study's runs (selection.json files in the results layout); nothing is computed.
"""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from depthprune.evaluation_only import (
    allowed_blocks,
    draw_random_sets,
    random_set_names,
    selection_from_source,
    source_file,
)
from test_workflow import REPO, SEVEN, job_counts, run_snakemake

SMOKE = ("--configfile", str(REPO / "config.yaml"), str(REPO / "config" / "smoke.yaml"))
SMOKE_BUDGETS = (2, 3)
SMOKE_CALIBRATIONS = ("ppl_c4", "tlm_cs170k")


# --------------------------------------------------------------------------- the random-set draw


def test_random_sets_are_distinct_allowed_and_reproducible():
    allowed = allowed_blocks(8, (0, 7))
    assert allowed == [1, 2, 3, 4, 5, 6]
    sets = draw_random_sets(allowed, 3, 8, seed=58, study_seed=0)
    assert len(sets) == len(set(sets)) == 8
    assert all(len(s) == 3 and set(s) <= set(allowed) and list(s) == sorted(s) for s in sets)
    assert sets == draw_random_sets(allowed, 3, 8, seed=58, study_seed=0)  # seeded: the same draw
    assert sets != draw_random_sets(allowed, 3, 8, seed=59, study_seed=0)  # another config seed
    assert sets != draw_random_sets(allowed, 3, 8, seed=58, study_seed=1)  # another study seed
    # every subset once when the count is all of them; one more is refused, naming the key
    assert len(set(draw_random_sets(allowed, 2, 15, seed=1, study_seed=0))) == math.comb(6, 2)
    with pytest.raises(ValueError, match=r"random_sets.count 16: only C\(6, 2\) = 15"):
        draw_random_sets(allowed, 2, 16, seed=1, study_seed=0)


def test_random_sets_are_uniform_over_the_allowed_subsets():
    """Each draw is uniform over the C(6, 2) = 15 subsets: first draws of 3000 seeds, chi-square."""
    from scipy.stats import chisquare

    allowed = allowed_blocks(8, (0, 7))
    firsts = Counter(draw_random_sets(allowed, 2, 1, seed=seed, study_seed=0)[0] for seed in range(3000))
    subsets = list(itertools.combinations(allowed, 2))
    assert set(firsts) == set(subsets)
    assert chisquare([firsts[s] for s in subsets]).pvalue > 1e-3
    # the k-th of several distinct draws is uniform too (redrawing a repeat keeps the sample uniform)
    lasts = Counter(draw_random_sets(allowed, 2, 5, seed=seed, study_seed=3)[-1] for seed in range(3000))
    assert chisquare([lasts[s] for s in subsets]).pvalue > 1e-3


def test_random_sets_command_writes_selections(tmp_path):
    from depthprune.cli import main

    outs = [str(tmp_path / name / "selection.json") for name in random_set_names(8)]
    argv = ["random-sets", "--model-name", "tiny", "--n-layers", "8", "--protected", "0 7", "--budget", "3"]
    argv += ["--count", "8", "--draw-seed", "58", "--seed", "2"] + [a for out in outs for a in ("--out", out)]
    assert main(argv) == 0
    written = [json.loads(Path(out).read_text()) for out in outs]
    assert [w["algorithm"] for w in written] == [f"random_set_{i:02d}" for i in range(8)]
    assert {w["calibration"] for w in written} == {"none"} and {w["seed"] for w in written} == {2}
    expected = draw_random_sets([1, 2, 3, 4, 5, 6], 3, 8, seed=58, study_seed=2)
    assert [tuple(w["removed"]) for w in written] == expected


# --------------------------------------------------------------------------- sets from a source study


def test_source_set_from_a_selection_or_an_aggregate_row(tmp_path):
    aggregate = REPO / "results" / "aggregate"  # the committed default study (seed 0)
    source = {"runs": str(tmp_path / "runs"), "aggregate": str(aggregate)}
    path = source_file(source, "smollm2-135m", "ppl_c4", 0, 7, "beam")
    assert path == str(aggregate / "selections.csv")
    selection = selection_from_source(path, "smollm2-135m", "ppl_c4", 0, 7, "beam")
    assert selection["removed"] == [3, 4, 5, 16, 17, 18, 26] and selection["seed"] == 0
    assert selection["source_study"]["row_source"] == "results/smollm2-135m/ppl_c4/seed0/M7/beam/selection.json"
    assert source_file(source, "smollm2-135m", "ppl_c4", 1, 7, "beam") is None  # seed 1 is not in it
    run = tmp_path / "runs" / "smollm2-135m" / "ppl_c4" / "seed1" / "M7" / "beam"
    run.mkdir(parents=True)
    labels = {"model": "smollm2-135m", "calibration": "ppl_c4", "budget": 7, "algorithm": "beam", "seed": 1}
    (run / "selection.json").write_text(json.dumps({**labels, "removed": [1, 2, 3, 4, 5, 6, 7], "n_layers": 30}))
    path = source_file(source, "smollm2-135m", "ppl_c4", 1, 7, "beam")
    assert path == str(run / "selection.json")
    assert selection_from_source(path, "smollm2-135m", "ppl_c4", 1, 7, "beam")["source_study"] == {"selection": path}
    with pytest.raises(ValueError, match="differ from the run's"):
        selection_from_source(path, "smollm2-135m", "tlm_cs170k", 1, 7, "beam")


# --------------------------------------------------------------------------- per-task document counts


def test_limit_per_task_overrides_limit_for_its_tasks():
    from depthprune.evaluation.benchmarks import EvalSettings, parse_limit_per_task

    settings = EvalSettings(benchmarks=("hellaswag", "piqa"), limit=8, limit_per_task={"hellaswag": 100})
    assert (settings.task_limit("hellaswag"), settings.task_limit("piqa")) == (100, 8)
    assert parse_limit_per_task(["hellaswag=100,piqa=7"]) == {"hellaswag": 100, "piqa": 7}
    with pytest.raises(ValueError, match="not an lm-eval task of --tasks"):
        EvalSettings(benchmarks=("piqa",), limit_per_task={"hellaswag": 100})
    with pytest.raises(ValueError, match="expected TASK=N"):
        parse_limit_per_task(["wikitext2=5"])


def test_plan_prices_limit_per_task():
    from depthprune.plan import evaluation_tokens

    def tokens(per_task):
        config = {"evaluation": {"tasks": ["hellaswag", "piqa"], "limit": 100, "limit_per_task": per_task,
                                 "ppl_seq_len": 2048}}  # fmt: skip
        return evaluation_tokens(config, tokenizer=None, data_dir=None)

    same, more = tokens({}), tokens({"hellaswag": 1000})
    assert more["piqa"] == same["piqa"]
    assert more["hellaswag"][0] == pytest.approx(10 * same["hellaswag"][0], rel=1e-3)


# --------------------------------------------------------------------------- the workflow


def write_smoke_runs(root: Path, seeds=(0,)) -> Path:
    """A smoke study's runs (selection.json of every search) under root/runs."""
    runs = root / "runs"
    for calibration, seed, budget, algorithm in itertools.product(SMOKE_CALIBRATIONS, seeds, SMOKE_BUDGETS, SEVEN):
        folder = runs / "tiny" / calibration / f"seed{seed}" / f"M{budget}" / algorithm
        folder.mkdir(parents=True)
        labels = {"model": "tiny", "calibration": calibration, "budget": budget, "algorithm": algorithm}
        removed = list(range(1, budget + 1))
        (folder / "selection.json").write_text(json.dumps({**labels, "removed": removed, "n_layers": 8, "seed": seed}))
    return runs


def test_evaluation_only_study_plans_no_prior_or_search(tmp_path, data_dir):
    runs = write_smoke_runs(tmp_path)
    config = [f"data_dir={data_dir}", f"source_study={{runs: {runs}}}", "random_sets={count: 8, seed: 58}"]
    proc = run_snakemake("-n", *SMOKE, "--config", *config, workdir=tmp_path / "work")
    counts = job_counts(proc.stdout)
    assert "prior" not in counts and "search" not in counts, counts
    assert counts["source_selection"] == len(SMOKE_CALIBRATIONS) * len(SMOKE_BUDGETS) * len(SEVEN)
    assert counts["random_sets"] == counts["evaluate_random_sets"] == len(SMOKE_BUDGETS)
    for rule in ("evaluate_pass", "evaluate_selections", "evaluate_dense", "aggregate_tables", "render"):
        assert counts[rule] >= 1, rule
    assert f"removed sets from source_study (runs {runs})" in proc.stderr
    # the same study with its searches: prior and search jobs, no copies
    counts = job_counts(run_snakemake("-n", *SMOKE, "--config", config[0], workdir=tmp_path / "work").stdout)
    assert counts["search"] == 28 and "source_selection" not in counts


def test_evaluation_only_study_refusals_name_the_key(tmp_path, data_dir):
    runs = write_smoke_runs(tmp_path)
    source = f"source_study={{runs: {runs}}}"

    def refusal(*config):
        proc = run_snakemake("-n", *SMOKE, "--config", f"data_dir={data_dir}", *config, workdir=tmp_path, check=False)
        assert proc.returncode != 0
        return proc.stdout + proc.stderr

    # a run the source does not hold
    assert "source_study has no removed set for tiny/ppl_c4/seed1/M2/one_shot" in refusal(source, "seeds=[0,1]")
    # the study's results folder is its source: it would write over it
    assert "is this study's own results_dir" in refusal(source, f"results_dir={runs}")
    # rows scored on other documents (the committed aggregate: 116 per task) never share a table
    base = f"base_study={{aggregate: {REPO / 'results' / 'aggregate'}, calibrations: [ppl_c4], seeds: [5]}}"
    text = refusal(source, base)
    assert "scored lambada_openai on 116 documents, this study on 8" in text
    assert "never mixed in one table" in text
    # limit_per_task naming a task the study does not evaluate
    assert "limit_per_task names hellaswag" in refusal(
        source, "evaluation={tasks: [piqa], limit_per_task: {hellaswag: 10}}"
    )


def test_aggregate_refuses_evaluations_of_different_settings(tmp_path):
    from depthprune.reporting.provenance import check_evaluation_settings

    def evaluation(name, limit):
        folder = tmp_path / name
        folder.mkdir()
        settings = {"benchmarks": ["piqa"], "limit": limit, "ppl_seq_len": 256}
        (folder / "lm_eval.json").write_text(json.dumps({"depthprune": {"key": {"settings": settings}}}))
        return folder / "metrics.csv"

    same = [evaluation("a", 8), evaluation("b", 8)]
    check_evaluation_settings(same)  # one setting: accepted
    with pytest.raises(ValueError, match=r"limit=8.*limit=16|limit=16.*limit=8") as err:
        check_evaluation_settings([*same, evaluation("c", 16)])
    assert "never mixed in one table" in str(err.value) and "c/lm_eval.json" in str(err.value)


def test_rescore_preset_plans_evaluations_only(tmp_path, data_dir):
    """config/rescore_informative.yaml: the committed runs and aggregate are its source (from the repo)."""
    args = ["-n", "--configfile", "config.yaml", "config/rescore_informative.yaml", "--config", f"data_dir={data_dir}"]
    counts = job_counts(run_snakemake(*args).stdout)
    assert "prior" not in counts and "search" not in counts, counts
    assert counts["source_selection"] == 4 * 2 * 7  # seeds x calibrations x the seven searches
    assert counts["random_sets"] == 4 and counts["evaluate_pass"] == 4


def test_limit_per_task_enters_the_cache_key_only_when_set():
    from depthprune.evaluation.benchmarks import EvalSettings
    from depthprune.evaluation.run import cache_payload

    base = EvalSettings(benchmarks=("piqa",), limit=2)
    assert "limit_per_task" not in cache_payload({}, (1,), base)["settings"]  # keys of earlier studies stay
    per_task = cache_payload({}, (1,), base.replace(limit_per_task={"piqa": 3}))["settings"]
    assert per_task["limit_per_task"] == {"piqa": 3}


def test_evaluate_scores_each_task_on_its_own_document_count(tiny_model_dir, data_dir, tmp_path):
    """`depthprune evaluate --limit-per-task`: lm-eval scores that many documents of the task named."""
    import pandas as pd

    from depthprune.cli import main

    argv = ["evaluate", "--model", str(tiny_model_dir), "--name", "tiny", "--model-cache-dir", str(tmp_path / "m")]
    argv += ["--data-dir", str(data_dir), "--tasks", "piqa,arc_easy", "--limit", "2", "--limit-per-task", "piqa=3"]
    argv += ["--batch-size", "4", "--no-eval-cache", "--out-metrics", str(tmp_path / "metrics.csv")]
    assert main(argv) == 0
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    assert metrics.groupby("benchmark")["n"].max().to_dict() == {"arc_easy": 2, "piqa": 3}


def test_random_sets_are_controls_in_the_render():
    """The draws never enter the statistics behind the paper's claims, nor Figure 1's cuts."""
    import pandas as pd

    from depthprune.reporting.render import paper_only
    from depthprune.reporting.style import algorithm_marker, algorithm_name, is_control

    frame = pd.DataFrame({"algorithm": ["greedy", "dense", "ga_random", "random_set_00", "random_set_07"]})
    assert list(paper_only(frame)["algorithm"]) == ["greedy", "dense"]
    assert is_control("random_set_03") and not is_control("greedy") and not is_control("random_sets")
    assert algorithm_name("random_set_03") == "Random set 03"
    assert algorithm_marker("random_set_00") == algorithm_marker("random_set_07")

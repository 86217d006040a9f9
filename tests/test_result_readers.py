"""Broken result files are refused where they are read (issue 55): a CSV cut mid-row or at a line
boundary, a Parquet file cut short, CSV and Parquet twins that disagree, a run whose metrics lack a
benchmark its evaluation named, and a results page asked for a study folder that holds none. Each is
one line naming the file, exit 2, and nothing written; every committed result file is accepted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from depthprune.cli import main
from depthprune.reporting.aggregate import load_aggregate, load_samples, read_metrics, read_selection
from depthprune.results_schema import (
    AGGREGATE_SUMMARY,
    AGGREGATE_TABLE_SCHEMAS,
    RUN_METRICS,
    RUN_SAMPLES,
    check_csv,
    read_csv,
    read_parquet,
    read_prior_json,
    read_report_rows,
)

REPO = Path(__file__).resolve().parents[1]
RUNS = REPO / "results" / "seeds_default" / "runs" / "smollm2-135m"
ONE_RUN = RUNS / "ppl_c4" / "seed1" / "M7" / "beam"


def errors(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if "error:" in line]


def small_study(tmp_path: Path) -> Path:
    """One search run and the dense model (with the lm_eval.json its evaluation wrote) of the
    committed multi-seed study, in the Snakemake layout."""
    root = tmp_path / "results"
    shutil.copytree(ONE_RUN, root / "smollm2-135m" / "ppl_c4" / "seed1" / "M7" / "beam")
    shutil.copytree(RUNS / "dense", root / "smollm2-135m" / "dense")
    return root


def aggregate(root: Path, out: Path) -> int:
    return main(["aggregate", "--results", str(root), "--out", str(out)])


def test_the_small_study_aggregates(tmp_path):
    """The fixture the refusals below damage is itself accepted."""
    assert aggregate(small_study(tmp_path), tmp_path / "aggregate") == 0
    assert (tmp_path / "aggregate" / "summary.csv").is_file()


def test_run_metrics_cut_mid_row_is_refused_by_aggregate(tmp_path, capsys):
    """The issue's probe: the file cut inside a row's benchmark ("arc" of arc_challenge) gave a NaN
    benchmark "arc" and lost the run's last rows, exit 0."""
    root = small_study(tmp_path)
    path = root / "smollm2-135m" / "ppl_c4" / "seed1" / "M7" / "beam" / "metrics.csv"
    text = path.read_text()
    path.write_text(text[: text.index(",arc_challenge,acc_norm") + len(",arc")])
    assert aggregate(root, tmp_path / "aggregate") == 2
    (line,) = errors(capsys)
    assert f"{path}: cut off mid-row" in line
    assert not (tmp_path / "aggregate").exists()


def test_run_metrics_with_a_short_row_is_refused(tmp_path):
    path = tmp_path / "metrics.csv"
    lines = (ONE_RUN / "metrics.csv").read_text().splitlines(keepends=True)
    lines[3] = lines[3].rsplit(",", 2)[0] + "\n"  # two fields gone, newline kept
    path.write_text("".join(lines))
    with pytest.raises(ValueError, match=f"{path}: line 4 has 9 fields, the header 11"):
        read_metrics(path)


def test_run_metrics_without_a_number_is_refused(tmp_path):
    path = tmp_path / "metrics.csv"
    lines = (ONE_RUN / "metrics.csv").read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    row = lines[2].rstrip("\n").split(",")
    row[header.index("value")] = ""
    lines[2] = ",".join(row) + "\n"
    path.write_text("".join(lines))
    with pytest.raises(ValueError, match=f"{path}: line 3: value is '', not a number"):
        check_csv(path, RUN_METRICS)


def test_run_missing_a_task_its_settings_name_is_refused(tmp_path, capsys):
    """The dense metrics.csv cut at a line boundary (its boolq rows gone): every line is complete,
    but its lm_eval.json names boolq among the evaluated benchmarks."""
    root = small_study(tmp_path)
    path = root / "smollm2-135m" / "dense" / "metrics.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if ",boolq," not in line))
    assert aggregate(root, tmp_path / "aggregate") == 2
    (line,) = errors(capsys)
    assert f"{path}: lacks boolq, which the evaluation settings (lm_eval.json beside it) name" in line


def test_run_without_its_own_record_is_judged_by_its_models_other_runs(tmp_path, capsys):
    """The committed runs keep no lm_eval.json: a search run's metrics.csv cut at a line boundary is
    judged by the benchmarks the dense model's evaluation of the same study recorded."""
    root = small_study(tmp_path)
    path = root / "smollm2-135m" / "ppl_c4" / "seed1" / "M7" / "beam" / "metrics.csv"
    assert not path.with_name("lm_eval.json").exists()
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-4]))  # its last four rows gone, every line complete
    assert aggregate(root, tmp_path / "aggregate") == 2
    (line,) = errors(capsys)
    raw = root / "smollm2-135m" / "dense" / "lm_eval.json"
    assert f"{path}: lacks arc_challenge acc_norm, piqa, boolq, which the evaluation settings ({raw}, of" in line


def test_run_missing_the_headline_metric_its_settings_name_is_refused(tmp_path):
    root = small_study(tmp_path)
    path = root / "smollm2-135m" / "dense" / "metrics.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if ",piqa,acc_norm," not in line))
    with pytest.raises(ValueError, match=f"{path}: lacks piqa acc_norm"):
        read_metrics(path)


def test_cut_run_samples_are_refused(tmp_path, capsys):
    root = small_study(tmp_path)
    path = root / "smollm2-135m" / "ppl_c4" / "seed1" / "M7" / "beam" / "samples.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    assert aggregate(root, tmp_path / "aggregate") == 2
    (line,) = errors(capsys)
    assert f"{path}: not a readable Parquet file" in line


def test_cut_selection_json_is_refused(tmp_path, capsys):
    root = small_study(tmp_path)
    path = root / "smollm2-135m" / "ppl_c4" / "seed1" / "M7" / "beam" / "selection.json"
    path.write_text(path.read_text()[:200])
    assert aggregate(root, tmp_path / "aggregate") == 2
    (line,) = errors(capsys)
    assert f"{path}: not valid JSON" in line


def test_selection_with_a_budget_as_text_is_refused(tmp_path):
    path = tmp_path / "selection.json"
    path.write_text((ONE_RUN / "selection.json").read_text().replace('"budget": 7', '"budget": "7"'))
    with pytest.raises(ValueError, match=f"{path}: selection.json 'budget' must be an integer"):
        read_selection(path)


def test_prior_with_scores_cut_short_is_refused(tmp_path):
    import json

    prior = json.loads(next(RUNS.rglob("prior.json")).read_text())
    prior["scores"] = prior["scores"][:-1]
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(prior))
    with pytest.raises(ValueError, match=f'{path}: 29 "scores" for "n_layers" 30'):
        read_prior_json(path)


@pytest.fixture
def committed_aggregate(tmp_path) -> Path:
    aggregate_dir = tmp_path / "aggregate"
    shutil.copytree(REPO / "results" / "aggregate", aggregate_dir)
    return aggregate_dir


def render(aggregate_dir: Path, out: Path) -> int:
    argv = ["render", "--aggregate", str(aggregate_dir), "--out", str(out)]
    return main([*argv, "--only", "table1", "--bootstrap-resamples", "10"])


def test_render_refuses_a_truncated_aggregate_metrics_csv(committed_aggregate, tmp_path, capsys):
    """The issue's probe: the render reads the selections and the summary only, so a cut metrics.csv
    passed it; every table of the folder is now checked."""
    path = committed_aggregate / "metrics.csv"
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:40]))
    assert render(committed_aggregate, tmp_path / "figures") == 2
    (line,) = errors(capsys)
    assert f"{path}: differs from its twin metrics.parquet" in line
    assert not (tmp_path / "figures").exists()


def test_render_refuses_a_cut_aggregate_parquet(committed_aggregate, tmp_path, capsys):
    path = committed_aggregate / "metrics.parquet"
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    assert render(committed_aggregate, tmp_path / "figures") == 2
    (line,) = errors(capsys)
    assert f"{path}: not a readable Parquet file" in line


def test_render_refuses_a_cut_aggregate_csv_without_its_parquet(committed_aggregate, tmp_path, capsys):
    (committed_aggregate / "metrics.parquet").unlink()
    path = committed_aggregate / "metrics.csv"
    path.write_text(path.read_text()[:-30])
    assert render(committed_aggregate, tmp_path / "figures") == 2
    (line,) = errors(capsys)
    assert f"{path}: cut off mid-row" in line


def test_calibration_size_refuses_a_summary_csv_that_differs_from_its_parquet(committed_aggregate, tmp_path, capsys):
    """calibration-size reads summary.csv: its Parquet twin must say the same."""
    path = committed_aggregate / "summary.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))  # one summary row fewer, every line complete
    with pytest.raises(ValueError, match=f"{path}: differs from its twin summary.parquet"):
        read_csv(path, AGGREGATE_SUMMARY)
    argv = ["calibration-size", "--aggregate", str(committed_aggregate), "--out", str(tmp_path / "figures")]
    assert main(argv) == 2
    assert f"{path}: differs from its twin summary.parquet" in errors(capsys)[0]


def test_aggregate_parquet_with_nan_where_a_number_is_required_is_refused(committed_aggregate):
    import pandas as pd

    path = committed_aggregate / "metrics.parquet"
    frame = pd.read_parquet(path)
    frame.loc[3, "value"] = float("nan")
    frame.to_parquet(path, index=False)
    (committed_aggregate / "metrics.csv").write_text(frame.to_csv(index=False))  # twins agree
    with pytest.raises(ValueError, match=f"{path}: row 3: value is missing"):
        load_aggregate(committed_aggregate)


def test_results_page_refuses_a_study_folder_that_holds_no_study(tmp_path, capsys):
    """The issue's probe: `--studies figures/<typo>` replaced docs/results.md with a header-only page."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "figures" / "protect_none", repo / "figures" / "protect_none")
    (repo / "figures" / "empty").mkdir()
    page = repo / "docs" / "results.md"
    page.parent.mkdir()
    page.write_text("the committed page\n")
    for folder, what in (("figures/protect_nnoe", "does not exist"), ("figures/empty", "holds no study")):
        assert main(["results-page", "--repo", str(repo), "--studies", "figures/protect_none", folder]) == 2
        (line,) = errors(capsys)
        assert f"--studies {folder}: {repo / folder} {what}" in line
        assert page.read_text() == "the committed page\n"
    assert main(["results-page", "--repo", str(repo), "--studies", "figures/protect_none"]) == 0
    assert "## Sensitivity: every block removable" in page.read_text()


def test_results_page_refuses_a_cut_rendered_table(tmp_path, capsys):
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "figures" / "protect_none", repo / "figures" / "protect_none")
    page = repo / "docs" / "results.md"
    page.parent.mkdir()
    page.write_text("the committed page\n")
    path = repo / "figures" / "protect_none" / "tables" / "paper_comparison.csv"
    path.write_text(path.read_text()[:-10])
    assert main(["results-page", "--repo", str(repo), "--studies", "figures/protect_none"]) == 2
    (line,) = errors(capsys)
    assert f"{path}: cut off mid-row" in line
    assert page.read_text() == "the committed page\n"


def test_every_committed_result_file_is_accepted():
    """The validators accept every committed aggregate (each table and its twin, the per-document
    scores), the multi-seed study's committed runs and every rendered table the results page reads."""
    aggregates = sorted((REPO / "results").glob("**/aggregate"))
    assert len(aggregates) >= 8
    for folder in aggregates:
        agg = load_aggregate(folder)
        assert not agg.summary.empty and not agg.metrics.empty
        assert load_samples(folder) is not None
        for name in ("selections", "metrics", "summary"):
            check_csv(folder / f"{name}.csv", AGGREGATE_TABLE_SCHEMAS[name])
    runs = REPO / "results" / "seeds_default" / "runs"
    for path in runs.rglob("metrics.csv"):
        read_metrics(path)
    for path in runs.rglob("selection.json"):
        read_selection(path)
    for path in runs.rglob("samples.parquet"):
        read_parquet(path, RUN_SAMPLES)
    for path in runs.rglob("prior.json"):
        read_prior_json(path)
    tables = sorted((REPO / "figures").rglob("tables/*.csv"))
    assert len(tables) > 50
    for path in tables:
        read_report_rows(path)


def test_snakemake_figures_refuses_a_truncated_aggregate(tmp_path):
    """`snakemake figures` over an aggregate whose metrics.csv is cut in half fails, the render's one
    line naming the file (it passed before: the render never read that table)."""
    import subprocess
    import sys

    clone = tmp_path / "repo"
    clone.mkdir()
    for name in ("Snakefile", "config.yaml", "config", "workflow", "envs"):
        source = REPO / name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, clone / name)
    shutil.copytree(REPO / "results" / "aggregate", tmp_path / "results" / "aggregate")
    path = tmp_path / "results" / "aggregate" / "metrics.csv"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    config = [f"results_dir={tmp_path / 'results'}", f"figures_dir={tmp_path / 'figures'}", f"logs_dir={tmp_path}/logs"]
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "1", "figures", "--config", *config],
        cwd=clone,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert f"depthprune render: error: {path}: differs from its twin metrics.parquet" in output, output
    assert not (tmp_path / "figures" / "figure1.png").exists()

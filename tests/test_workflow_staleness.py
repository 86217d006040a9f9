"""Issue 55: one target brings its outputs up to date. Dry runs on the smoke preset with the stand-in
CLI of tests/test_workflow.py (no model runs): a deleted run file replans its job and the aggregate
under `snakemake aggregate`, a change of the dtype `auto` resolves to replans the model jobs, and a
failed aggregate job leaves the previous aggregate in place."""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from pathlib import Path

import pytest

from test_workflow import StandInRun, job_counts, planned_jobs

AGGREGATE_FILES = ("selections", "metrics", "summary")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> StandInRun:
    """The smoke profile (six algorithms) run to the end with the stand-in CLI, in float32
    (DEPTHPRUNE_CPU_BF16=0, as tests/conftest.py sets for the whole suite)."""
    run = StandInRun(tmp_path_factory.mktemp("staleness"))
    run.env["DEPTHPRUNE_CPU_BF16"] = "0"
    run.run("--cores", "2")
    return run


def run_file(study: StandInRun, calibration: str, budget: int, algorithm: str, name: str) -> Path:
    return study.workdir / "results" / "smoke" / "tiny" / calibration / "seed0" / f"M{budget}" / algorithm / name


@contextlib.contextmanager
def deleted(*paths: Path):
    """The files gone for the block, then put back as they were (content and mtime): each test
    leaves the finished study as it found it."""
    for path in paths:
        path.rename(path.with_name(path.name + ".away"))
    try:
        yield
    finally:
        for path in paths:
            path.with_name(path.name + ".away").rename(path)


def test_a_finished_study_has_nothing_to_aggregate(study):
    assert "Nothing to be done" in study.run("-n", "aggregate").stdout


def test_a_deleted_selection_replans_its_search_and_the_aggregate(study):
    """`snakemake aggregate` used to say "Nothing to be done" and keep the deleted run in the aggregate."""
    with deleted(run_file(study, "ppl_c4", 3, "bo", "selection.json")):
        jobs = planned_jobs(study.run("-n", "aggregate").stdout)
    assert Counter(rule for rule, _ in jobs) == {
        "search": 1,
        "evaluate_pass": 1,  # the model's pass scores the new set (the cache answers the others)
        "evaluate_selections": 1,  # the group of the new set writes its files again
        "aggregate_tables": 1,
        "aggregate": 1,
    }
    search = next(wildcards for rule, wildcards in jobs if rule == "search")
    assert (search["calibration"], search["budget"], search["algorithm"]) == ("ppl_c4", "3", "bo")
    group = next(wildcards for rule, wildcards in jobs if rule == "evaluate_selections")
    assert (group["calibration"], group["budget"]) == ("ppl_c4", "3")


def test_a_deleted_metrics_file_replans_its_evaluation_and_the_aggregate(study):
    paths = [
        run_file(study, "tlm_cs170k", 2, "ga", "metrics.csv"),
        study.workdir / "results/smoke/tiny/dense/metrics.csv",
    ]
    with deleted(*paths):
        jobs = planned_jobs(study.run("-n", "aggregate").stdout)
    assert Counter(rule for rule, _ in jobs) == {
        "evaluate_selections": 1,
        "evaluate_dense": 1,
        "aggregate_tables": 1,
        "aggregate": 1,
    }
    group = next(wildcards for rule, wildcards in jobs if rule == "evaluate_selections")
    assert (group["calibration"], group["budget"]) == ("tlm_cs170k", "2")


def test_a_change_of_the_resolved_dtype_replans_every_model_job(study):
    """`dtype: auto` with DEPTHPRUNE_CPU_BF16=1 computes in bfloat16: the priors, searches and
    evaluations of the float32 study rerun (the option itself, `auto`, is unchanged)."""
    counts = job_counts(study.run("-n", env={**study.env, "DEPTHPRUNE_CPU_BF16": "1"}).stdout)
    assert counts == {
        "prior": 2,
        "search": 24,  # 2 calibrations x 2 budgets x 6 algorithms
        "evaluation_settings": 1,
        "evaluate_pass": 1,
        "evaluate_selections": 4,
        "evaluate_dense": 1,
        "aggregate_tables": 1,
        "render": 1,
        "all": 1,
    }
    assert "Nothing to be done" in study.run("-n", env={**study.env, "DEPTHPRUNE_CPU_BF16": "0"}).stdout


def test_a_failed_aggregate_job_keeps_the_previous_aggregate(study):
    """Snakemake deletes a job's outputs before it runs; the aggregate's are flagged update(), so a
    failing aggregate job leaves the previous tables (the CLI itself replaces them only when all the
    new ones are written: tests/test_provenance.py). Last in this module: it runs a failing job."""
    folder = study.workdir / "results" / "smoke" / "aggregate"
    for name in AGGREGATE_FILES:
        (folder / f"{name}.csv").write_text(f"the previous {name}\n")
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    failing = {**study.env, "FAKE_FAIL_AGGREGATE": "1"}
    proc = study.run("--cores", "1", "--forcerun", "aggregate_tables", "aggregate", env=failing, check=False)
    assert proc.returncode != 0 and "aggregate fails" in proc.stdout + proc.stderr
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    assert os.listdir(folder) and not [name for name in os.listdir(folder) if name.startswith(".")]

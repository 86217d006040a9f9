"""`depthprune timing stages`: per-stage sums of Snakemake benchmark files."""

import subprocess
import sys

import pytest

from depthprune.timing.stages import stage_times

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def write_benchmark(path, seconds, rss, cpu):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + f"{seconds}\t0:00:00\t{rss}\t0\t0\t0\t0\t0\t0\t{cpu}\n")


@pytest.fixture
def benchmarks(tmp_path):
    root = tmp_path / "benchmarks"
    write_benchmark(root / "prior/m/ppl_c4.tsv", 10.0, 100, 15.0)
    write_benchmark(root / "search/m/ppl_c4/M7/greedy.tsv", 30.0, 300, 50.0)
    write_benchmark(root / "search/m/ppl_c4/M7/beam.tsv", 50.0, 200, 90.0)
    write_benchmark(root / "evaluate/m/dense.tsv", 110.0, 250, 200.0)
    return root


def test_stage_times_sums_per_stage_and_orders_by_time(benchmarks):
    table = stage_times(benchmarks).set_index("stage")
    assert list(table.index) == ["evaluate", "search", "prior"]
    assert table.loc["search", "jobs"] == 2
    assert table.loc["search", "seconds"] == pytest.approx(80.0)
    assert table.loc["search", "max_job_seconds"] == pytest.approx(50.0)
    assert table.loc["search", "cpu_seconds"] == pytest.approx(140.0)
    assert table.loc["search", "max_rss_mb"] == pytest.approx(300.0)
    assert table["share"].sum() == pytest.approx(1.0)
    assert table.loc["evaluate", "share"] == pytest.approx(110.0 / 200.0)


def test_bench_stages_cli_prints_total_and_dominant_stage(benchmarks, tmp_path):
    out = tmp_path / "stages.csv"
    done = subprocess.run(
        [sys.executable, "-m", "depthprune", "bench", "stages", "--benchmarks-dir", str(benchmarks), "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "stages: total_job_seconds=200.0 (3.3 min) dominant=evaluate" in done.stdout
    assert out.read_text().startswith("stage,jobs,seconds")


def test_bench_stages_names_an_empty_folder(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "depthprune", "bench", "stages", "--benchmarks-dir", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "--benchmarks-dir" in done.stderr and str(tmp_path) in done.stderr

"""``python -m depthprune timing stages``: where a pipeline run spent its time, from ``benchmarks/``.

Every model-touching rule writes a Snakemake benchmark TSV (``benchmarks/<stage>/<model>/...tsv``:
wall seconds ``s``, peak memory ``max_rss`` in MB, ``cpu_time``). This sums them per stage and
prints one line per stage (jobs, total and longest wall seconds, peak memory, share of the total)
and last ``stages: total_job_seconds=T dominant=<stage>``. With ``--cores`` equal to a job's
threads (the default preset), jobs run one at a time, so the total is the run's wall time less
Snakemake's own overhead and the seconds-long aggregate/render rules.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from depthprune.errors import InputError
from depthprune.paths import BENCHMARKS_DIR


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--benchmarks-dir", default=BENCHMARKS_DIR, help="the run's benchmarks folder (default %(default)s)"
    )
    parser.add_argument("--out", help="also write the per-stage table here (CSV)")


def stage_times(benchmarks_dir: str | Path):
    """One row per stage: jobs, total/max wall seconds, CPU seconds, peak RSS (MB), share of the total."""
    import pandas as pd

    root = Path(benchmarks_dir)
    files = sorted(root.rglob("*.tsv"))
    if not files:
        raise FileNotFoundError(
            f"{root}: no Snakemake benchmark files (*.tsv); run the pipeline first (--benchmarks-dir)"
        )
    rows = []
    for path in files:
        record = pd.read_csv(path, sep="\t")
        if record.empty or "s" not in record:
            raise InputError(f"{path}: not a Snakemake benchmark file (no 's' column)")
        last = record.iloc[-1]  # a file holds one row per repeat; the pipeline runs each job once
        rows.append(
            {
                "stage": path.relative_to(root).parts[0],
                "job": str(path.relative_to(root).with_suffix("")),
                "seconds": float(last["s"]),
                "cpu_seconds": float(last.get("cpu_time", float("nan"))),
                "max_rss_mb": float(last.get("max_rss", float("nan"))),
            }
        )
    jobs = pd.DataFrame(rows)
    table = jobs.groupby("stage", sort=False).agg(
        jobs=("job", "size"),
        seconds=("seconds", "sum"),
        max_job_seconds=("seconds", "max"),
        cpu_seconds=("cpu_seconds", "sum"),
        max_rss_mb=("max_rss_mb", "max"),
    )
    table["share"] = table["seconds"] / table["seconds"].sum()
    return table.sort_values("seconds", ascending=False).reset_index()


def run(benchmarks_dir: str, out: str | None) -> int:
    from depthprune.io import atomic_write_csv

    table = stage_times(benchmarks_dir)
    print(f"{'stage':<16}{'jobs':>5}{'seconds':>10}{'max job s':>11}{'cpu s':>10}{'max RSS MB':>12}{'share':>7}")
    for row in table.itertuples():
        print(
            f"{row.stage:<16}{row.jobs:>5}{row.seconds:>10.1f}{row.max_job_seconds:>11.1f}"
            f"{row.cpu_seconds:>10.1f}{row.max_rss_mb:>12.0f}{row.share:>7.0%}"
        )
    total = table["seconds"].sum()
    print(f"stages: total_job_seconds={total:.1f} ({total / 60:.1f} min) dominant={table['stage'].iloc[0]}")
    if out:
        atomic_write_csv(out, table)
    return 0

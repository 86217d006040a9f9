"""Calibration-size study (beyond the paper): its figure and table from an aggregate
(``depthprune calibration-size``). The statistics are in ``statistics/calibration_size.py``, the
table in ``tables/calibration_size.py``, the figure in ``figures/calibration_size.py``.
"""

from __future__ import annotations

from pathlib import Path

from depthprune.environment import RENDER_PACKAGES, warn_drift, write_record
from depthprune.reporting.aggregate import calibration_kind, load_samples
from depthprune.reporting.figures.calibration_size import draw
from depthprune.reporting.statistics.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED
from depthprune.reporting.statistics.calibration_size import add_bootstrap_intervals, calibration_size_table
from depthprune.reporting.tables.calibration_size import report_table
from depthprune.reporting.tables.table_format import write_table
from depthprune.results_schema import AGGREGATE_SUMMARY, read_csv


def render_calibration_size(
    aggregate_dir: str | Path,
    out_dir: str | Path,
    bootstrap_resamples: int = DEFAULT_RESAMPLES,
    bootstrap_seed: int = DEFAULT_SEED,
) -> list[Path]:
    """Figure and table of the calibration-size study from ``aggregate_dir/summary.csv``; its intervals
    from ``bootstrap_resamples`` paired resamples seeded with ``bootstrap_seed`` (config ``analysis``)."""
    warn_drift(RENDER_PACKAGES, "its figure and table")
    summary = read_csv(Path(aggregate_dir) / "summary.csv", AGGREGATE_SUMMARY)  # checked, twin included
    table = calibration_size_table(summary)
    samples = load_samples(aggregate_dir)
    table = add_bootstrap_intervals(table, samples, bootstrap_resamples, bootstrap_seed)
    dense = summary[summary["calibration"].map(calibration_kind) == "none"]
    out = Path(out_dir)
    written = draw(table, dense, out)
    written += write_table(report_table(table), out / "tables")
    written.append(write_record(out, RENDER_PACKAGES))
    return written

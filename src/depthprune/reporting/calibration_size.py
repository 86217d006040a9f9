"""Calibration-size study (beyond the paper): its figure and table from an aggregate
(``depthprune calibration-size``). The statistics are in ``statistics/calibration_size.py``, the
table in ``tables/calibration_size.py``, the figure in ``figures/calibration_size.py``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from depthprune.reporting.aggregate import calibration_kind
from depthprune.reporting.figures.calibration_size import draw
from depthprune.reporting.statistics.calibration_size import add_bootstrap_intervals, calibration_size_table
from depthprune.reporting.tables.calibration_size import report_table
from depthprune.reporting.tables.table_format import write_table


def render_calibration_size(aggregate_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Figure and table of the calibration-size study from ``aggregate_dir/summary.csv``."""
    summary = pd.read_csv(Path(aggregate_dir) / "summary.csv")
    table = calibration_size_table(summary)
    samples_path = Path(aggregate_dir) / "samples.parquet"
    samples = pd.read_parquet(samples_path) if samples_path.is_file() else None
    table = add_bootstrap_intervals(table, samples)
    dense = summary[summary["calibration"].map(calibration_kind) == "none"]
    out = Path(out_dir)
    written = draw(table, dense, out)
    written += write_table(report_table(table), out / "tables")
    return written

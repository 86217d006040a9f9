"""The calibration-size study's table (``tables/calibration_size.{csv,md,tex}``): ``report_table`` of
``statistics/calibration_size.calibration_size_table``, spans over seeds and intervals in one cell.
"""

from __future__ import annotations

import pandas as pd

from depthprune.reporting.statistics.calibration_size import NAME, STABLE_JACCARD
from depthprune.reporting.style import (
    algorithm_name,
    calibration_name,
)
from depthprune.reporting.tables.table_format import (
    Column,
    ReportTable,
    fmt_fraction,
    fmt_percent,
    fmt_perplexity,
    fmt_points,
)


def _spans(frame: pd.DataFrame, low: str, high: str, fmt, always: bool = False, template: str = "{}–{}") -> list[str]:
    """Each row's "lo–hi" (or ``template``) in ``fmt``; "–" where ``low`` is missing (unless ``always``)."""
    return [
        template.format(fmt(lo), fmt(hi)) if always or pd.notna(lo) else "–" for lo, hi in zip(frame[low], frame[high])
    ]


SPANS = {  # report column -> (low, high, format, printed even when missing[, template])
    "accuracy_range": ("avg_accuracy_min", "avg_accuracy_max", fmt_percent, True),
    "accuracy_interval": ("avg_accuracy_lo", "avg_accuracy_hi", fmt_percent, False),
    "perplexity_interval": ("avg_perplexity_lo", "avg_perplexity_hi", fmt_perplexity, False),
    "jaccard_interval": ("jaccard_lo", "jaccard_hi", fmt_fraction, False),
    "random_range": ("jaccard_random_lo", "jaccard_random_hi", fmt_fraction, False),
    # signed values: a dash between them would read as a minus
    "versus_ppl_interval": ("acc_minus_ppl_lo", "acc_minus_ppl_hi", fmt_points, False, "[{}, {}]"),
}


def report_table(table: pd.DataFrame) -> ReportTable:
    frame = table.copy()
    for column, (low, high, fmt, always, *template) in SPANS.items():
        frame[column] = _spans(frame, low, high, fmt, always, *template) if not frame.empty else []
    columns = [
        Column("model", "Model"),
        Column("calibration", "Calibration", calibration_name),
        Column("budget", "M"),
        Column("algorithm", "Algorithm", algorithm_name),
        Column("size", "Size"),
        Column("n_seeds", "Seeds", numeric=True),
        Column("jaccard_mean", "Jaccard (seeds)", fmt_fraction, best="max", numeric=True),
        Column("jaccard_interval", "Jaccard 95% CI", csv=False),
        Column("jaccard_random", "Random sets", fmt_fraction, numeric=True),
        Column("random_range", "Random 95% range", csv=False),
        Column("jaccard_p_value", "p", lambda v: "" if pd.isna(v) else f"{float(v):.3g}", numeric=True),
        Column("stable", "Stable", lambda v: "yes" if bool(v) else "no"),
        Column("distinct_sets", "Distinct sets", numeric=True),
        Column("loss_mean", "Calib. loss", lambda v: f"{v:.4g}", numeric=True),
        Column("heldout_loss_mean", "Held-out loss", lambda v: "" if pd.isna(v) else f"{v:.4g}", numeric=True),
        Column("avg_accuracy_mean", "Avg acc", fmt_percent, best="max", numeric=True),
        Column("accuracy_interval", "Acc 95% CI", csv=False),
        Column("accuracy_range", "Acc range (seeds)", csv=False),
        Column("versus_ppl_size", "vs PPL at"),
        Column("acc_minus_ppl", "Acc − PPL (pts)", fmt_points, numeric=True),
        Column("versus_ppl_interval", "Acc − PPL 95% CI", csv=False),
        Column("perplexity_of", "Ppl of"),
        Column("avg_perplexity_geomean", "Ppl (geo. mean)", fmt_perplexity, best="min", numeric=True),
        Column("perplexity_interval", "Ppl 95% CI", csv=False),
    ]
    return ReportTable(
        name=NAME,
        title="Calibration size",
        caption=(
            "Calibration-size study: per calibration size, the stability of the pruned set across seeds "
            "(mean pairwise Jaccard of the removed sets; 1 = identical; stable: at least "
            f"{STABLE_JACCARD:g}; its 95% bootstrap interval over the draws) beside the value for random sets "
            "of the same size drawn from the same candidate blocks (protected blocks excluded), their central "
            "95% range and the permutation p-value, the calibration loss and the loss on the fixed held-out "
            "draw (mean over seeds), and the "
            "pruned models' average zero-shot accuracy (mean over seeds, its 95% paired-bootstrap interval over "
            "evaluation documents, and the range over seeds), a TLM size's accuracy minus the perplexity "
            "calibration's at its largest size (same M and algorithm; points, paired 95% interval over the "
            "same documents), and average perplexity (geometric mean over "
            "seeds, with its bootstrap interval). TLM sizes are items; perplexity sizes documents x tokens."
        ),
        frame=frame,
        columns=columns,
        block=["model", "calibration", "budget", "algorithm"],
        empty_note="No calibration-size results (run with calibration_sizes and seeds).",
    )

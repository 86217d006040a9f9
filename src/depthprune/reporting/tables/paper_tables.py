"""Tables 1-6 of the paper, built from the aggregate summary and selections (docs/method.md §7).

Rows are blocks of (model, M, calibration) in the order of docs/method.md, algorithms inside a block in its
order; the dense model (when evaluated) heads each model as an unbolded reference row.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pandas as pd

from depthprune.evaluation.benchmarks import PERPLEXITY, ZERO_SHOT, benchmarks_of
from depthprune.reporting.aggregate import DENSE_ALGORITHM
from depthprune.reporting.analysis.agreement import agreement_table
from depthprune.reporting.analysis.frames import sort_frame
from depthprune.reporting.style import algorithm_name, calibration_name, slug
from depthprune.reporting.tables.table_format import (
    Column,
    ReportTable,
    fmt_fraction,
    fmt_int,
    fmt_percent,
    fmt_perplexity,
    fmt_points,
    fmt_seconds,
    write_table,
)

TABLE_NAMES = ("table1", "table2", "table3", "table4", "table5", "table6")
ACC_CI = ("avg_acc_ci_low", "avg_acc_ci_high")
PPL_CI = ("avg_ppl_ci_low", "avg_ppl_ci_high")
DIFF_CI = ("diff_one_shot_ci_low", "diff_one_shot_ci_high")
CI_NOTE = "[lo, hi]: 95 % paired bootstrap interval over documents (CSV: *_ci_low, *_ci_high)."


def _with(frame: pd.DataFrame, columns) -> list[str]:
    """``columns`` that the frame has (the interval columns exist only after with_intervals)."""
    return [c for c in columns if c in frame.columns]


BLOCK = ["model", "budget", "calibration"]
# Columns, headers and captions from the benchmark table: a benchmark added there gets its column.
ACCURACY_HEADERS = {b.column: b.header for b in benchmarks_of(ZERO_SHOT)}
PERPLEXITY_HEADERS = {b.column: b.header for b in benchmarks_of(PERPLEXITY)}
PERPLEXITY_COLUMNS = tuple(PERPLEXITY_HEADERS)
ACCURACY_COLUMNS = tuple(ACCURACY_HEADERS)


def _named(kind: str, with_headers: bool) -> str:
    """'WikiText-2 (W2), C4 and LAMBADA (LMB)': the benchmarks of a kind, for a caption."""
    names = [
        b.title if not with_headers or b.header == b.title else f"{b.title} ({b.header})" for b in benchmarks_of(kind)
    ]
    return ", ".join(names[:-1]) + (" and " if with_headers else ", ") + names[-1] if len(names) > 1 else names[0]


DENSE_NOTE = "Dense: the unpruned model (M = 0), for reference; never bold."


def _label_columns() -> list[Column]:
    return [
        Column("model", "Model"),
        Column("budget", "M", fmt_int),
        Column("calibration", "Calibration", calibration_name),
        Column("algorithm", "Algorithm", algorithm_name),
    ]


def _rows(summary: pd.DataFrame, kinds: tuple[str, ...] | None, with_dense: bool = True) -> pd.DataFrame:
    """Pruned rows of the given calibration kinds (all when None), each model led by its dense row."""
    pruned = summary[summary["algorithm"] != DENSE_ALGORITHM]
    if kinds is not None:
        pruned = pruned[pruned["calibration_kind"].isin(kinds)]
    pruned = sort_frame(pruned)
    if not with_dense:
        return pruned
    dense = summary[(summary["algorithm"] == DENSE_ALGORITHM) & summary["model"].isin(pruned["model"])]
    parts = []
    for model in pruned["model"].drop_duplicates():
        parts += [dense[dense["model"] == model], pruned[pruned["model"] == model]]
    return pd.concat(parts, ignore_index=True) if parts else pruned


def _reference(frame: pd.DataFrame) -> pd.Series:
    return frame["algorithm"] == DENSE_ALGORITHM


def table1(summary: pd.DataFrame) -> ReportTable:
    rows = _rows(summary, kinds=None)
    frame = rows[BLOCK + ["algorithm", *PERPLEXITY_COLUMNS, "avg_perplexity", *_with(rows, PPL_CI)]]
    columns = _label_columns() + [
        *(Column(c, h, fmt_perplexity, numeric=True) for c, h in PERPLEXITY_HEADERS.items()),
        Column("avg_perplexity", "Avg", fmt_perplexity, best="min", numeric=True, interval=PPL_CI),
    ]
    return ReportTable(
        name="table1",
        title="Table 1",
        caption=(
            f"Perplexity (lower is better) on {_named(PERPLEXITY, with_headers=True)} under each calibration "
            "configuration; M removed layers, no fine-tuning. Lowest Avg per (model, M, calibration) in bold."
        ),
        frame=frame,
        columns=columns,
        block=BLOCK,
        reference=_reference(frame),
        empty_note="No perplexity results.",
        notes=[DENSE_NOTE, CI_NOTE],
    )


def accuracy_table(summary: pd.DataFrame, kind: str, name: str, title: str) -> ReportTable:
    """Tables 2 (kind "tlm") and 3 (kind "ppl"): zero-shot accuracy per task and Avg, in %."""
    rows = _rows(summary, kinds=(kind,))
    frame = rows[BLOCK + ["algorithm", *ACCURACY_COLUMNS, "avg_accuracy", *_with(rows, ACC_CI)]]
    columns = _label_columns() + [
        *(Column(c, h, fmt_percent, numeric=True) for c, h in ACCURACY_HEADERS.items()),
        Column("avg_accuracy", "Avg", fmt_percent, best="max", numeric=True, interval=ACC_CI),
    ]
    pruning = "task-likelihood-margin (TLM)" if kind == "tlm" else "calibration-perplexity"
    return ReportTable(
        name=name,
        title=title,
        caption=(
            f"Zero-shot accuracy (%, higher is better) of models pruned by {pruning} calibration, "
            f"without fine-tuning: {_named(ZERO_SHOT, with_headers=False)} "
            "(acc_norm where the task has it, else acc). Highest Avg per (model, M, calibration) in bold."
        ),
        frame=frame,
        columns=columns,
        block=BLOCK,
        reference=_reference(frame),
        empty_note=f"No results under {pruning} pruning.",
        notes=[DENSE_NOTE, "CSV values are fractions (0-1); Markdown/LaTeX show percent.", CI_NOTE],
    )


def table4(summary: pd.DataFrame) -> ReportTable:
    frame = _rows(summary, kinds=None, with_dense=False)
    extra = _with(frame, ACC_CI) + _with(frame, ("diff_one_shot",)) + _with(frame, DIFF_CI) + _with(frame, ("mdd",))
    extra += _with(frame, ("loss", "failed_search"))
    if "heldout_loss" in frame.columns:  # only studies with held-out scoring: other Table 4s keep their bytes
        from depthprune.reporting.analysis.frames import heldout_gap

        frame = heldout_gap(frame)
        extra += ["heldout_loss", "heldout_gap", "overfits"]
    frame = frame[BLOCK + ["algorithm", "search_seconds", "distinct_evaluations", "avg_accuracy", *extra]]
    columns = _label_columns() + [
        Column("search_seconds", "Time (s)", fmt_seconds, numeric=True),
        Column("distinct_evaluations", "Evaluations", fmt_int, numeric=True),
        Column("avg_accuracy", "Avg acc (%)", fmt_percent, best="max", numeric=True, interval=ACC_CI),
    ]
    if "diff_one_shot" in frame.columns:
        columns.append(Column("diff_one_shot", "Δ vs one-shot (pts)", fmt_points, numeric=True, interval=DIFF_CI))
    if "mdd" in frame.columns:
        columns.append(Column("mdd", "MDD (pts)", fmt_mdd, numeric=True))
    if "failed_search" in frame.columns:
        columns.append(Column("failed_search", "Failed search", fmt_failed))
    notes = []
    if "heldout_loss" in frame.columns:
        columns += [
            Column("loss", "Calibration loss", fmt_loss, numeric=True),
            Column("heldout_loss", "Held-out loss", fmt_loss, numeric=True),
            Column("heldout_gap", "Gap (held-out − cal.)", fmt_loss, numeric=True),
            Column("overfits", "Over-fits", fmt_overfits),
        ]
        notes.append(
            "Held-out loss: the selected set's calibration objective on a fixed held-out draw of the same source, "
            "disjoint from every seed's calibration sample; Gap = held-out − calibration loss. Over-fits: the "
            "search's calibration loss is below one-shot's while its held-out loss is above one-shot's."
        )
    return ReportTable(
        name="table4",
        title="Table 4",
        caption=(
            "Search cost and result per algorithm: search time in seconds (the compute the search needs on its own, "
            "including the single-layer prior for searches that read it, so one-shot's time is the prior's) and distinct subset "
            "evaluations as recorded by the search (selection.json), and average zero-shot accuracy. Highest "
            "accuracy per (model, M, calibration) in bold."
        ),
        frame=frame,
        columns=columns,
        block=BLOCK,
        empty_note="No search results.",
        notes=[
            "CSV accuracy is a fraction (0-1); Markdown/LaTeX show percent.",
            CI_NOTE,
            "Δ vs one-shot: the algorithm's average accuracy minus one-shot's under the same calibration and M, "
            "paired over the same resampled documents.",
            "MDD: the smallest true Δ a two-sided 5 % test detects with 80 % power, (z_0.975 + z_0.8) × its paired "
            "bootstrap SE (CSV: fraction).",
            "Failed search: the search's final calibration loss is worse than one-shot's on the same objective "
            "(CSV failed_search); §5.2 also reports its statistics without such searches. Why CBO fails: "
            'docs/method.md §4.6, "Diagnosis".',
            *notes,
        ],
    )


def fmt_mdd(value) -> str:
    """An unsigned difference of fractions in points; blank where there is none (one-shot itself)."""
    return "" if pd.isna(value) else f"{100 * float(value):.2f}"


def fmt_failed(value) -> str:
    return "worse loss than one-shot" if bool(value) else ""


def fmt_loss(value) -> str:
    return "" if pd.isna(value) else f"{float(value):.4g}"


def fmt_overfits(value) -> str:
    return "lower cal., higher held-out loss than one-shot" if bool(value) else ""


def table5(selections: pd.DataFrame) -> ReportTable:
    frame = agreement_table(selections)
    frame["range"] = [
        f"{lo:.2f}–{hi:.2f}" if pd.notna(lo) else None for lo, hi in zip(frame["min_jaccard"], frame["max_jaccard"])
    ]
    columns = [
        Column("model", "Model"),
        Column("budget", "M", fmt_int),
        Column("calibration", "Calibration", calibration_name),
        Column("n_sets", "Sets", fmt_int, numeric=True),
        Column("mean_jaccard", "Mean", fmt_fraction, best="max", numeric=True),
        Column("range", "Range", csv=False),
        Column("full_overlap", "Full overlap", fmt_fraction, best="max", numeric=True),
        Column("random_mean_jaccard", "Chance", fmt_fraction, numeric=True),
        Column("p_value", "p", fmt_p, numeric=True),
    ]
    return ReportTable(
        name="table5",
        title="Table 5",
        caption=(
            "Algorithm-level agreement over the pruned layer sets of each (model, M, calibration) cell: "
            "Mean of the pairwise Jaccard similarities (n(n−1)/2 pairs for n algorithms), their Range "
            "(min-max), and Full overlap |∩S_i|/|∪S_i|. Highest per (model, M) in bold. Chance: the expected "
            "mean Jaccard of as many uniform draws of M of the model's N layers (exact, hypergeometric); p: how "
            "often such uniform draws agree at least as much (10,000 simulated designs)."
        ),
        frame=frame,
        columns=columns,
        block=["model", "budget"],
        empty_note="No pruned sets.",
    )


def table6(selections: pd.DataFrame) -> ReportTable:
    """The cell-level Jaccard of the paper's Appendix A.2 behind its §5.1 summary (0.63 / 0.36 / 0.51):
    our mean pairwise Jaccard per (calibration, model, M), each calibration closed by the mean over
    its cells, beside the value the paper reports for that calibration."""
    from depthprune.reporting.statistics.nulls import pooled_agreement_null
    from depthprune.reporting.verdicts.observations import paper_values

    reported = paper_values()["section_5_1"]["jaccard_within"]
    cells = agreement_table(selections)
    rows = []
    for calibration, group in cells.groupby("calibration", sort=False):
        paper = " / ".join(f"{v:.2f} ({k})" for k, v in reported.get(calibration, {}).items()) or None
        for r in group.itertuples(index=False):
            rows.append(
                {
                    "calibration": calibration,
                    "model": r.model,
                    "budget": str(r.budget),
                    "n_sets": r.n_sets,
                    "mean_jaccard": r.mean_jaccard,
                    "random_mean_jaccard": r.random_mean_jaccard,
                    "p_value": r.p_value,
                    "paper_mean_jaccard": None,
                }
            )
        designs = [(int(r.n_candidates), int(r.set_size), int(r.n_sets)) for r in group.itertuples(index=False)]
        expected, p_value = pooled_agreement_null(designs, group["mean_jaccard"].mean())
        rows.append(
            {
                "calibration": calibration,
                "model": "mean over cells",
                "budget": "all",
                "n_sets": group["n_sets"].sum(),
                "mean_jaccard": group["mean_jaccard"].mean(),
                "random_mean_jaccard": expected,
                "p_value": p_value,
                "paper_mean_jaccard": paper,
            }
        )
    names = ["calibration", "model", "budget", "n_sets", "mean_jaccard", "random_mean_jaccard", "p_value"]
    frame = pd.DataFrame(rows, columns=[*names, "paper_mean_jaccard"])
    columns = [
        Column("calibration", "Calibration", calibration_name),
        Column("model", "Model"),
        Column("budget", "M"),
        Column("n_sets", "Sets", fmt_int, numeric=True),
        Column("mean_jaccard", "Mean Jaccard", fmt_fraction, numeric=True),
        Column("random_mean_jaccard", "Chance", fmt_fraction, numeric=True),
        Column("p_value", "p", fmt_p, numeric=True),
        Column("paper_mean_jaccard", "Paper (§5.1)"),
    ]
    return ReportTable(
        name="table6",
        title="Table 6",
        caption=(
            "Cell-level algorithm agreement (the paper's Appendix A.2): mean pairwise Jaccard of the pruned sets "
            "of the algorithms under one calibration, per (model, M), and its mean over cells beside the value "
            "the paper reports in §5.1 (LLaMA / Qwen3 under perplexity pruning, all models under TLM). Chance: "
            "the same statistic's expectation for uniform draws of each cell's size out of its depth; p: its "
            "simulated permutation p-value."
        ),
        frame=frame,
        columns=columns,
        block=["calibration"],
        empty_note="No pruned sets.",
    )


def fmt_p(value) -> str:
    return "" if pd.isna(value) else f"{float(value):.3g}"


def build_tables(summary: pd.DataFrame, selections: pd.DataFrame, only: set[str] | None = None) -> list[ReportTable]:
    """Tables 1-6; Tables 2 and 3 also per model (``table2_<model>``) when there are several models."""
    builders = {
        "table1": lambda: [table1(summary)],
        "table2": partial(_per_model, summary, "tlm", "table2", "Table 2"),
        "table3": partial(_per_model, summary, "ppl", "table3", "Table 3"),
        "table4": lambda: [table4(summary)],
        "table5": lambda: [table5(selections)],
        "table6": lambda: [table6(selections)],
    }
    tables = []
    for name, build in builders.items():
        if only is None or name in only:
            tables.extend(build())
    return tables


def _per_model(summary: pd.DataFrame, kind: str, name: str, title: str) -> list[ReportTable]:
    tables = [accuracy_table(summary, kind, name, title)]
    models = sorted(summary.loc[summary["algorithm"] != DENSE_ALGORITHM, "model"].unique())
    if len(models) > 1:
        for model in models:
            tables.append(
                accuracy_table(summary[summary["model"] == model], kind, f"{name}_{slug(model)}", f"{title} ({model})")
            )
    return tables


def write_tables(tables: list[ReportTable], out_dir: str | Path) -> list[Path]:
    paths = []
    for table in tables:
        paths.extend(write_table(table, out_dir))
    return paths

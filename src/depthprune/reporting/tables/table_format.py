"""A small table model and its three renderings: CSV (raw numbers), Markdown and LaTeX (booktabs).

A ``ReportTable`` holds raw values; blocks (e.g. one per (model, M, calibration)) decide where the
best value of a column is set in bold (Markdown ``**x**``, LaTeX ``\\textbf{x}``): every tied best,
and nothing when the whole block ties. A column with an ``interval`` shows its 95 % interval as
``x [lo, hi]`` in Markdown and LaTeX; the CSV keeps the interval's own columns. The CSV keeps the unformatted numbers (and any extra columns
of the frame) plus one ``best_<column>`` flag per bold column, so the choice is checkable.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from depthprune.io import atomic_write_report_csv, atomic_write_text

MISSING = "–"  # shown for NaN cells (a missing run or metric), never a made-up number


@dataclass
class Column:
    name: str  # column in ReportTable.frame
    header: str  # display header
    fmt: Callable[[object], str] = str
    best: str | None = None  # "min" or "max": bold the best value of each block
    numeric: bool = False  # right-aligned in LaTeX
    csv: bool = True  # False for display-only columns derived from others (e.g. a "min–max" range)
    interval: tuple[str, str] | None = None  # frame columns of a 95 % interval, shown as "x [lo, hi]"


@dataclass
class ReportTable:
    name: str  # file stem, e.g. "table1"
    title: str  # e.g. "Table 1"
    caption: str
    frame: pd.DataFrame
    columns: list[Column]
    block: list[str]  # columns whose values define a block (bold and rules are per block)
    reference: pd.Series | None = None  # rows shown but never bold (the dense model)
    empty_note: str = "No results."
    notes: list[str] = field(default_factory=list)

    def best_mask(self) -> pd.DataFrame:
        """Booleans, one column per bolded column: True where the row holds its block's best value."""
        mask = pd.DataFrame(index=self.frame.index)
        reference = self.reference if self.reference is not None else pd.Series(False, index=self.frame.index)
        for col in self.columns:
            if col.best is None:
                continue
            values = pd.to_numeric(self.frame[col.name], errors="coerce").where(~reference)
            if self.frame.empty:
                mask[col.name] = pd.Series(dtype=bool)
                continue
            groups = values.groupby([self.frame[c] for c in self.block], sort=False)
            target = groups.transform(col.best)
            # A block whose values all tie has no best value: bold would single nothing out.
            distinct = groups.transform("nunique")
            mask[col.name] = (values == target) & values.notna() & (distinct > 1)
        return mask


def write_table(table: ReportTable, out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    paths = [out / f"{table.name}.{ext}" for ext in ("csv", "md", "tex")]
    atomic_write_report_csv(paths[0], to_csv_frame(table))
    atomic_write_text(paths[1], to_markdown(table))
    atomic_write_text(paths[2], to_latex(table))
    return paths


def to_csv_frame(table: ReportTable) -> pd.DataFrame:
    """Every column of the frame except display-only ones, unformatted, plus the bold flags."""
    display_only = {c.name for c in table.columns if not c.csv}
    frame = table.frame[[c for c in table.frame.columns if c not in display_only]].copy()
    for name, flags in table.best_mask().items():
        frame[f"best_{name}"] = flags
    return frame


def _cells(table: ReportTable, escape: Callable[[str], str], bold: Callable[[str], str]) -> list[list[str]]:
    mask = table.best_mask()
    rows = []
    previous: list[object] | None = None
    label_count = len(table.block)
    for idx, record in table.frame.iterrows():
        row = []
        for col in table.columns:
            value = record[col.name]
            text = MISSING if _is_missing(value) else col.fmt(value)
            if col.interval and not _is_missing(value):
                lo, hi = (record.get(name) for name in col.interval)
                if not (_is_missing(lo) or _is_missing(hi)):
                    text = f"{text} [{col.fmt(lo)}, {col.fmt(hi)}]"
            text = escape(text)
            if col.name in mask and bool(mask.at[idx, col.name]):
                text = bold(text)
            row.append(text)
        # Repeated block labels are blanked, as in the paper's tables.
        labels = [record[c.name] for c in table.columns[:label_count]]
        if previous is not None:
            for position in range(label_count):
                if labels[: position + 1] == previous[: position + 1]:
                    row[position] = ""
        previous = labels
        rows.append(row)
    return rows


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def to_markdown(table: ReportTable) -> str:
    lines = [f"**{table.title}.** {table.caption}", ""]
    if table.frame.empty:
        return "\n".join(lines + [f"_{table.empty_note}_", ""])
    headers = [c.header for c in table.columns]
    align = ["---:" if c.numeric else ":---" for c in table.columns]
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("| " + " | ".join(align) + " |")
    for row in _cells(table, lambda t: t.replace("|", "\\|"), lambda t: f"**{t}**"):
        lines.append("| " + " | ".join(row) + " |")
    lines.extend(["", *table.notes])
    return "\n".join(lines).rstrip() + "\n"


LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    return "".join(LATEX_SPECIALS.get(ch, ch) for ch in str(text))


def to_latex(table: ReportTable) -> str:
    spec = "".join("r" if c.numeric else "l" for c in table.columns)
    headers = " & ".join(latex_escape(c.header) for c in table.columns)
    lines = [
        f"% {table.title}: {table.caption}".replace("\n", " "),
        f"\\begin{{tabular}}{{{spec}}}",
        "\\toprule",
        f"{headers} \\\\",
        "\\midrule",
    ]
    if table.frame.empty:
        lines.append(f"\\multicolumn{{{len(table.columns)}}}{{c}}{{{latex_escape(table.empty_note)}}} \\\\")
    else:
        cells = _cells(table, _latex_text, lambda t: f"\\textbf{{{t}}}")
        blocks = [tuple(r) for r in table.frame[table.block].itertuples(index=False)]
        for i, row in enumerate(cells):
            if i > 0 and blocks[i] != blocks[i - 1]:
                lines.append("\\midrule")
            lines.append(" & ".join(row) + " \\\\")
    lines.extend(["\\bottomrule", "\\end{tabular}", ""])
    return "\n".join(lines)


def _latex_text(text: str) -> str:
    # En dashes (missing cells, ranges) become LaTeX's "--" so the file needs no UTF-8 setup.
    return latex_escape(text).replace("–", "--")


# ----------------------------------------------------------------------------- number formats


def fmt_perplexity(value) -> str:
    value = float(value)
    return f"{value:.2f}" if abs(value) < 1e4 else f"{value:.2e}"


def fmt_percent(value) -> str:
    return f"{100 * float(value):.2f}"


def fmt_points(value) -> str:
    """A difference of fractions in percentage points, signed."""
    return f"{100 * float(value):+.2f}"


def fmt_fraction(value) -> str:
    return f"{float(value):.2f}"


def fmt_seconds(value) -> str:
    return f"{float(value):.1f}"


def fmt_int(value) -> str:
    return f"{round(float(value))}"

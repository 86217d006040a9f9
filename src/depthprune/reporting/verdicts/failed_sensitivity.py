"""Which verdicts a failed search decides (docs/method.md §7, "Failed searches"; issue 56 item 4).

A failed search (final calibration loss above one-shot's on the same objective,
``analysis.frames.failed_searches``) did not solve the problem it was given, yet its set enters
every statistic of the paper's claims. This module renders a study a second time without the
algorithms that failed, and pairs every verdict of the two renders:

- ``failed_algorithms``: each algorithm with a failed run anywhere in the study, with its counts.
  The whole algorithm is dropped, not only its failed runs, so that the designs stay balanced
  (every seed, calibration and M keeps the same algorithms; the split-plot and the two-stage
  intervals of §10 need that).
- ``verdict_changes``: the verdict-bearing rows of ``paper_comparison.csv``, ``observations.csv``,
  ``seeds_claims.csv`` and ``random_control_seeds.csv`` of both renders, side by side.

Rows that exist in one render only (a statistic of the dropped algorithm itself, or the
per-run "without failed searches" readings that the reduced study has no reason to write) are kept
and marked ``only with every search`` / ``only without failed searches``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from depthprune.reporting.aggregate import DENSE_ALGORITHM
from depthprune.reporting.analysis.frames import failed_searches
from depthprune.reporting.verdicts.rules import DESCRIPTIVE

# The rendered tables that bear verdicts: file -> (the columns naming a row, its estimate's column).
# random_control_seeds.csv names its row by its cell (model, M, calibration) and has one statistic.
VERDICT_TABLES = {
    "paper_comparison.csv": (("claim", "scope", "statistic"), "value"),
    "observations.csv": (("claim", "scope", "statistic"), "value"),
    "seeds_claims.csv": (("claim", "statistic"), "estimate"),
    "random_control_seeds.csv": ((), "diff"),
}
RANDOM_CONTROL_STATISTIC = "mean of the searches − mean of the random sets (points), across seeds"
ONLY_ALL = "only with every search"
ONLY_WITHOUT = "only without failed searches"
CHANGES_COLUMNS = [
    "table",
    "claim",
    "scope",
    "statistic",
    "estimate_all",
    "ci_low_all",
    "ci_high_all",
    "verdict_all",
    "estimate_without",
    "ci_low_without",
    "ci_high_without",
    "verdict_without",
    "changed",
]


def failed_algorithms(summary: pd.DataFrame) -> pd.DataFrame:
    """Per algorithm with at least one failed run: ``failed_runs`` of ``runs`` (search runs with a
    loss, every seed, calibration, M and model), sorted by name."""
    searched = summary[~summary["algorithm"].isin(["one_shot", DENSE_ALGORITHM])]
    failed = failed_searches(summary).reindex(searched.index)
    counts = (
        pd.DataFrame({"algorithm": searched["algorithm"], "failed": failed.astype(bool)})
        .groupby("algorithm", sort=True)["failed"]
        .agg(failed_runs="sum", runs="size")
        .reset_index()
    )
    return counts[counts["failed_runs"] > 0].reset_index(drop=True)


def without_algorithms(frame: pd.DataFrame | None, algorithms) -> pd.DataFrame | None:
    """``frame`` without the rows of ``algorithms`` (None stays None)."""
    if frame is None or frame.empty or not len(algorithms):
        return frame
    return frame[~frame["algorithm"].isin(list(algorithms))].reset_index(drop=True)


def verdict_rows(tables_dir: Path) -> pd.DataFrame:
    """Every row of the VERDICT_TABLES found in ``tables_dir``, in one frame keyed by (table,
    claim, scope, statistic) with its estimate, interval and verdict."""
    frames = []
    for name, (keys, estimate) in VERDICT_TABLES.items():
        path = tables_dir / name
        if not path.exists():
            continue
        table = pd.read_csv(path, keep_default_na=False, na_values=[""])
        if table.empty:
            continue
        frames.append(_named_rows(name, table, keys, estimate))
    if not frames:
        raise FileNotFoundError(f"{tables_dir}: none of {', '.join(VERDICT_TABLES)} (render the study first)")
    return pd.concat(frames, ignore_index=True)


def _named_rows(name: str, table: pd.DataFrame, keys, estimate: str) -> pd.DataFrame:
    if keys:
        scope = table["scope"].fillna("").astype(str) if "scope" in table else ""
        claim, statistic = table["claim"].astype(str), table["statistic"].astype(str)
    else:  # random_control_seeds.csv
        claim, statistic = "searches vs random", RANDOM_CONTROL_STATISTIC
        scope = table["model"] + " M=" + table["budget"].astype(str) + ", " + table["calibration"]
    return pd.DataFrame(
        {
            "table": name.removesuffix(".csv"),
            "claim": claim,
            "scope": scope,
            "statistic": statistic,
            "estimate": table[estimate],
            "ci_low": table["ci_low"] if "ci_low" in table else float("nan"),
            "ci_high": table["ci_high"] if "ci_high" in table else float("nan"),
            "verdict": table["verdict"].astype(str),
        }
    )


def verdict_changes(all_searches: Path, without_failed: Path) -> pd.DataFrame:
    """The verdict-bearing rows (a verdict other than ``descriptive`` in either render) of two
    rendered ``tables/`` folders, paired: ``changed`` is ``yes``/``no``, or ONLY_ALL / ONLY_WITHOUT
    for a row that one render does not have."""
    keys = ["table", "claim", "scope", "statistic"]
    merged = verdict_rows(all_searches).merge(
        verdict_rows(without_failed), on=keys, how="outer", suffixes=("_all", "_without"), indicator=True, sort=False
    )
    bearing = (merged["verdict_all"].fillna(DESCRIPTIVE) != DESCRIPTIVE) | (
        merged["verdict_without"].fillna(DESCRIPTIVE) != DESCRIPTIVE
    )
    merged = merged[bearing].copy()
    merged["changed"] = [
        ONLY_ALL
        if side == "left_only"
        else ONLY_WITHOUT
        if side == "right_only"
        else "yes"
        if before != after
        else "no"
        for side, before, after in zip(merged["_merge"], merged["verdict_all"], merged["verdict_without"])
    ]
    return merged[CHANGES_COLUMNS].reset_index(drop=True)


def _interval(low, high) -> str:
    return "" if pd.isna(low) or pd.isna(high) else f" [{low:.3g}, {high:.3g}]"


def _value(estimate, low, high) -> str:
    if pd.isna(estimate):
        return ""
    try:
        return f"{float(estimate):.3g}{_interval(low, high)}"
    except (TypeError, ValueError):
        return str(estimate)


def changes_markdown(changes: pd.DataFrame, dropped: pd.DataFrame) -> str:
    """verdict_changes.md: what was dropped, then every verdict that changed (with both estimates),
    then the count of unchanged rows and the rows only one render has."""
    lines = ["# Verdicts with and without the failed searches", ""]
    if dropped.empty:
        return "\n".join(lines + ["No search failed in this study: both renders are the same study.", ""])
    listed = ", ".join(f"{r.algorithm} (failed in {r.failed_runs} of {r.runs} runs)" for r in dropped.itertuples())
    lines += [
        f"Dropped from every seed, calibration and M: {listed}. A failed search ends above one-shot's "
        "calibration loss on its own objective (docs/method.md §7). Every verdict-bearing row of both "
        "renders is in verdict_changes.csv.",
        "",
    ]
    changed = changes[changes["changed"] == "yes"]
    same = changes[changes["changed"] == "no"]
    lines += [
        f"{len(changed)} of {len(changed) + len(same)} verdicts that both renders give change.",
        "",
    ]
    if not changed.empty:
        lines += [
            "| table | claim | scope | statistic | every search | verdict | without failed searches | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in changed.itertuples(index=False):
            lines.append(
                f"| {r.table} | {r.claim} | {r.scope} | {r.statistic} | "
                f"{_value(r.estimate_all, r.ci_low_all, r.ci_high_all)} | {r.verdict_all} | "
                f"{_value(r.estimate_without, r.ci_low_without, r.ci_high_without)} | {r.verdict_without} |"
            )
        lines.append("")
    for label in (ONLY_ALL, ONLY_WITHOUT):
        only = changes[changes["changed"] == label]
        if not only.empty:
            lines.append(f"{len(only)} verdict-bearing rows {label} (in the CSV).")
    return "\n".join(lines) + "\n"

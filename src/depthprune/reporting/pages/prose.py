"""Sentences of the hand-written docs that quote a committed CSV, made from that CSV.

The docs carry each sentence verbatim; tests/test_results_page.py makes it anew from the committed
files and checks that the doc still says it, so a re-render that changes a number fails the test
until the doc is updated (by pasting this function's output).
"""

from __future__ import annotations

from pathlib import Path

from depthprune.reporting.style import algorithm_name, algorithm_sort_key
from depthprune.results_schema import read_report_rows

# The paper tables' baseline of the failed-search test (docs/method.md §7, `analysis.failed_searches`).
ONE_SHOT = "one_shot"


def failed_searches_sentence(repo: str | Path, folder: str = "figures") -> str:
    """docs/method.md §7's count of failed searches in a study, from its tables/table4.csv (CSV
    column `failed_search`): per algorithm that failed, in how many of its (model, calibration, M)
    cells, and the first such cell's final loss against one-shot's on the same objective."""
    rows = read_report_rows(Path(repo) / folder / "tables" / "table4.csv")
    cells: dict[str, int] = {}
    failed: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        cells[r["algorithm"]] = cells.get(r["algorithm"], 0) + 1
        if r["failed_search"] == "True":
            failed.setdefault(r["algorithm"], []).append(r)
    if not failed:
        return f"in `{folder}/tables/table4.csv` no search failed"
    algorithms = sorted(failed, key=algorithm_sort_key)
    counts = ", ".join(f"{algorithm_name(a)} in {len(failed[a])} of {cells[a]} cells" for a in algorithms)
    first = failed[algorithms[0]][0]
    cell = ("model", "budget", "calibration")
    one_shot = next(r for r in rows if r["algorithm"] == ONE_SHOT and all(r[k] == first[k] for k in cell))
    return (
        f"in `{folder}/tables/table4.csv` {counts}; e.g. {algorithm_name(first['algorithm'])}'s final loss "
        f"{float(first['loss']):.2f} against one-shot's {float(one_shot['loss']):.2f} under "
        f"`{first['calibration']}`, M = {first['budget']}"
    )


def sensitivity_sentence(
    repo: str | Path, folder: str = "figures/seeds_default", aggregate: str = "results/seeds_default/aggregate"
) -> str:
    """The README's and docs/method.md's count of the verdicts a study's failed searches decide: which
    algorithm failed in how many runs (its ``aggregate``'s summary), and how many of the verdicts both
    renders give change (``folder``'s without_failed_searches/verdict_changes.csv, made by
    `snakemake failed_search_sensitivity`)."""
    import pandas as pd

    from depthprune.paths import SENSITIVITY_DIR
    from depthprune.reporting.verdicts.failed_sensitivity import failed_algorithms

    root = Path(repo)
    changes = read_report_rows(root / folder / SENSITIVITY_DIR / "verdict_changes.csv")
    both = [r for r in changes if r["changed"] in ("yes", "no")]
    changed = [r for r in both if r["changed"] == "yes"]
    dropped = failed_algorithms(pd.read_csv(root / aggregate / "summary.csv"))
    listed = " and ".join(
        f"{algorithm_name(r.algorithm)} fails on its own objective in {r.failed_runs} of its {r.runs} runs"
        for r in dropped.itertuples()
    )
    decide = " and alone decides" if len(dropped) == 1 else "; together they decide"
    return f"{listed}{decide} {len(changed)} of the {len(both)} verdicts both renders give"

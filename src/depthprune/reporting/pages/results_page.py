"""docs/results.md, written from the committed studies' rendered files, so the page cannot drift.

For every study folder (the default `figures/`, `figures/two_families/`, `figures/calibration_size/`,
`figures/protect_none/`) the page shows its figures, the paper's numbers beside ours
(tables/paper_comparison.csv), the verdict of every claim per cell (tables/observations.csv), and
Tables 1-6 as `render` wrote them
(tables/table<N>.md, rendered from the CSVs beside them). `depthprune results-page` writes it;
tests/test_results_page.py regenerates it and compares it with the committed page. It also writes
the README's short table of headline findings (between `<!-- headline:begin -->` and
`<!-- headline:end -->`), from the default study's paper_comparison.csv, its across-seeds table (one
row per claim and statistic of seeds_claims.csv, between `<!-- seeds:begin -->` and
`<!-- seeds:end -->`), its table of TLM pruning against perplexity pruning and the baseline per search
space (between `<!-- tlm:begin -->` and `<!-- tlm:end -->`), from calibration_contrast.csv, and its
objective-or-data paragraph (`<!-- decomposition:… -->`). Each README table says which way a
"holds" points (reporting/pages/directions.py).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from depthprune.errors import InputError
from depthprune.io import atomic_write_text
from depthprune.reporting.analysis.random_control import CLAIM, SEARCH_MEAN
from depthprune.reporting.pages.directions import GAP, RANDOM_SETS, holds_means
from depthprune.reporting.statistics.two_stage import ALGORITHM_SPREAD, CALIBRATION_SHIFT
from depthprune.reporting.verdicts.across_seeds import INFORMATIVE_SCOPE
from depthprune.reporting.verdicts.rules import DESCRIPTIVE
from depthprune.results_schema import read_report_rows

# Study folder -> (title, the preset that makes it); folders not listed get their own name.
STUDIES = {
    "figures": ("Default study: SmolLM2-135M", "config.yaml"),
    "figures/two_families": ("Two model families: SmolLM2-135M and Gemma 3 270M", "config/two_families.yaml"),
    "figures/calibration_size": ("Calibration-size study", "config/calibration_size.yaml"),
    "figures/calibration_size_v2": (
        "Calibration-size study v2: first and last block kept, eight draws, 8-128 items",
        "config/calibration_size_v2.yaml",
    ),
    "figures/protect_none": ("Sensitivity: every block removable (no barrier)", "config/protect_none.yaml"),
    "figures/tlm_sensitivity": ("Sensitivity: TLM with the bounded cross-entropy loss", "config/tlm_sensitivity.yaml"),
    "figures/cross_control": ("Objective or data: the cross-control ppl_cs170k", "config/cross_control.yaml"),
    "figures/seeds_default": ("Across seeds: the default study at seeds 0-3", "config/seeds_default.yaml"),
    "figures/rescore_informative": (
        "Rescore: the four-seed sets at M = 7 on 1000 documents of HellaSwag, ARC-Easy and PIQA, with random sets",
        "config/rescore_informative.yaml",
    ),
}
DEFAULT_STUDIES = tuple(STUDIES)
# The README tables' "study" column: which study each row comes from (issue 58).
STUDY_LABELS = {
    "figures": "default: seed 0, 9 tasks × 116 docs",
    "figures/seeds_default": "seeds 0-3, 9 tasks × 116 docs",
    "figures/rescore_informative": "rescore: seeds 0-3, 3 tasks × 1000 docs",
}
PAGE = Path("docs/results.md")
HEADLINE_BEGIN, HEADLINE_END = "<!-- headline:begin -->", "<!-- headline:end -->"
TLM_BEGIN, TLM_END = "<!-- tlm:begin -->", "<!-- tlm:end -->"
DECOMPOSITION_BEGIN, DECOMPOSITION_END = "<!-- decomposition:begin -->", "<!-- decomposition:end -->"
# The README's objective-or-data paragraph: the cross-control study (docs/method.md §9).
DECOMPOSITION_STUDY = "figures/cross_control"
SEEDS_BEGIN, SEEDS_END = "<!-- seeds:begin -->", "<!-- seeds:end -->"
# The README's across-seeds table: the default study at several seeds (docs/method.md §10), then the
# rescore study's accuracy rows (§11: its sets and perplexities are the four-seed study's, so its
# §5.1 and perplexity rows repeat that study's; its new evidence is the accuracy and random sets).
SEEDS_STUDY = "figures/seeds_default"
ACCURACY_ONLY = "accuracy"
SEEDS_STUDIES = ((SEEDS_STUDY, None), ("figures/rescore_informative", ACCURACY_ONLY))
# The README's TLM table: (search space, study folder) of each committed default-study variant: the
# default with the first and last block kept ([22]'s barrier, docs/method.md §4) and its sensitivity
# run without the barrier (config/protect_none.yaml).
TLM_STUDIES = (("first and last block kept", "figures"), ("every block removable", "figures/protect_none"))
VERDICTS = ("holds", "does not hold", "inconclusive", "uninformative")
TABLES = ("table1", "table2", "table3", "table4", "table5", "table6")
FIGURES = ("figure1", "figure2", "figure3", "calibration_size")


def read_rows(path: Path) -> list[dict[str, str]]:
    """A rendered table's rows as text, refused (ValueError naming it) when cut off or lacking a
    column the page reads (results_schema.REPORT_TABLE_SCHEMAS)."""
    return read_report_rows(path)


def number(text: str) -> str:
    """A CSV number at four significant digits ('' stays empty; integers stay integers)."""
    if text == "":
        return ""
    value = float(text)
    if math.isfinite(value) and value == int(value) and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.4g}"


def null_pass(row: dict[str, str], column: str = "null_pass_probability") -> str:
    """The null pass (or, with ``column``, fail) probability as a percentage ('' where the CSV has none)."""
    text = row.get(column, "")
    return "" if text == "" else f"{100 * float(text):.0f} %"


def null_fail(row: dict[str, str]) -> str:
    """The null fail probability as a percentage ('' where the CSV has none)."""
    return null_pass(row, "null_fail_probability")


def with_interval(row: dict[str, str]) -> str:
    value = number(row["value"])
    if row.get("ci_low", "") != "" and row.get("ci_high", "") != "":
        value += f" [{number(row['ci_low'])}, {number(row['ci_high'])}]"
    return value


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def study_section(repo: Path, folder: str, out_dir: Path) -> list[str]:
    root = repo / folder
    tables = root / "tables"
    title, preset = STUDIES.get(folder, (folder, None))
    lines = [f"## {title}", ""]
    if preset:
        lines += [f"Preset `{preset}`; files under `{folder}/`.", ""]
    figures = [root / f"{name}.png" for name in FIGURES if (root / f"{name}.png").is_file()]
    if figures:
        lines += ["### Figures", ""]
        for figure in figures:
            link = Path(os.path.relpath(figure, out_dir)).as_posix()
            lines += [f"![{figure.stem}]({link})", ""]
    if (tables / "seeds_claims.csv").is_file() and _has_seed_statistics(tables):
        link = Path(os.path.relpath(root / "seeds.png", out_dir)).as_posix()
        lines += [
            "### Across seeds (docs/method.md §10)",
            "",
            f"From `{folder}/tables/seeds_claims.csv`: each claim's verdict across seeds, and each seed's.",
            "",
            seeds_table(repo, folder),
            "",
            f"![seeds]({link})",
            "",
        ]
    if (tables / "random_control_seeds.csv").is_file():
        rows = [
            [r["calibration"], r["budget"], r["n_seeds"], f"{points(r['diff'])} [{points(r['ci_low'])}, "
             f"{points(r['ci_high'])}]", null_pass(r, "null_above"), null_pass(r, "null_below"), r["side"],
             r["verdict"]]
            for r in read_rows(tables / "random_control_seeds.csv")
        ]  # fmt: skip
        lines += [
            "### Searches against random sets (docs/method.md §11)",
            "",
            f"From `{folder}/tables/random_control_seeds.csv`: {SEARCH_MEAN} minus the mean of the random sets, "
            "in points of average accuracy (the noise null exchanges the searches' and the random sets' scores).",
            "",
        ]
        header = ["calibration", "M", "seeds", "difference [95% CI]", "null above", "null below", "interval"]
        lines += markdown_table([*header, CLAIM], rows) + [""]
    comparison = tables / "paper_comparison.csv"
    if comparison.is_file():
        lines += [
            "### The paper's numbers beside ours",
            "",
            f"From `{folder}/tables/paper_comparison.csv`; ours with its 95% bootstrap interval where one exists.",
            "",
        ]
        rows = [[r["claim"], *comparison_cells(r)] for r in read_rows(comparison)]
        header = ["§", "scope", "statistic", "paper", "ours [95% CI]", "null pass", "null fail", "verdict"]
        lines += markdown_table(header, rows) + [""]
    observations = tables / "observations.csv"
    if observations.is_file():
        rows = [
            [r["claim"], r["scope"], r["statistic"], with_interval(r), r["verdict"]]
            for r in read_rows(observations)
            if r["verdict"] in VERDICTS
        ]
        if rows:
            lines += ["### Verdicts per cell", "", f"The judged rows of `{folder}/tables/observations.csv`.", ""]
            lines += markdown_table(["§", "scope", "statistic", "ours [95% CI]", "verdict"], rows) + [""]
    rendered = [tables / f"{name}.md" for name in (*TABLES, "calibration_size") if (tables / f"{name}.md").is_file()]
    if rendered:
        lines += [
            "### Tables",
            "",
            f"As `render` wrote them (`{folder}/tables/<name>.md`, from the CSVs beside them).",
            "",
        ]
        for table in rendered:
            lines += [table.read_text(encoding="utf-8").strip(), ""]
    return lines


def results_page(repo: str | Path, studies=DEFAULT_STUDIES) -> str:
    """The page's text for the study folders `studies` (relative to `repo`); its links are relative
    to docs/, where the page is committed, wherever it is written. A folder that holds no study (no
    tables/ written by `render`: a typo, say) is an error naming it, not a page without it."""
    repo = Path(repo)
    check_studies(repo, studies)
    out_dir = repo / PAGE.parent
    lines = [
        "# Results",
        "",
        "<!-- Generated by `depthprune results-page` from the committed figures/**/tables/*; do not edit. -->",
        "",
        "Every committed study: its figures, the paper's numbers beside ours, the verdict of each claim,",
        "and Tables 1–6. How the statistics and verdicts are computed: [method.md §7](method.md).",
        "",
    ]
    lines += [f"- [{STUDIES.get(f, (f, None))[0]}](#{anchor(STUDIES.get(f, (f, None))[0])})" for f in studies]
    lines.append("")
    for folder in studies:
        lines += study_section(repo, folder, out_dir)
    return "\n".join(lines).rstrip() + "\n"


def check_studies(repo: Path, studies) -> None:
    """Every folder of `studies` holds a rendered study (its tables/ folder); at least one is named."""
    if not studies:
        raise InputError("--studies: no study folder named")
    for folder in studies:
        if not (repo / folder / "tables").is_dir():
            what = "does not exist" if not (repo / folder).is_dir() else "holds no study (no tables/ from `render`)"
            raise InputError(f"--studies {folder}: {repo / folder} {what}; nothing was written")


def anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces as hyphens."""
    kept = "".join(ch for ch in title.lower() if ch.isalnum() or ch in " -")
    return kept.replace(" ", "-")


def direction(row: dict[str, str], estimate: str) -> str:
    """The row's "holds means" cell (reporting/pages/directions.py), the gap's sign read from the
    column `estimate`."""
    value = row.get(estimate, "")
    return holds_means(row["claim"], float(value) if value != "" else None)


def comparison_cells(row: dict) -> list[str]:
    """A paper_comparison.csv row's cells after its claim, as the results page and the README show
    them: scope, statistic, the paper's value, ours with its interval, the null rates, the verdict."""
    return [
        row["scope"],
        row["statistic"],
        row["paper_value"],
        with_interval(row),
        null_pass(row),
        null_fail(row),
        row["verdict"],
    ]


def headline_table(repo: str | Path, folder: str = "figures") -> str:
    """The README's table of headline findings: the judged claims of the default study's
    paper_comparison.csv, ours with its interval beside the paper's value, and which way its
    "holds" points."""
    study = STUDY_LABELS.get(folder, folder)
    rows = [
        [study, f"§{r['claim']}", *comparison_cells(r), direction(r, "value")]
        for r in read_rows(Path(repo) / folder / "tables" / "paper_comparison.csv")
        if r["verdict"] in VERDICTS
    ]
    header = ["study", "claim", "scope", "statistic", "paper", "ours [95% CI]", "null pass", "null fail", "verdict"]
    return "\n".join(markdown_table([*header, "holds means"], rows))


def points(text: str) -> str:
    """A CSV fraction as percentage points, one decimal, signed."""
    return f"{100 * float(text):+.1f}"


def tlm_table(repo: str | Path, studies=TLM_STUDIES) -> str:
    """The README's table of TLM pruning against perplexity pruning and against the baseline: the
    mean over the algorithms (calibration_contrast.csv) of each search space's study, in points of
    average zero-shot accuracy with 95 % paired-bootstrap intervals and the mdd at 80 % power. The
    baseline is the larger of chance and the majority answer per task (baselines.csv); a line under
    the table states it per study, and that studies with different documents per task are unpaired."""
    rows, notes, limits = [], [], []
    for space, folder in studies:
        tables = Path(repo) / folder / "tables"
        if not (tables / "calibration_contrast.csv").is_file():
            continue
        limit = next(iter(read_rows(tables / "evaluation_size.csv")), {}).get("limit", "")
        limits.append(limit)
        for r in read_rows(tables / "calibration_contrast.csv"):
            if r["algorithm"] != "mean of the algorithms":
                continue
            key = "baseline" if r.get("tlm_minus_baseline", "") != "" else "chance"
            rows.append(
                [
                    space,
                    r["budget"],
                    limit,
                    f"{100 * float(r['acc_tlm_pruned']):.1f} %",
                    f"{100 * float(r['acc_perplexity_pruned']):.1f} %",
                    f"{points(r['diff_tlm_minus_ppl'])} [{points(r['diff_ci_low'])}, {points(r['diff_ci_high'])}] "
                    f"({r['tlm_vs_ppl']})",
                    holds_means(GAP, float(r["diff_tlm_minus_ppl"])),
                    f"{100 * float(r['mdd']):.1f}",
                    f"{100 * float(r[key]):.1f} %",
                    f"{points(r[f'tlm_minus_{key}'])} [{points(r[f'tlm_minus_{key}_ci_low'])}, "
                    f"{points(r[f'tlm_minus_{key}_ci_high'])}] ({r[f'tlm_vs_{key}']})",
                ]
            )
        if (tables / "baselines.csv").is_file():
            notes.append(f"{space}: {baseline_note(read_rows(tables / 'baselines.csv'))}")
    gap = ["TLM − perplexity [95% CI]", "a gap (≠ 0) means"]
    header = ["search space", "M", "docs/task", "TLM-pruned", "perplexity-pruned", *gap, "mdd"]
    lines = markdown_table([*header, "baseline", "TLM − baseline [95% CI]"], rows)
    below = []  # one paragraph under the table
    if notes:
        below.append(
            "Baseline: the mean over the six tasks of the larger of chance (1/k) and the majority answer "
            "(BoolQ only) on the evaluated documents; " + "; ".join(notes) + "."
        )
    if len(set(limits)) > 1:
        below.append(
            "The search spaces were evaluated on different numbers of documents per task "
            f"({', '.join(limits)}): their rows are unpaired, and their differences carry no paired interval."
        )
    if below:
        lines += ["", " ".join(below)]
    return "\n".join(lines)


def baseline_note(rows: list[dict[str, str]]) -> str:
    """'chance 37.5 %, baseline 40.5 % (BoolQ: always "yes" 68.1 % of 116)' from a baselines.csv."""
    chance = sum(float(r["chance"]) for r in rows) / len(rows)
    baseline = sum(float(r["baseline"]) for r in rows) / len(rows)
    answers = {"0": "no", "1": "yes"}
    majority = [
        f'{r["benchmark"]}: always "{answers.get(r["majority_answer"], r["majority_answer"])}" '
        f"{100 * float(r['majority']):.1f} % of {r['n_documents']}"
        for r in rows
        if r["majority"] != ""
    ]
    return f"chance {100 * chance:.1f} %, baseline {100 * baseline:.1f} %" + (
        f" ({'; '.join(majority)})" if majority else ""
    )


def decomposition_paragraph(repo: str | Path, folder: str = DECOMPOSITION_STUDY) -> str:
    """The README's objective-or-data paragraph, every number and word read from the cross-control
    study's tables/calibration_decomposition{,_sets}.csv (the mean over the algorithms per M)."""
    tables = Path(repo) / folder / "tables"
    effects = [
        r for r in read_rows(tables / "calibration_decomposition.csv") if r["algorithm"] == "mean of the algorithms"
    ]
    sets = read_rows(tables / "calibration_decomposition_sets.csv")

    def estimate(row: dict[str, str], digits: int) -> str:
        value, lo, hi = (float(row[k]) for k in ("estimate", "ci_low", "ci_high"))
        return f"{value:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"

    sentences = []
    for budget in sorted({int(r["budget"]) for r in effects}):
        cell_rows = [r for r in effects if int(r["budget"]) == budget]
        acc = {r["effect"]: r for r in cell_rows if r["response"] == "avg_accuracy"}
        ppl = {r["effect"]: r for r in cell_rows if r["response"] == "log10_avg_perplexity"}
        layers = {r["effect"]: r for r in sets if int(r["budget"]) == budget}
        compare = acc["objective_minus_data"]
        if compare["verdict"] == "holds":
            carrier = "the objective step" if compare["direction"] == "lower" else "the data step"
            verdict = f"{carrier} costs more accuracy than the other (objective − data {estimate(compare, 1)})"
        else:
            verdict = f"the two steps are not told apart (objective − data {estimate(compare, 1)}, inconclusive)"
        layer_text = "; ".join(
            f"{step} step within − across Jaccard {float(layers[step]['within_minus_across']):.2f} "
            f"(p = {number(layers[step]['p_permutation'])}, {layers[step]['verdict']}; across "
            f"{float(layers[step]['across']):.2f}, random pairs [{float(layers[step]['across_null_low']):.2f}, "
            f"{float(layers[step]['across_null_high']):.2f}])"
            for step in ("data", "objective")
            if step in layers
        )
        sentences.append(
            f"At M = {budget} the TLM − perplexity gap of {estimate(acc['total'], 1)} points splits into a "
            f"data step (C4 → Commonsense-170k, perplexity kept) of {estimate(acc['data'], 1)} "
            f"({acc['data']['verdict']}) and an objective step (perplexity → TLM, Commonsense-170k kept) of "
            f"{estimate(acc['objective'], 1)} ({acc['objective']['verdict']}): {verdict}. "
            f"In log10 average perplexity the data step is {estimate(ppl['data'], 2)} orders "
            f"({ppl['data']['verdict']}), the objective step {estimate(ppl['objective'], 2)} "
            f"({ppl['objective']['verdict']}). Removed blocks: {layer_text}."
        )
    return " ".join(sentences)


def _has_seed_statistics(tables: Path) -> bool:
    """Whether a study's cross-seed tables hold statistics (a one-shot study's are empty)."""
    return len(read_rows(tables / "seeds_two_stage.csv")) > 0


def seeds_table(repo: str | Path, folder: str = SEEDS_STUDY) -> str:
    """Per claim and headline statistic of a multi-seed study's seeds_claims.csv: the cross-seed
    estimate with its interval, how many seeds hold on their own, each seed's verdict, and the
    verdict across seeds (the per-condition §5.2 rows stay in the CSV)."""
    rows = []
    for r in read_rows(Path(repo) / folder / "tables" / "seeds_claims.csv"):
        if CALIBRATION_SHIFT in r["statistic"] or ALGORITHM_SPREAD in r["statistic"]:
            continue  # one row per §5.2 condition: in the CSV
        estimate = number(r["estimate"]) if r["estimate"] else ""
        if r["ci_low"]:
            estimate += f" [{number(r['ci_low'])}, {number(r['ci_high'])}]"
        claim = "gap" if r["claim"] == "gap" else f"§{r['claim']}"
        rows.append([claim, r["statistic"], estimate, r["seeds_holding"], r["per_seed"], r["verdict"]])
    header = ["claim", "statistic", "across seeds [95% CI]", "seeds holding", "per seed", "verdict"]
    return "\n".join(markdown_table(header, rows))


def in_seeds_headline(row: dict, changed: set[str]) -> bool:
    """Whether a seeds_claims.csv row is in the README's across-seeds table: every row that bears a
    verdict, except the per-condition §5.2 rows and the parts of an "or" claim (summarised by their
    claim's row) and the informative-task twins of rows they do not change (all are in the CSV and
    docs/results.md)."""
    statistic = row["statistic"]
    if CALIBRATION_SHIFT in statistic or ALGORITHM_SPREAD in statistic or "(part '" in statistic:
        return False
    if row["verdict"] == DESCRIPTIVE:
        return False
    if statistic.endswith(INFORMATIVE_SCOPE):
        return statistic.removesuffix(INFORMATIVE_SCOPE) in changed
    return True


def seeds_headline(repo: str | Path, studies=SEEDS_STUDIES) -> str:
    """The README's across-seeds table (docs/method.md §10): for each multi-seed study of `studies`
    that is rendered, one row per claim and statistic of its seeds_claims.csv (the TLM − perplexity
    gap per M in points), with the study, the cross-seed estimate and interval, how many seeds hold
    on their own, each seed's verdict or value, the verdict across seeds and which way its "holds"
    points; then its random-set control rows (random_control_seeds.csv, §11) where it has them.
    Rows are read, not listed: a statistic the CSV gains gets a row. The per-condition §5.2 rows are
    summarised by their "conditions whose … passes" rows and stay in the CSV (and docs/results.md);
    a study marked ``ACCURACY_ONLY`` shows its accuracy rows only."""
    rows = []
    for folder, scope in studies:
        tables = Path(repo) / folder / "tables"
        if (tables / "seeds_claims.csv").is_file():
            rows += _seeds_rows(tables, STUDY_LABELS.get(folder, folder), scope)
    header = ["study", "claim", "statistic", "across seeds [95% CI]", "seeds holding", "per seed (0, 1, …)", "verdict"]
    return "\n".join(markdown_table([*header, "holds means"], rows))


def _seeds_rows(tables: Path, study: str, scope: str | None) -> list[list[str]]:
    rows = []
    claims = read_rows(tables / "seeds_claims.csv")
    changed = {r["statistic"] for r in claims if r.get("changed_by_informative") == "yes"}
    for r in claims:
        if not in_seeds_headline(r, changed) or (scope == ACCURACY_ONLY and not _about_accuracy(r)):
            continue
        if r["claim"] == GAP:
            label = "TLM − perplexity, " + r["statistic"].split(":")[0].split()[-1]  # "<model> M=7: …"
            label += INFORMATIVE_SCOPE if r["statistic"].endswith(INFORMATIVE_SCOPE) else ""
            value, lo, hi = (float(r[k]) for k in ("estimate", "ci_low", "ci_high"))
            estimate = f"{value:+.1f} [{lo:+.1f}, {hi:+.1f}] points"
        else:
            label = "the claim" if r["statistic"] == "claim" else r["statistic"]
            estimate = number(r["estimate"])
            if r["ci_low"] != "" and r["ci_high"] != "":
                estimate += f" [{number(r['ci_low'])}, {number(r['ci_high'])}]"
        claim = "gap" if r["claim"] == GAP else f"§{r['claim']}"
        row = [claim, label, estimate, r["seeds_holding"], r["per_seed"], r["verdict"], direction(r, "estimate")]
        rows.append([study, *row])
    if (tables / "random_control_seeds.csv").is_file():
        per_seed = [r for r in read_rows(tables / "random_control.csv") if r["comparison"] == SEARCH_MEAN]
        for r in read_rows(tables / "random_control_seeds.csv"):
            cell = (r["model"], r["budget"], r["calibration"])
            seeds = [points(x["diff"]) for x in per_seed if (x["model"], x["budget"], x["calibration"]) == cell]
            value = f"{points(r['diff'])} [{points(r['ci_low'])}, {points(r['ci_high'])}] points"
            label = f"{r['calibration']} M={r['budget']}: {SEARCH_MEAN} − mean of the random sets"
            rows.append(
                [study, RANDOM_SETS, label, value, "", ", ".join(seeds), r["verdict"], holds_means(RANDOM_SETS)]
            )
    return rows


def _about_accuracy(row: dict) -> bool:
    """A seeds_claims.csv row an evaluation-only study's new documents decide: not §5.1 (the sets are
    its source's) and not §5.2's perplexity half (its perplexities are its source's, §11)."""
    if row["claim"] == "5.1":
        return False
    return not (row["claim"] == "5.2" and row["statistic"].startswith("perplexity"))


def readme_with_block(readme: str, begin: str, end: str, text: str) -> str:
    """`readme` with the text between the markers `begin` and `end` replaced by `text`."""
    start, stop = readme.index(begin) + len(begin), readme.index(end)
    return readme[:start] + "\n" + text + "\n" + readme[stop:]


def readme_with_headline(readme: str, table: str) -> str:
    """`readme` with the text between its headline markers replaced by `table`."""
    return readme_with_block(readme, HEADLINE_BEGIN, HEADLINE_END, table)


def readme_generated(readme: str, repo: str | Path) -> str:
    """`readme` with every generated block (the headline table, the TLM table) written anew."""
    readme = readme_with_headline(readme, headline_table(repo))
    if TLM_BEGIN in readme:
        readme = readme_with_block(readme, TLM_BEGIN, TLM_END, tlm_table(repo))
    if SEEDS_BEGIN in readme and (Path(repo) / SEEDS_STUDY / "tables" / "seeds_claims.csv").is_file():
        readme = readme_with_block(readme, SEEDS_BEGIN, SEEDS_END, seeds_headline(repo))
    if DECOMPOSITION_BEGIN in readme:
        readme = readme_with_block(readme, DECOMPOSITION_BEGIN, DECOMPOSITION_END, decomposition_paragraph(repo))
    return readme


def write_results_page(repo: str | Path, out: str | Path | None = None, studies=DEFAULT_STUDIES) -> Path:
    """Write the page to `out` (default: docs/results.md of `repo`); with the default `out`, also
    the headline table between the markers of `repo`'s README.md."""
    repo = Path(repo)
    path = Path(out) if out is not None else repo / PAGE
    page = results_page(repo, studies)
    readme = repo / "README.md"
    readme_text = None
    if out is None and readme.is_file() and HEADLINE_BEGIN in readme.read_text(encoding="utf-8"):
        readme_text = readme_generated(readme.read_text(encoding="utf-8"), repo)
    # Both texts are made before either file is written: a broken table leaves both as they were.
    atomic_write_text(path, page)
    if readme_text is not None:
        atomic_write_text(readme, readme_text)
    return path

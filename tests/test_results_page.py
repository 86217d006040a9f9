"""docs/results.md is `depthprune results-page`'s output for the committed studies (so it cannot drift)."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from depthprune.reporting.pages.results_page import (
    DECOMPOSITION_BEGIN,
    DECOMPOSITION_END,
    DEFAULT_STUDIES,
    HEADLINE_BEGIN,
    HEADLINE_END,
    SEEDS_BEGIN,
    SEEDS_END,
    SEEDS_STUDIES,
    SEEDS_STUDY,
    STUDY_LABELS,
    TLM_BEGIN,
    TLM_END,
    headline_table,
    number,
    read_rows,
    readme_generated,
    readme_with_headline,
    results_page,
    seeds_headline,
    tlm_table,
)
from depthprune.reporting.statistics.two_stage import ALGORITHM_SPREAD, CALIBRATION_SHIFT

REPO = Path(__file__).resolve().parents[1]


def test_committed_page_is_the_generated_one(tmp_path):
    out = tmp_path / "results.md"
    proc = subprocess.run(
        [sys.executable, "-m", "depthprune", "results-page", "--repo", str(REPO), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    committed = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == committed, (
        "docs/results.md is stale: regenerate it with `depthprune results-page`"
    )
    for folder in DEFAULT_STUDIES:  # every committed study is on the page
        assert f"`{folder}/tables/paper_comparison.csv`" in committed


def test_page_follows_the_csvs(tmp_path):
    shutil.copytree(REPO / "figures" / "tables", tmp_path / "figures" / "tables")
    before = results_page(tmp_path, ("figures",))
    path = tmp_path / "figures" / "tables" / "paper_comparison.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    assert header[:4] == ["claim", "scope", "statistic", "paper_value"]
    assert header[-3:] == ["null_pass_probability", "null_fail_probability", "verdict"]
    lines.append('5.9,"test scope",a new statistic,0.5,0.123456,0.1,0.2,0.25,0.6,uninformative')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    after = results_page(tmp_path, ("figures",))
    assert after != before
    assert "| 5.9 | test scope | a new statistic | 0.5 | 0.1235 [0.1, 0.2] | 25 % | 60 % | uninformative |" in after


def test_number_format():
    assert [number(x) for x in ("", "6", "-1", "0.53448148", "11.967742", "1e-09")] == [
        "",
        "6",
        "-1",
        "0.5345",
        "11.97",
        "1e-09",
    ]


def test_readme_headline_table_is_the_generated_one():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert HEADLINE_BEGIN in readme and HEADLINE_END in readme
    assert readme_with_headline(readme, headline_table(REPO)) == readme, (
        "README.md's headline table is stale: regenerate it with `depthprune results-page`"
    )
    header = (
        "| study | claim | scope | statistic | paper | ours [95% CI] | null pass | null fail | verdict | holds means |"
    )
    assert header in readme
    for line in headline_table(REPO).splitlines()[2:]:  # every row names its study (issue 58)
        assert line.startswith(f"| {STUDY_LABELS['figures']} | §")


def test_readme_generated_blocks_are_current():
    """Every generated block of the README (headline, seeds, TLM, objective or data) is what
    `depthprune results-page` makes from the committed CSVs now."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for begin, end in ((TLM_BEGIN, TLM_END), (SEEDS_BEGIN, SEEDS_END), (DECOMPOSITION_BEGIN, DECOMPOSITION_END)):
        assert begin in readme and end in readme, begin
    assert readme_generated(readme, REPO) == readme, (
        "README.md's generated blocks are stale: regenerate them with `depthprune results-page`"
    )


def copy_tables(folder: str, tmp_path: Path) -> Path:
    shutil.copytree(REPO / folder / "tables", tmp_path / folder / "tables")
    return tmp_path / folder / "tables"


def write_rows(path: Path, rows: list[dict[str, str]]) -> None:
    import csv

    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def test_readme_seeds_table_has_a_row_per_claim_and_statistic(tmp_path):
    """Issue 57 item 6: the across-seeds table shows each verdict-bearing statistic, so a robust "does
    not hold" (§5.2's algorithm spread) and the §5.3 "or" are visible; a statistic the CSV gains gets
    a row without code naming it. In the CSV only: the per-condition §5.2 rows, the parts of an "or",
    descriptive rows, and informative-task twins that do not change their row's verdict."""
    rows = read_rows(REPO / SEEDS_STUDY / "tables" / "seeds_claims.csv")
    table = seeds_headline(REPO, ((SEEDS_STUDY, None),)).splitlines()
    changed = {r["statistic"] for r in rows if r.get("changed_by_informative") == "yes"}
    assert changed, "the committed study has a row the informative tasks change"
    shown = 0
    for r in rows:
        statistic, twin = r["statistic"], r["statistic"].endswith(", informative tasks")
        hidden = (
            CALIBRATION_SHIFT in statistic
            or ALGORITHM_SPREAD in statistic
            or "(part '" in statistic
            or r["verdict"] == "descriptive"
            or (twin and statistic.removesuffix(", informative tasks") not in changed)
        )
        if r["claim"] == "gap" or statistic == "claim":
            shown += not hidden
            continue
        present = any(f"| {statistic} |" in line and f"| {r['verdict']} |" in line for line in table)
        assert present != hidden, r
        shown += present
    assert len(table) == 2 + shown
    tables = copy_tables(SEEDS_STUDY, tmp_path)
    path = tables / "seeds_claims.csv"
    with path.open("a", encoding="utf-8") as handle:
        handle.write('5.3,a statistic added later,4,0.25,0.1,0.4,,,3 of 4,"a, b",,,holds,some rule,\n')
    assert seeds_headline(tmp_path).splitlines()[-1] == (
        f"| {STUDY_LABELS[SEEDS_STUDY]} | §5.3 | a statistic added later | 0.25 [0.1, 0.4] | 3 of 4 | a, b | holds "
        "| supports the paper |"
    )


def test_holds_means_is_derived_from_the_claim_and_the_gaps_sign(tmp_path):
    """Each headline row says which way "holds" points, from reporting/pages/directions.py: the paper's
    claims support the paper; the TLM − perplexity gap, this project's test, is against it, its
    sign saying which way; a claim the module does not know is an error naming it."""
    from depthprune.reporting.pages.directions import SUPPORTS, TLM_BETTER, TLM_WORSE, holds_means

    for line in headline_table(REPO).splitlines()[2:]:
        assert line.endswith(f"| {SUPPORTS} |")
    path = copy_tables(SEEDS_STUDY, tmp_path) / "seeds_claims.csv"
    rows = read_rows(path)
    gap = next(r for r in rows if r["claim"] == "gap")
    assert float(gap["estimate"]) < 0  # the committed M = 7 gap: TLM worse
    assert seeds_headline(REPO).splitlines()[2].endswith(f"| {TLM_WORSE} |")
    for key, other in (("estimate", "estimate"), ("ci_low", "ci_high"), ("ci_high", "ci_low")):
        gap[key] = str(-float(read_rows(REPO / SEEDS_STUDY / "tables" / "seeds_claims.csv")[0][other]))
    write_rows(path, rows)
    assert seeds_headline(tmp_path).splitlines()[2].endswith(f"| {TLM_BETTER} |")
    for line in tlm_table(REPO).splitlines()[2:6]:
        assert f"(lower) | {TLM_WORSE} |" in line
    gap["claim"] = "floor"
    write_rows(path, rows)
    with pytest.raises(ValueError, match=r"claim 'floor'.*directions\.py"):
        seeds_headline(tmp_path)
    assert holds_means("§5.1") == SUPPORTS


def test_method_doc_failed_search_count_is_the_committed_one():
    """Issue 57 item 6: docs/method.md §7's count of failed searches is made from the default
    study's table4.csv (`failed_search`), not typed."""
    from depthprune.reporting.pages.prose import failed_searches_sentence

    doc = " ".join((REPO / "docs" / "method.md").read_text(encoding="utf-8").split())
    sentence = failed_searches_sentence(REPO)
    assert "CBO in 2 of 4 cells, CBO (Taylor) in 4 of 4 cells" in sentence  # what the committed table says
    assert sentence in doc, f"docs/method.md §7 should say: {sentence}"


def test_readme_and_method_doc_count_the_verdicts_cbo_decides_from_the_committed_files():
    """Issue 56 item 4: the count of verdicts the failed searches decide is made from the four-seed
    study's verdict_changes.csv and its aggregate, not typed."""
    from depthprune.reporting.pages.prose import sensitivity_sentence

    sentence = sensitivity_sentence(REPO)
    assert sentence.startswith("CBO fails on its own objective in 9 of its 16 runs and CBO (Taylor) fails")
    for doc in ("README.md", "docs/method.md"):
        text = " ".join((REPO / doc).read_text(encoding="utf-8").split())
        assert sentence in text, f"{doc} should say: {sentence}"


def test_sensitivity_sentence_follows_the_comparison(tmp_path):
    import shutil

    from depthprune.reporting.pages.prose import sensitivity_sentence

    sensitivity = tmp_path / "figures" / "without_failed_searches"
    sensitivity.mkdir(parents=True)
    text = (REPO / "figures" / "without_failed_searches" / "verdict_changes.csv").read_text(encoding="utf-8")
    (sensitivity / "verdict_changes.csv").write_text(text.replace(",yes\n", ",no\n"), encoding="utf-8")
    (tmp_path / "results" / "aggregate").mkdir(parents=True)
    shutil.copy(REPO / "results" / "aggregate" / "summary.csv", tmp_path / "results" / "aggregate")
    sentence = sensitivity_sentence(tmp_path, "figures", "results/aggregate")
    assert sentence.startswith(
        "CBO fails on its own objective in 2 of its 4 runs and CBO (Taylor) fails on its own objective in 4 of its 4 runs; together they decide 0 of the"
    )


def test_failed_search_sentence_follows_the_table(tmp_path):
    from depthprune.reporting.pages.prose import failed_searches_sentence

    tables = copy_tables("figures", tmp_path)
    text = (tables / "table4.csv").read_text(encoding="utf-8")
    (tables / "table4.csv").write_text(text.replace(",True,", ",False,"), encoding="utf-8")
    assert failed_searches_sentence(tmp_path) == "in `figures/tables/table4.csv` no search failed"


def test_readme_states_the_scale_caveat_that_method_doc_cites():
    """Issue 57 item 6: method.md cites the README for "a demonstration, not a replication"."""
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    method = " ".join((REPO / "docs" / "method.md").read_text(encoding="utf-8").split())
    assert "**Scale.** The committed studies prune a 135M model" in readme
    assert "not a replication of the paper's 8B results" in readme
    assert "not a replication (README, *What the main command produces*, **Scale**)" in method
    assert "## What the main command produces" in (REPO / "README.md").read_text(encoding="utf-8")


def test_tlm_table_reads_the_mean_over_the_algorithms(tmp_path):
    tables = tmp_path / "figures" / "tables"
    tables.mkdir(parents=True)
    (tables / "evaluation_size.csv").write_text("limit,n_pairs\n117,14\n", encoding="utf-8")
    header = (
        "model,budget,algorithm,acc_perplexity_pruned,acc_tlm_pruned,diff_tlm_minus_ppl,diff_ci_low,"
        "diff_ci_high,diff_se,mdd,tlm_vs_ppl,chance,tlm_minus_chance,tlm_minus_chance_ci_low,"
        "tlm_minus_chance_ci_high,tlm_vs_chance"
    )
    (tables / "calibration_contrast.csv").write_text(
        header
        + "\nm,7,greedy,0.5,0.4,-0.1,-0.2,0,0.02,0.056,lower,0.375,0.025,-0.01,0.06,at chance"
        + "\nm,7,mean of the algorithms,0.45,0.40,-0.05,-0.08,-0.02,0.015,0.042,lower,0.375,0.025,0.001,0.05,above\n",
        encoding="utf-8",
    )
    table = tlm_table(tmp_path, (("kept", "figures"), ("absent", "figures/none")))
    assert table.splitlines()[2] == (
        "| kept | 7 | 117 | 40.0 % | 45.0 % | -5.0 [-8.0, -2.0] (lower) | against the paper (TLM worse than "
        "perplexity pruning) | 4.2 | 37.5 % | +2.5 [+0.1, +5.0] (above) |"
    )
    assert len(table.splitlines()) == 3  # one row: the mean, and nothing for the absent folder


def boundary_sets(aggregate: str, calibration: str | None = None, controls: bool = False) -> tuple[int, int]:
    """(sets that remove the first or the last block, sets) of a committed study's seven algorithms
    (with ``controls``, also its random-init controls)."""
    import pandas as pd

    from depthprune.reporting.style import CONTROL_ALGORITHMS

    summary = pd.read_csv(REPO / aggregate / "summary.csv")
    pruned = summary[(summary["algorithm"] != "dense") & (controls | ~summary["algorithm"].isin(CONTROL_ALGORITHMS))]
    if calibration is not None:
        pruned = pruned[pruned["calibration"] == calibration]
    last = {int(n) - 1 for n in pruned["n_layers"]}
    assert len(last) == 1
    at_boundary = sum(bool({0, *last} & {int(b) for b in str(r).split()}) for r in pruned["removed"])
    return at_boundary, len(pruned)


def test_readme_count_of_tlm_sets_at_the_boundary_is_the_committed_one():
    """The README's "16 of the 18 TLM sets remove the first or the last block" reads the sensitivity run
    without the barrier (the controls included, as the README counts them)."""
    import re

    at_boundary, n_sets = boundary_sets("results/protect_none/aggregate", "tlm_cs170k", controls=True)
    readme = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    found = re.search(r"(\d+) of the (\d+) TLM sets remove the first or the last block", readme)
    assert found is not None and (int(found[1]), int(found[2])) == (at_boundary, n_sets)
    assert boundary_sets("results/protect_none/aggregate") > (0, 0)


def test_committed_default_study_keeps_the_first_and_last_block_and_scores_every_set_held_out():
    """[22]'s barrier (protect: boundary) in the committed default: no set of the paper's seven
    algorithms removes block 0 or the last block, and every set has its held-out loss."""
    import pandas as pd
    import yaml

    config = yaml.safe_load((REPO / "config.yaml").read_text(encoding="utf-8"))
    assert config["model_table"]["smollm2-135m"]["protect"] == "boundary"
    at_boundary, n_sets = boundary_sets("results/aggregate")
    assert n_sets == 28 and at_boundary == 0
    selections = pd.read_csv(REPO / "results" / "aggregate" / "selections.csv")
    assert selections["heldout_loss"].notna().all() and (selections["heldout_samples"] > 0).all()


def test_readme_is_a_users_page():
    """Issue 36: the README stays within 300 lines, with no commit hashes (history is in CHANGELOG.md)."""
    import re

    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    # a 7-to-40-digit hexadecimal word with a digit and a letter in it reads as a commit hash
    hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"\d", w) and re.search(r"[a-f]", w)]
    assert not hashes, hashes


def test_readme_calibration_size_v2_numbers_are_the_committed_ones():
    """The README's calibration-size v2 sentence reads figures/calibration_size_v2/tables/calibration_size.csv:
    the over-fitting gaps, the Jaccard ranges and intervals against the null, accuracy and TLM − C4."""
    import pandas as pd

    table = pd.read_csv(REPO / "figures" / "calibration_size_v2" / "tables" / "calibration_size.csv")
    table["size"] = table["size"].astype(str)
    tlm = table[table["calibration"] == "tlm_cs170k"].set_index("size")
    c4 = table[table["calibration"] == "ppl_c4"]
    readme = " ".join((REPO / "docs" / "discussion.md").read_text(encoding="utf-8").split())  # moved from the README

    def f2(v):  # two decimals, a typographic minus
        return f"{v:.2f}".replace("-", "−")

    def pts(v):
        return f"{100 * v:.1f}".replace("-", "−")

    def span(values, fmt):
        return f"{fmt(min(values))}–{fmt(max(values))}"

    gap = tlm["heldout_loss_mean"] - tlm["loss_mean"]

    def p(v):  # two decimals, or one significant digit below 0.01
        return f"{v:.2f}" if v >= 0.01 else f"{v:.1g}"

    def sizes(names):
        return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)

    # Draws that agree more than random sets do (p < 0.05 against the random-pairs null) and not.
    apart = tlm[tlm["jaccard_p_value"] >= 0.05]
    agree = tlm[tlm["jaccard_p_value"] < 0.05]
    expected = [
        f"+{f2(gap['8'])} at 8 items, +{f2(gap['128'])} at 128",
        f"(null {f2(tlm['jaccard_random'].iloc[0])} [{f2(tlm['jaccard_random_lo'].iloc[0])}, "
        f"{f2(tlm['jaccard_random_hi'].iloc[0])}]): not at {sizes(list(apart.index))} items (Jaccard "
        f"{', '.join(map(f2, apart['jaccard_mean']))}; p = {', '.join(map(p, apart['jaccard_p_value']))})",
        f"weakly at {sizes(list(agree.index))} ("
        + "; ".join(
            f"{f2(r.jaccard_mean)} [{f2(r.jaccard_lo)}, {f2(r.jaccard_hi)}], p = {p(r.jaccard_p_value)}"
            for r in agree.itertuples()
        )
        + ")",
        f"against {span(c4['jaccard_mean'], f2)} for C4's draws",
        f"stay at {span(tlm['avg_accuracy_mean'], pts)} %",
        f"{span(-tlm['acc_minus_ppl'], pts)} points below C4-pruned",
        f"(128 items: {pts(tlm.loc['128', 'acc_minus_ppl'])} [{pts(tlm.loc['128', 'acc_minus_ppl_lo'])}, "
        f"{pts(tlm.loc['128', 'acc_minus_ppl_hi'])}])",
    ]
    missing = [text for text in expected if text not in readme]
    assert not missing, missing
    assert (tlm["acc_minus_ppl_hi"] < 0).all()  # "below C4-pruned ones at every size"


def test_method_doc_calibration_size_numbers_are_the_committed_ones():
    """docs/method.md §8's first calibration-size study (figures/calibration_size/tables/calibration_size.csv):
    the Jaccard across seeds per C4 size and the TLM range, and the pruned models' accuracy at 8 and
    32 items with its interval (issue 57 item 6: prose the CSVs back)."""
    import pandas as pd

    table = pd.read_csv(REPO / "figures" / "calibration_size" / "tables" / "calibration_size.csv")
    rows = table.set_index(["calibration", "size", "algorithm"])
    doc = " ".join((REPO / "docs" / "method.md").read_text(encoding="utf-8").split())

    def jaccard(size, algorithm):
        return f"{rows.loc[('ppl_c4', size, algorithm), 'jaccard_mean']:.2f}"

    def accuracy(size, algorithm, percent=" %"):
        r = rows.loc[("tlm_cs170k", size, algorithm)]
        return (
            f"{100 * r.avg_accuracy_mean:.1f}{percent} [{100 * r.avg_accuracy_lo:.1f}, {100 * r.avg_accuracy_hi:.1f}]"
        )

    tlm = table.loc[table["calibration"] == "tlm_cs170k", "jaccard_mean"]
    expected = [
        f"Jaccard across seeds {jaccard('8x64', 'one_shot')} (one-shot) and {jaccard('8x64', 'greedy')} (greedy) "
        f"at 8 × 64, {jaccard('64x32', 'one_shot')} and {jaccard('64x32', 'greedy')} at 64 × 32",
        f"`tlm_cs170k`: {tlm.min():.2f}–{tlm.max():.2f} at 8, 16, 32 and 64 items",
        f"is {accuracy('8', 'one_shot')} at 8 items and {accuracy('32', 'one_shot')} at 32 (one-shot), "
        f"{accuracy('8', 'greedy')} and {accuracy('32', 'greedy')} (greedy)",
    ]
    missing = [text for text in expected if text not in doc]
    assert not missing, missing


def test_method_doc_calibration_size_v2_table_is_the_committed_one():
    """docs/method.md §8's calibration-size v2 table: every number is the committed CSV's, to the digits
    printed (within half a unit of the last one)."""
    import re

    import pandas as pd

    table = pd.read_csv(REPO / "figures" / "calibration_size_v2" / "tables" / "calibration_size.csv")
    table["size"] = table["size"].astype(str)
    rows = {(r.calibration, r.size): r for r in table.itertuples()}
    doc = (REPO / "docs" / "method.md").read_text(encoding="utf-8")
    labels = {"C4, 8 × 64": ("ppl_c4", "8x64"), "C4, 64 × 32": ("ppl_c4", "64x32"), "TLM, 8 items": ("tlm_cs170k", "8")}
    checked = 0
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6:
            continue
        label = cells[0]
        key = labels.get(label) or (
            ("tlm_cs170k", label.split()[1]) if re.fullmatch(r"TLM, \d+( .*)?", label) else None
        )
        if key is None:
            continue
        r = rows[key]
        expected = [r.jaccard_mean, r.jaccard_lo, r.jaccard_hi, r.jaccard_p_value, r.loss_mean, r.heldout_loss_mean]
        expected += [100 * r.avg_accuracy_mean, 100 * r.avg_accuracy_lo, 100 * r.avg_accuracy_hi]
        if key[0] == "tlm_cs170k":
            expected += [100 * r.acc_minus_ppl, 100 * r.acc_minus_ppl_lo, 100 * r.acc_minus_ppl_hi]
        printed = re.findall(r"−?\d+(?:\.\d+)?", " ".join(cells[1:]))  # the doc writes − for minus
        assert len(printed) == len(expected), (label, printed)
        for text, value in zip(printed, expected):
            decimals = len(text.split(".")[1]) if "." in text else 0
            assert abs(float(text.replace("−", "-")) - value) <= 0.5 * 10**-decimals + 1e-9, (label, text, value)
        checked += 1
    assert checked == 7


def test_readme_tlm_sentences_are_the_committed_ones():
    """Issue 46: the README's sentences on TLM pruning read the CSVs they come from: the gaps and
    their direction (calibration_contrast.csv of both search spaces), "at the baseline"
    (tlm_vs_baseline), "none over-fits" (table4.csv's overfits), "uninformative" (paper_comparison.csv)
    and the unpaired note (different documents per task)."""
    import pandas as pd

    readme = " ".join(  # the README and the discussion it points to (docs/discussion.md)
        (REPO / name).read_text(encoding="utf-8") for name in ("README.md", "docs/discussion.md")
    ).split()
    readme = " ".join(readme)

    def means(folder):
        table = pd.read_csv(REPO / folder / "tables" / "calibration_contrast.csv")
        return table[table["algorithm"] == "mean of the algorithms"].set_index("budget")

    kept, none = means("figures"), means("figures/protect_none")
    gaps = [f"{-100 * kept.loc[m, 'diff_tlm_minus_ppl']:.1f}" for m in (7, 9)]
    assert f"TLM-pruned models average {gaps[0]} and {gaps[1]} points below perplexity-pruned ones" in readme
    assert (kept["diff_ci_high"] < 0).all()  # "both intervals exclude zero", below
    assert "at the baseline at both M" in readme and set(kept["tlm_vs_baseline"]) == {"at baseline"}
    assert (none["diff_ci_high"] < 0).all()
    assert (
        f"the gap is {-100 * none.loc[7, 'diff_tlm_minus_ppl']:.1f} and {-100 * none.loc[9, 'diff_tlm_minus_ppl']:.1f}"
        in readme
    )
    table4 = pd.read_csv(REPO / "figures" / "tables" / "table4.csv")
    assert "none over-fits in Table 4's sense" in readme
    assert not table4.loc[table4["calibration"] == "tlm_cs170k", "overfits"].any()
    comparison = pd.read_csv(REPO / "figures" / "tables" / "paper_comparison.csv")
    accuracy = comparison[comparison["statistic"].str.startswith("accuracy shift ratio")]
    assert '§5.2\'s "comparable" accuracy test is uninformative here' in readme
    assert set(accuracy["verdict"]) == {"uninformative"}
    limits = {f: read_limit(f) for f in ("figures", "figures/protect_none")}
    assert limits["figures"] != limits["figures/protect_none"]
    assert (
        f"{limits['figures/protect_none']} documents per task: unpaired with the default's {limits['figures']}"
        in readme
    )


def read_limit(folder: str) -> str:
    import csv

    with open(REPO / folder / "tables" / "evaluation_size.csv", encoding="utf-8") as handle:
        return next(csv.DictReader(handle))["limit"]


def test_readme_loss_and_bounded_loss_sentences_are_the_committed_ones():
    """Issue 46 item 6: the README's loss-against-accuracy ρ (loss_accuracy.csv), the bounded loss's
    mean accuracies (tlm_sensitivity's table2.csv, mean over the seven algorithms) and the unpaired
    note of that cross-study comparison (different documents per task) read the committed CSVs."""
    import pandas as pd

    readme = " ".join((REPO / "docs" / "discussion.md").read_text(encoding="utf-8").split())  # moved from the README
    loss = pd.read_csv(REPO / "figures" / "tables" / "loss_accuracy.csv").set_index(
        ["calibration", "loss_kind", "budget"]
    )

    def rho(calibration, kind):
        return [f"{loss.loc[(calibration, kind, m), 'rho']:+.2f}".replace("-", "−") for m in (7, 9)]

    calibration, heldout = rho("tlm_cs170k", "calibration"), rho("tlm_cs170k", "heldout")
    assert (
        f"(ρ {calibration[0]}, {calibration[1]} for the calibration loss, {heldout[0]}, {heldout[1]} held out" in readme
    )
    p_min = loss.loc["tlm_cs170k", "p_value"].min()
    assert f"p ≥ {math.floor(100 * p_min) / 100:.2f}" in readme  # the smallest p, rounded down
    ppl = rho("ppl_c4", "calibration")
    assert f"where `ppl_c4`'s ranks them at M = 7 ({ppl[0]}, {ppl[1]})" in readme
    table2 = pd.read_csv(REPO / "figures" / "tlm_sensitivity" / "tables" / "table2.csv")
    from depthprune.reporting.style import PAPER_ALGORITHMS

    pruned = table2[table2["algorithm"].isin(PAPER_ALGORITHMS)].groupby("budget")["avg_accuracy"].mean()
    assert f"cross-entropy, {100 * pruned[7]:.1f} % and {100 * pruned[9]:.1f} %" in readme
    # documents per task from baselines.csv (tlm_sensitivity has no evaluation-size rule: no ppl half)
    limits = {
        f: str(pd.read_csv(REPO / f / "tables" / "baselines.csv")["n_documents"].max())
        for f in ("figures", "figures/tlm_sensitivity")
    }
    assert limits["figures"] != limits["figures/tlm_sensitivity"]
    assert (
        f"{limits['figures/tlm_sensitivity']} documents per task: unpaired with the default's {limits['figures']}"
        in readme
    )


def test_seeds_table_names_each_rows_study_and_shows_an_evaluation_only_studys_accuracy_and_random_sets(tmp_path):
    """Issue 58: the rescore study's rows follow the four-seed study's, each naming its study; its §5.1
    and §5.2 perplexity rows (its sets' and perplexities' source is that study) are left out; its
    random-set control gets a row per calibration with each seed's difference."""
    from depthprune.reporting.pages.directions import BEATS_CHANCE

    copy_tables(SEEDS_STUDY, tmp_path)
    rescore = SEEDS_STUDIES[1][0]
    tables = tmp_path / rescore / "tables"
    tables.mkdir(parents=True)
    for name in ("seeds_claims.csv", "seeds_two_stage.csv"):
        shutil.copy(REPO / SEEDS_STUDY / "tables" / name, tables / name)
    key = {"model": "m", "budget": "7"}
    write_rows(
        tables / "random_control.csv",
        [
            {**key, "calibration": c, "comparison": "mean of the searches", "diff": d, "seed": str(k)}
            for k, (c, d) in enumerate([("tlm_cs170k", "-0.031"), ("tlm_cs170k", "0.012"), ("ppl_c4", "0.04")])
        ],
    )
    write_rows(
        tables / "random_control_seeds.csv",
        [{**key, "calibration": "tlm_cs170k", "diff": "-0.0095", "ci_low": "-0.2", "ci_high": "0.18",
          "n_seeds": "2", "null_above": "0.01", "null_below": "0.02", "side": "level with random sets",
          "verdict": "inconclusive"}],
    )  # fmt: skip
    lines = seeds_headline(tmp_path).splitlines()
    theirs = [line for line in lines if line.startswith(f"| {STUDY_LABELS[rescore]} |")]
    ours = [line for line in lines[2:] if line.startswith(f"| {STUDY_LABELS[SEEDS_STUDY]} |")]
    assert len(ours) + len(theirs) == len(lines) - 2 and ours and theirs
    assert not [line for line in theirs if "| §5.1 |" in line or "| §5.2 | perplexity" in line]
    assert any("| §5.2 | accuracy" in line for line in theirs) and any("| §5.3 |" in line for line in theirs)
    assert theirs[-1] == (
        f"| {STUDY_LABELS[rescore]} | random sets | tlm_cs170k M=7: mean of the searches − mean of the random "
        "sets | -0.9 [-20.0, +18.0] points |  | -3.1, +1.2 | "
        f"inconclusive | {BEATS_CHANCE} |"
    )
    page = results_page(tmp_path, (rescore,))
    assert "| tlm_cs170k | 7 | 2 | -0.9 [-20.0, +18.0] | 1 % | 2 % | level with random sets | inconclusive |" in page

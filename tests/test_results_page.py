"""docs/results.md is `depthprune results-page`'s output for the committed studies (so it cannot drift)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from depthprune.reporting.results_page import (
    DEFAULT_STUDIES,
    HEADLINE_BEGIN,
    HEADLINE_END,
    TLM_BEGIN,
    TLM_END,
    headline_table,
    number,
    readme_generated,
    readme_with_headline,
    results_page,
    tlm_table,
)

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
    lines.append('5.9,"test scope",a new statistic,0.5,0.123456,0.1,0.2,holds')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    after = results_page(tmp_path, ("figures",))
    assert after != before
    assert "| 5.9 | test scope | a new statistic | 0.5 | 0.1235 [0.1, 0.2] | holds |" in after


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
    assert "| claim | scope | statistic | paper | ours [95% CI] | verdict |" in readme


def test_readme_tlm_table_is_the_generated_one():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert TLM_BEGIN in readme and TLM_END in readme
    assert readme_generated(readme, REPO) == readme, (
        "README.md's TLM table is stale: regenerate it with `depthprune results-page`"
    )


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
        "| kept | 7 | 117 | 40.0 % | 45.0 % | -5.0 [-8.0, -2.0] | 4.2 | +2.5 [+0.1, +5.0] (above) |"
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

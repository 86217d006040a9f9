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
    headline_table,
    number,
    readme_with_headline,
    results_page,
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

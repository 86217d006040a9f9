"""The failed-search sensitivity (docs/method.md §7; issue 56 item 4): a study rendered without the
algorithms that failed, and every verdict paired with the full render's."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from depthprune.reporting.verdicts.failed_sensitivity import (
    ONLY_ALL,
    ONLY_WITHOUT,
    changes_markdown,
    failed_algorithms,
    verdict_changes,
)
from test_reporting_pipeline import run_command, write_tree

GRID = [("alpha", "ppl_c4", 2), ("alpha", "ppl_c4", 3), ("alpha", "tlm_cs170k", 2), ("alpha", "tlm_cs170k", 3)]


def with_a_failed_cbo(results, failed: bool = True):
    """One-shot's loss 5, every other search below it, cbo above it (failed) or below it; cbo's
    perplexities 10^4 times larger, so that it alone spreads the algorithms by four orders."""
    for path in results.rglob("selection.json"):
        selection = json.loads(path.read_text())
        algorithm = selection["algorithm"]
        selection["loss"] = 5.0 if algorithm == "one_shot" else 9.0 if (algorithm == "cbo" and failed) else 4.0
        path.write_text(json.dumps(selection))
        if algorithm == "cbo":
            metrics = pd.read_csv(path.parent / "metrics.csv")
            scaled = metrics["metric"] == "perplexity"
            metrics.loc[scaled, "value"] = metrics.loc[scaled, "value"] * 1e4
            metrics.to_csv(path.parent / "metrics.csv", index=False)
    return results


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("sensitivity")
    results = with_a_failed_cbo(write_tree(root / "results", GRID))
    assert run_command(["aggregate", "--results", str(results), "--out", str(root / "aggregate")]) == 0
    assert run_command(["render", "--aggregate", str(root / "aggregate"), "--out", str(root / "figures")]) == 0
    out = root / "figures" / "without_failed_searches"
    argv = ["failed-search-sensitivity", "--aggregate", str(root / "aggregate"), "--figures", str(root / "figures")]
    assert run_command([*argv, "--out", str(out)]) == 0
    return root, out


def test_failed_algorithms_counts_every_run_of_an_algorithm():
    summary = pd.DataFrame(
        {
            "model": "m",
            "calibration": ["c", "c", "c", "c", "c", "c"],
            "budget": [2, 2, 2, 3, 3, 3],
            "seed": 0,
            "algorithm": ["one_shot", "cbo", "greedy", "one_shot", "cbo", "greedy"],
            "loss": [5.0, 6.0, 4.0, 5.0, 4.0, 4.0],
        }
    )
    found = failed_algorithms(summary)
    assert found.to_dict("records") == [{"algorithm": "cbo", "failed_runs": 1, "runs": 2}]
    assert failed_algorithms(summary.assign(loss=[5.0, 4.0, 4.0, 5.0, 4.0, 4.0])).empty


def test_the_reduced_render_leaves_the_failed_algorithm_out_and_says_so(study):
    root, out = study
    observations = (out / "tables" / "observations.md").read_text()
    assert observations.startswith("**Sensitivity render without the failed searches**: cbo (failed in 4 of 4 runs)")
    full = pd.read_csv(root / "figures" / "tables" / "observations.csv")
    reduced = pd.read_csv(out / "tables" / "observations.csv")
    assert full["statistic"].str.contains("algorithm cbo").any()
    assert not reduced["statistic"].str.contains("cbo").any()
    assert not (out / "figure1.png").exists()  # analyses and observations only


def test_verdict_changes_pair_both_renders(study):
    _, out = study
    changes = pd.read_csv(out / "verdict_changes.csv", keep_default_na=False)
    spread = changes[changes["statistic"].str.startswith("algorithm spread of avg perplexity, ppl_c4")]
    # the full render's own per-run reading "without failed searches": a row the reduced study has no reason to write
    assert (spread.loc[spread["scope"].str.endswith("without failed searches"), "changed"] == ONLY_ALL).all()
    spread = spread[~spread["scope"].str.endswith("without failed searches")]
    assert len(spread) == 2  # M = 2 and 3, in both renders
    # cbo's 10^4 perplexities alone spread the algorithms by four orders: the claim's half fails with
    # it and no longer without it
    assert (spread["verdict_all"] == "does not hold").all()
    assert (spread["verdict_without"] != "does not hold").all()
    assert (spread["changed"] == "yes").all()
    assert (changes.loc[changes["statistic"].str.contains("algorithm cbo"), "changed"] == ONLY_ALL).all()
    assert set(changes["changed"]) <= {"yes", "no", ONLY_ALL, ONLY_WITHOUT}
    both = changes[changes["changed"].isin(["yes", "no"])]
    assert ((both["verdict_all"] != both["verdict_without"]) == (both["changed"] == "yes")).all()
    text = (out / "verdict_changes.md").read_text()
    assert "Dropped from every seed, calibration and M: cbo (failed in 4 of 4 runs)" in text
    assert f"{(changes['changed'] == 'yes').sum()} of {len(both)} verdicts that both renders give change" in text


def test_verdict_changes_keeps_rows_either_render_lacks_and_skips_descriptive_ones(tmp_path):
    columns = ["claim", "scope", "statistic", "value", "ci_low", "ci_high", "verdict"]
    full = tmp_path / "full" / "tables"
    reduced = tmp_path / "reduced" / "tables"
    full.mkdir(parents=True)
    reduced.mkdir(parents=True)
    pd.DataFrame(
        [
            ["5.2", "all", "kept", 1.0, 0.5, 1.5, "holds"],
            ["5.2", "all", "flipped", 1.0, 0.5, 1.5, "holds"],
            ["5.2", "", "dropped algorithm's row", 2.0, None, None, "does not hold"],
            ["5.1", "all", "a description", 0.3, None, None, "descriptive"],
        ],
        columns=columns,
    ).to_csv(full / "observations.csv", index=False)
    pd.DataFrame(
        [
            ["5.2", "all", "kept", 1.1, 0.6, 1.6, "holds"],
            ["5.2", "all", "flipped", 0.2, -0.1, 0.5, "inconclusive"],
            ["5.3", "all", "new", 0.1, None, None, "holds"],
            ["5.1", "all", "a description", 0.4, None, None, "descriptive"],
        ],
        columns=columns,
    ).to_csv(reduced / "observations.csv", index=False)
    changes = verdict_changes(full, reduced).set_index("statistic")
    assert changes.loc["kept", "changed"] == "no"
    assert changes.loc["flipped", ["verdict_all", "verdict_without", "changed"]].tolist() == [
        "holds",
        "inconclusive",
        "yes",
    ]
    assert changes.loc["dropped algorithm's row", "changed"] == ONLY_ALL
    assert changes.loc["new", "changed"] == ONLY_WITHOUT
    assert "a description" not in changes.index
    dropped = pd.DataFrame({"algorithm": ["cbo"], "failed_runs": [3], "runs": [4]})
    text = changes_markdown(changes.reset_index(), dropped)
    assert "1 of 2 verdicts that both renders give change" in text
    assert "| observations | 5.2 | all | flipped | 1 [0.5, 1.5] | holds | 0.2 [-0.1, 0.5] | inconclusive |" in text
    with pytest.raises(FileNotFoundError, match="render the study first"):
        verdict_changes(full, tmp_path / "nowhere")


def test_without_failed_searches_a_study_with_none_renders_the_same_verdicts(tmp_path):
    results = with_a_failed_cbo(write_tree(tmp_path / "results", GRID), failed=False)
    assert run_command(["aggregate", "--results", str(results), "--out", str(tmp_path / "aggregate")]) == 0
    argv = ["--aggregate", str(tmp_path / "aggregate")]
    assert run_command(["render", *argv, "--out", str(tmp_path / "figures"), "--only", "observations"]) == 0
    out = tmp_path / "sensitivity"
    assert (
        run_command(["failed-search-sensitivity", *argv, "--figures", str(tmp_path / "figures"), "--out", str(out)])
        == 0
    )
    changes = pd.read_csv(out / "verdict_changes.csv", keep_default_na=False)
    assert (changes["changed"] == "no").all() and len(changes) > 0
    assert "No search failed in this study" in (out / "verdict_changes.md").read_text()

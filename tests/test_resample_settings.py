"""Issue 66, item 4: `analysis.bootstrap_resamples` reaches every interval the render and the
calibration-size render draw, the pooled across-seeds intervals included (they were fixed at 10,000)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from depthprune.cli import main

REPO = Path(__file__).resolve().parents[1]
STUDY = REPO / "results" / "calibration_size" / "aggregate"  # several seeds: the across-seeds claims run


def test_the_render_passes_its_resamples_to_the_pooled_intervals(tmp_path, monkeypatch):
    import depthprune.reporting.render as render_module

    seen = []
    real = render_module.decision_table

    def spy(*args, **kwargs):
        seen.append(kwargs.get("n_resamples"))
        return real(*args, **kwargs)

    monkeypatch.setattr(render_module, "decision_table", spy)
    render_module.render(STUDY, tmp_path / "figures", only={"analyses", "observations"}, bootstrap_resamples=300)
    assert seen == [300]


def test_calibration_size_intervals_follow_the_configured_resamples(tmp_path):
    committed = pd.read_csv(REPO / "figures" / "calibration_size" / "tables" / "calibration_size.csv")
    out = tmp_path / "figures"
    assert main(["calibration-size", "--aggregate", str(STUDY), "--out", str(out), "--bootstrap-resamples", "300"]) == 0
    fewer = pd.read_csv(out / "tables" / "calibration_size.csv")
    interval_columns = ["avg_accuracy_lo", "avg_accuracy_hi", "avg_perplexity_lo", "avg_perplexity_hi"]
    moved = (fewer[interval_columns] - committed[interval_columns]).abs().to_numpy()
    assert (moved[~pd.isna(moved)] > 0).mean() > 0.9  # 300 resamples, not the committed 10,000


def test_the_calibration_size_rule_passes_the_config_s_bootstrap():
    from depthprune.workflow import bootstrap_args

    config = {"analysis": {"bootstrap_resamples": 2500, "bootstrap_seed": 7, "strong_rho": 0.5}}
    assert bootstrap_args(config) == "--bootstrap-resamples 2500 --bootstrap-seed 7"

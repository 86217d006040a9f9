"""Strict inputs, checked when the study is planned (issue 45, findings 5 and 7): `depthprune plan
--config` gets the workflow's key, schema and study checks; a budget must leave a removable block;
one model under two aliases is refused; environment switches take documented values only; the
render refuses an aggregate whose CSV and Parquet twins disagree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from depthprune import workflow as wf
from depthprune.cli import main
from depthprune.reporting.aggregate import load_aggregate

REPO = Path(__file__).resolve().parents[1]


def errors(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if "error:" in line]


def plan(*config: str) -> int:
    return main(["plan", "--configfile", "config/smoke.yaml", "--throughput", "10", "--config", *config])


@pytest.mark.parametrize(
    "override, message",
    [
        ("budgtes=[3]", "config: unknown key 'budgtes' (allowed: models, model_table, budgets"),
        ("budgets=[", "--config 'budgets=[': the value is not valid YAML"),
        ("calibrations=[ppl_xx]", "config: calibrations.0: 'ppl_xx' is not one of"),  # the schema's enum
        ("budgets=[6]", "budgets [6] of model tiny (budgets / model_table.tiny.budgets): M must be below the 6"),
    ],
)
def test_plan_checks_config_as_the_workflow_does(override, message, data_dir, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    assert plan(override, f"data_dir={data_dir}") == 2
    lines = errors(capsys)
    assert len(lines) == 1 and message in lines[0], lines


def test_plan_still_plans_a_valid_config(data_dir, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    assert plan("budgets=[5]", f"data_dir={data_dir}") == 0  # 6 removable blocks: 5 leaves one
    assert "plan: jobs=" in capsys.readouterr().out


def test_study_check_refuses_a_budget_equal_to_the_removable_blocks():
    """The Snakefile's plan-time check: tiny:llama-8 under protect: boundary has 6 removable blocks,
    its depth read from the spec (no n_layers in model_table), so M=6 fails before the prior runs."""
    import yaml

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config.update(models=["tiny"], data_dir=None, budgets=[2, 6])
    config["model_table"]["tiny"]["protect"] = "boundary"
    assert "n_layers" not in config["model_table"]["tiny"]
    with pytest.raises(wf.ConfigError, match=r"budgets \[6\] of model tiny .* below the 6 removable blocks"):
        wf.check_study(config)
    config["budgets"] = [2, 5]
    wf.check_study(config)


def test_one_model_under_two_aliases_is_refused(tmp_path):
    import yaml

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config.update(data_dir=None, budgets=[2])
    config["model_table"]["tiny2"] = dict(config["model_table"]["tiny"])
    config["models"] = ["tiny", "tiny2"]
    with pytest.raises(wf.ConfigError, match="models: tiny and tiny2 load the same model"):
        wf.check_study(config)
    config["model_table"]["tiny2"]["dtype"] = "bfloat16"  # another precision is another model
    wf.check_study(config)


@pytest.mark.parametrize("variable", ["DEPTHPRUNE_RECOMPUTE", "DEPTHPRUNE_EXIT_WITH_PARENT"])
def test_environment_switch_with_an_unknown_value_is_an_error(variable, monkeypatch, capsys):
    monkeypatch.setenv(variable, "maybe")
    assert main(["plan", "--help"]) == 2
    assert f"environment variable {variable}='maybe': expected one of 1/true/yes/on/0/false/no/off" in (
        capsys.readouterr().err
    )


def test_recompute_switch_values(monkeypatch):
    from depthprune.cli_common import recompute_default

    for value, expected in (("", False), ("0", False), ("off", False), ("1", True), ("TRUE", True)):
        monkeypatch.setenv("DEPTHPRUNE_RECOMPUTE", value)
        assert recompute_default() is expected, value


@pytest.mark.parametrize("damage", ["truncated summary", "edited metrics"])
def test_render_refuses_csv_and_parquet_twins_that_disagree(damage, tmp_path):
    aggregate = tmp_path / "aggregate"
    shutil.copytree(REPO / "results" / "aggregate", aggregate)
    load_aggregate(aggregate)  # the committed twins agree
    if damage == "truncated summary":
        path = aggregate / "summary.csv"
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:3]))
    else:
        path = aggregate / "metrics.csv"
        lines = path.read_text().splitlines(keepends=True)
        header = lines[0].rstrip("\n").split(",")
        row = lines[1].rstrip("\n").split(",")
        row[header.index("value")] = "0.99"
        lines[1] = ",".join(row) + "\n"
        path.write_text("".join(lines))
    with pytest.raises(ValueError, match=f"{path}: differs from its twin {path.stem}.parquet"):
        load_aggregate(aggregate)

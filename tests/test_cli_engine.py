"""The engine's sub-commands: prior, export, prepare-model, and their error handling."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM

from depthprune.cli import main


def test_help_lists_every_stage(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in ("prepare-model", "prior", "search", "evaluate", "export", "aggregate", "render", "timing"):
        assert command in out


def test_module_entry_point_matches_console_script():
    result = subprocess.run([sys.executable, "-m", "depthprune", "prior", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "--calibration" in result.stdout


@pytest.mark.parametrize("calibration", ["ppl_c4", "tlm_cs170k"])
def test_prior_writes_prior_json(calibration, tiny_model_dir, data_dir, tmp_path):
    out = tmp_path / "prior.json"
    code = main(
        [
            "prior",
            "--model",
            str(tiny_model_dir),
            "--name",
            "tiny",
            "--calibration",
            calibration,
            "--data-dir",
            str(data_dir),
            "--n-samples",
            "4",
            "--seq-len",
            "32",
            "--protected",
            "0",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    prior = json.loads(out.read_text())
    assert prior["model"] == "tiny" and prior["calibration"] == calibration and prior["n_layers"] == 8
    assert prior["scores"][0] is None and all(isinstance(s, float) for s in prior["scores"][1:])
    assert sorted(prior["ranking"]) == list(range(1, 8))
    assert prior["cost"]["evaluations"] == 8
    assert prior["versions"]["torch"] == torch.__version__
    if calibration == "tlm_cs170k":
        assert prior["metric_name"] == "calibration_accuracy" and 0 <= prior["empty_accuracy"] <= 1
    else:
        assert prior["empty_metric"] == pytest.approx(2.718281828 ** prior["empty_loss"])
    assert not list(tmp_path.glob(".*tmp"))  # nothing half-written left behind


def test_export_cli_loads_with_plain_transformers(tiny_model_dir, tmp_path):
    out = tmp_path / "pruned"
    assert main(["export", "--model", str(tiny_model_dir), "--removed", "2 5", "--out", str(out)]) == 0
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.config.num_hidden_layers == 6
    assert model.config.depthprune_removed_layers == [2, 5]


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            [
                "prior",
                "--calibration",
                "ppl_c4",
                "--data-dir",
                "{missing}",
                "--n-samples",
                "2",
                "--out",
                "{tmp}/p.json",
            ],
            "c4/train.jsonl not found in the local mirror (option data_dir",
        ),
        (["export", "--removed", "0 1 2 3 4 5 6 7", "--out", "{tmp}/x"], "at least one must remain"),
        (["export", "--removed", "9", "--out", "{tmp}/x"], "outside 0..7"),
        (
            [
                "prior",
                "--calibration",
                "ppl_c4",
                "--data-dir",
                "{data}",
                "--n-samples",
                "2",
                "--protected",
                "12",
                "--out",
                "{tmp}/p.json",
            ],
            "protected_layers [12]",
        ),
    ],
)
def test_bad_input_exits_2_with_a_named_cause(argv, message, tiny_model_dir, data_dir, tmp_path, capsys):
    fill = {"missing": str(tmp_path / "nowhere"), "tmp": str(tmp_path), "data": str(data_dir)}
    argv = [a.format(**fill) for a in argv]
    code = main([argv[0], "--model", str(tiny_model_dir), *argv[1:]])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "p.json").exists() and not (tmp_path / "x").exists()


def test_evaluator_benchmark_prints_its_summary_line(tiny_model_dir, data_dir, capsys):
    code = main(
        [
            "timing",
            "evaluator",
            "--model",
            str(tiny_model_dir),
            "--data-dir",
            str(data_dir),
            "--n-samples",
            "2",
            "--seq-len",
            "32",
            "--budget",
            "3",
        ]
    )
    assert code == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("evaluator: losses_equal=yes blocks_ratio=")
    blocks_ratio = float(last.split("blocks_ratio=")[1].split()[0])
    assert 0 < blocks_ratio < 0.6  # the caches must actually save blocks


@pytest.mark.slow
def test_allocator_benchmark_runs_both_settings_with_equal_results(tiny_model_dir, data_dir, capsys):
    """Marked ``slow``: a benchmark run, one child process per setting (about 20 s under AVX2).

    ``timing allocator`` on the tiny model: one child per setting, the same numbers bit for bit."""
    argv = ["timing", "allocator", "--model", str(tiny_model_dir), "--data-dir", str(data_dir), "--dtype", "float32"]
    argv += ["--budget", "2", "--limit", "2", "--ppl-seq-len", "64", "--sets", "1 3", "2 5", "--rounds", "1"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    rounds = [line for line in lines if line.startswith("round 1 ")]
    assert len(rounds) == 2 and rounds[0].startswith("round 1 system") and "in force: False" in rounds[0]
    from depthprune import allocator

    if allocator.mallinfo() is not None:  # glibc: the keep child ran with the setting in force
        assert rounds[1].startswith("round 1 keep") and "in force: True" in rounds[1]
    last = dict(item.split("=") for item in lines[-1].removeprefix("allocator: ").split())
    assert lines[-1].startswith("allocator: ") and last["results_equal"] == "yes"
    assert float(last["calibration_ratio"]) > 0 and float(last["evaluation_ratio"]) > 0


def test_normaliser_benchmark_times_both_settings_with_equal_losses(tiny_model_dir, data_dir, capsys):
    """``timing normaliser`` on the tiny model: the two settings in turn, the same losses bit for bit."""
    argv = ["timing", "normaliser", "--model", str(tiny_model_dir), "--data-dir", str(data_dir), "--dtype", "float32"]
    argv += ["--n-samples", "2", "--seq-len", "32", "--budget", "2", "--rounds", "1"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("round 1 ")] == [
        "round 1 one call",
        "round 1 blocked ",
    ]
    assert sum("equal=yes" in line for line in lines if line.startswith("normaliser over")) == 2
    last = dict(item.split("=") for item in lines[-1].removeprefix("normaliser: ").split())
    assert lines[-1].startswith("normaliser: ") and last["losses_equal"] == "yes"
    assert float(last["kernel_ratio"]) > 0 and float(last["calibration_ratio"]) > 0

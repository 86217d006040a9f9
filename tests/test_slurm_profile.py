"""The SLURM profile: every rule that loads a model has GPU, memory and runtime; rules that only read
caches or render ask for no GPU; the committed profile equals the planner's output (issue 35)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from depthprune.slurm_profile import GPU_RULES, MODEL_RULES

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "workflow" / "profiles" / "slurm" / "config.yaml"
PAPER_THROUGHPUT = "200"  # TFLOP/s the committed profile states (its header)


def workflow_rules() -> dict[str, str]:
    """rule name -> its text, from workflow/rules/*.smk."""
    rules = {}
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        text = path.read_text()
        for match in re.finditer(r"^rule (\w+):\n((?:[ \t].*\n|\n)*)", text, re.M):
            rules[match.group(1)] = match.group(2)
    return rules


def loads_model(body: str) -> bool:
    """A rule loads a model if its job reads the prepared model or runs prepare-model."""
    return "prepared_model(" in body or "prepare-model" in body or "prepare_model_args" in body


def check_profile(profile: dict, rules: dict[str, str]) -> list[str]:
    problems = []
    resources = profile.get("set-resources") or {}
    for name, body in rules.items():
        entry = resources.get(name) or {}
        if loads_model(body):
            missing = [key for key in ("gpu", "mem_mb", "runtime") if key not in entry]
            if missing:
                problems.append(f"{name} loads a model but the profile sets no {', '.join(missing)}")
        elif int(entry.get("gpu", (profile.get("default-resources") or {}).get("gpu", 0)) or 0) > 0:
            problems.append(f"{name} loads no model but requests a GPU")
    return problems


def test_profile_covers_every_model_rule():
    rules = workflow_rules()
    assert {"evaluate_pass", "search", "prior", "prepare_model"} <= {n for n, b in rules.items() if loads_model(b)}
    assert set(MODEL_RULES) == {n for n, b in rules.items() if loads_model(b)}
    assert check_profile(yaml.safe_load(PROFILE.read_text()), rules) == []
    for rule in GPU_RULES:
        assert yaml.safe_load(PROFILE.read_text())["set-resources"][rule]["gpu"] == 1


def test_the_check_fails_on_the_former_profile():
    """The profile before issue 35: evaluate_pass had no entry (30 min default, killed)."""
    former = subprocess.run(
        ["git", "show", "e0547fb:workflow/profiles/slurm/config.yaml"], cwd=REPO, capture_output=True, text=True
    )
    if former.returncode != 0:
        pytest.skip("history not available")
    problems = check_profile(yaml.safe_load(former.stdout), workflow_rules())
    assert any(p.startswith("evaluate_pass loads a model") for p in problems)
    # and a GPU on a copy-only rule is caught
    bad = {"set-resources": {**yaml.safe_load(PROFILE.read_text())["set-resources"], "aggregate": {"gpu": 1}}}
    assert "aggregate loads no model but requests a GPU" in check_profile(bad, workflow_rules())


def test_committed_profile_is_the_planners_output(tmp_path, data_dir):
    out = tmp_path / "config.yaml"
    command = [sys.executable, "-m", "depthprune", "plan", "--configfile", "config/paper.yaml"]
    command += ["--throughput", PAPER_THROUGHPUT, "--data-dir", str(data_dir), "--write-profile", str(out)]
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^plan: jobs=114 gpu_hours=[0-9.]+ peak_gpu_gib=[0-9.]+$", proc.stdout.splitlines()[-1])
    assert out.read_text() == PROFILE.read_text()

"""The SLURM profile: every rule that loads a model has a runtime (issue 35); GPUs, memory and threads
follow the config and the work, not the profile, and the memo's journal follows the executor
whatever --config says (issue 48); the committed profile equals the planner's output."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from depthprune.slurm_profile import LOCAL_RULES, MODEL_RULES

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
        if loads_model(body) and "runtime" not in entry:
            problems.append(f"{name} loads a model but the profile sets no runtime")
        # GPUs and memory follow device, resources and evaluation.pass_per through the rules (issue
        # 48): a profile value would give a GPU to a CPU study's jobs or to a copy job.
        for key in ("gpu", "mem_mb", "cpus_per_task"):
            if key in entry or key in (profile.get("default-resources") or {}):
                problems.append(f"{name}: the profile sets {key}, which the config decides")
    if profile.get("set-threads"):
        problems.append("the profile sets threads: a cluster job would compute with other threads than a local one")
    if profile.get("config"):
        problems.append("the profile sets config: a --config on the command line replaces it")
    return sorted(set(problems))


def test_profile_covers_every_model_rule():
    rules = workflow_rules()
    assert {"evaluate_pass", "search", "prior", "prepare_model"} <= {n for n, b in rules.items() if loads_model(b)}
    assert set(MODEL_RULES) == {n for n, b in rules.items() if loads_model(b)}
    assert check_profile(yaml.safe_load(PROFILE.read_text()), rules) == []


def test_the_check_fails_on_the_former_profiles():
    """Before issue 35 evaluate_pass had no entry (30 min default, killed); before issue 48 the
    profile set GPUs, threads and the journal through a config: line."""
    for commit, expected in (("e0547fb", "evaluate_pass loads a model"), ("95416a3", "the profile sets config")):
        former = subprocess.run(
            ["git", "show", f"{commit}:workflow/profiles/slurm/config.yaml"], cwd=REPO, capture_output=True, text=True
        )
        if former.returncode != 0:
            pytest.skip("history not available")
        assert any(p.startswith(expected) for p in check_profile(yaml.safe_load(former.stdout), workflow_rules()))


def test_light_rules_are_local_rules():
    snakefile = (REPO / "Snakefile").read_text()
    block = re.search(r"^localrules:\n((?:    \w+,\n)+)", snakefile, re.M)
    assert block and set(re.findall(r"\w+", block.group(1))) == set(LOCAL_RULES)


def dry_run(tmp_path, data_dir, *extra, config=()):
    pytest.importorskip("snakemake_executor_plugin_slurm", reason="snakemake-executor-plugin-slurm not installed")
    command = [sys.executable, "-m", "snakemake", "-n", "-p", "--directory", str(tmp_path), "--snakefile"]
    command += [str(REPO / "Snakefile"), "--workflow-profile", str(PROFILE.parent), *extra]
    command += ["--configfile", str(REPO / "config.yaml"), str(REPO / "config" / "smoke.yaml")]
    command += ["--config", f"data_dir={data_dir}", *config]
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def planned(output: str) -> list[tuple[str, str, str]]:
    """(rule, resources line, shell command) of every job a dry run prints."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        rule = re.match(r"(local)?rule (\w+):", block)
        if rule:
            resources = re.search(r"resources: (.*)", block)
            shell = re.search(r"Shell command: (.*)", block)
            name = ("local" if rule.group(1) else "") + rule.group(2)
            jobs.append((name, resources.group(1) if resources else "", shell.group(1) if shell else ""))
    return jobs


def test_cluster_dry_run_with_config_on_the_command_line(tmp_path, data_dir):
    """`--config data_dir=X` beside the SLURM profile: every model command still gets
    --memo-journal delete; no GPU on device: cpu; copy jobs ask for a copy's memory; 41 jobs (config/smoke.yaml's header)."""
    jobs = planned(dry_run(tmp_path, data_dir))
    memo_commands = [shell for rule, _, shell in jobs if rule in ("prior", "search")]
    assert len(memo_commands) == 30 and all("--memo-journal delete" in shell for shell in memo_commands)
    model_jobs = [(rule, res) for rule, res, _ in jobs if rule in MODEL_RULES]
    assert model_jobs and all("gpu=0" in res for _, res in model_jobs)
    copies = [res for rule, res in model_jobs if rule in ("evaluate_selections", "evaluate_dense")]
    assert copies and all("mem_mb=2000," in res for res in copies)
    assert len(jobs) == 41
    # A local run of the same study keeps WAL (its results folder is on a local disk here).
    local = planned(dry_run(tmp_path, data_dir, "--executor", "local"))
    assert all("--memo-journal wal" in shell for rule, _, shell in local if rule in ("prior", "search"))


def test_gpu_study_asks_a_gpu_only_where_the_model_runs(tmp_path, data_dir):
    jobs = planned(dry_run(tmp_path, data_dir, config=("device=cuda", "resources={gpu: 1, mem_mb: 8000}")))
    gpus = {rule: res for rule, res, _ in jobs if rule in MODEL_RULES}
    assert all("gpu=1" in gpus[rule] for rule in ("prior", "search", "evaluate_pass"))
    assert all("gpu=0" in gpus[rule] for rule in ("prepare_model", "evaluate_selections", "evaluate_dense"))


def test_committed_profile_is_the_planners_output(tmp_path, data_dir):
    out = tmp_path / "config.yaml"
    command = [sys.executable, "-m", "depthprune", "plan", "--configfile", "config/paper.yaml"]
    command += ["--throughput", PAPER_THROUGHPUT, "--data-dir", str(data_dir), "--write-profile", str(out)]
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^plan: jobs=114 gpu_hours=[0-9.]+ peak_gpu_gib=[0-9.]+$", proc.stdout.splitlines()[-1])
    assert out.read_text() == PROFILE.read_text()

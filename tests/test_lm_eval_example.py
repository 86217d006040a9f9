"""The README's ``lm_eval`` example reproduces what ``depthprune evaluate`` reports for a pruned model.

The commands are read from README.md: the fenced block right after the ``<!-- lm-eval-example -->``
marker. They run as written, on a tiny random model instead of SmolLM2: only the study-specific
values below (model folder, removed set, data folder, tasks, document limit) are swapped, and each
must appear in the block as written here, so the README cannot drift from what this test runs. All
the other arguments (model class, dtype, log-softmax dtype, batch size, offline task folder) are the
README's own, and the metrics they give must equal the pipeline's.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest

from depthprune.evaluation.benchmarks import METRICS

MARKER = "<!-- lm-eval-example -->"
# The README's study-specific values and what this test runs instead.
README_MODEL = "resources/models/smollm2-135m"
README_REMOVED = "4 5 12 14 17 18 26"
README_DATA_DIR = "../shared/data"
README_TASKS = "lambada_openai,hellaswag,winogrande,arc_easy,arc_challenge,piqa,boolq"
README_LIMIT = "100"
REMOVED = "2 5"
# LAMBADA (a perplexity and an accuracy), shared-context choices, and partial (WinoGrande) scoring.
TASKS = ("lambada_openai", "hellaswag", "winogrande")
LIMIT = "5"


def readme_commands(readme_text: str) -> list[str]:
    """The shell commands of the fenced block after MARKER (continuation lines joined, comments dropped)."""
    found = re.search(re.escape(MARKER) + r"\s*```[a-z]*\n(.*?)```", readme_text, flags=re.S)
    if found is None:
        raise LookupError(MARKER)
    joined = found.group(1).replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def swap(argv: list[str], old: str, new: str) -> list[str]:
    """Replace the README value ``old`` inside the arguments; it must occur."""
    if not any(old in arg for arg in argv):
        raise AssertionError(f"README's lm_eval example no longer contains {old!r}: update this test with it")
    return [arg.replace(old, new) for arg in argv]


def swap_option(argv: list[str], option: str, old: str, new: str) -> list[str]:
    """Replace the value of ``option``, which must be the README value ``old``."""
    if option not in argv or argv.index(option) + 1 >= len(argv):
        raise AssertionError(f"README's lm_eval example has no {option}")
    at = argv.index(option) + 1
    if argv[at] != old:
        raise AssertionError(f"README's lm_eval example has {option} {argv[at]}, not {old}: update this test with it")
    return [*argv[:at], new, *argv[at + 1 :]]


@pytest.mark.slow
def test_readme_lm_eval_example_matches_depthprune_evaluate(repo_root, tmp_path, request):
    """Marked ``slow``: the README's lm-eval command end to end beside depthprune evaluate (about 17 s under AVX2)."""
    try:
        commands = readme_commands((repo_root / "README.md").read_text(encoding="utf-8"))
    except LookupError:
        pytest.skip(f"README.md has no {MARKER} block yet (the lm_eval example this test runs)")
    # Only now: building the tiny checkpoint is not worth it for a skip.
    tiny_model_dir, data_dir = request.getfixturevalue("tiny_model_dir"), request.getfixturevalue("data_dir")
    assert len(commands) == 2, commands  # write the offline task YAMLs, then run lm_eval
    write_tasks, lm_eval = (shlex.split(command) for command in commands)
    assert write_tasks[:2] == ["python", "-c"], write_tasks
    assert lm_eval[:3] == ["python", "-m", "depthprune.evaluation.engine_lm"], lm_eval
    write_tasks = swap(write_tasks, README_DATA_DIR, str(data_dir))
    lm_eval = swap(lm_eval, README_MODEL, str(tiny_model_dir))
    lm_eval = swap(lm_eval, f"removed={README_REMOVED}", f"removed={REMOVED}")
    lm_eval = swap_option(lm_eval, "--tasks", README_TASKS, ",".join(TASKS))
    lm_eval = swap_option(lm_eval, "--limit", README_LIMIT, LIMIT)
    for argv in (write_tasks, [*lm_eval, "--output_path", str(tmp_path / "out")]):
        # Run from an empty folder, as a user would from theirs: the task folder is made there.
        done = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{shlex.join(argv)}\n{done.stderr[-3000:]}"
    (results_file,) = (tmp_path / "out").rglob("results_*.json")
    example = json.loads(results_file.read_text())["results"]

    from depthprune.cli import main

    metrics_csv = tmp_path / "metrics.csv"
    argv = ["evaluate", "--model", str(tiny_model_dir), "--removed", REMOVED, "--data-dir", str(data_dir)]
    argv += ["--tasks", ",".join(TASKS), "--limit", LIMIT, "--no-eval-cache", "--out-metrics", str(metrics_csv)]
    assert main(argv) == 0
    import pandas as pd

    pipeline = pd.read_csv(metrics_csv).set_index(["benchmark", "metric"])["value"]
    compared = 0
    for task in TASKS:
        for metric in METRICS[task]:
            got, expected = example[task][f"{metric},none"], pipeline[task, metric]
            if metric == "perplexity":  # a float made by the same code from the same log-likelihoods
                assert got == pytest.approx(expected, rel=1e-9), (task, metric)
            else:  # a fraction of LIMIT documents
                assert got == expected, (task, metric)
            compared += 1
    assert compared == sum(len(METRICS[task]) for task in TASKS)

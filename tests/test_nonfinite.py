"""A broken model (one NaN weight) stops prior, search and evaluate with an error naming the model
and the stage; no prior, selection or metrics is written (issue 45, finding 4)."""

from __future__ import annotations

import json
import shutil

import pytest
from safetensors.torch import load_file, save_file

from depthprune.cli import main
from depthprune.models.fingerprint import FINGERPRINT_FILE
from depthprune.search.runner import SearchResult


@pytest.fixture(scope="module")
def nan_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny 8-block model with one NaN in block 3's MLP: every set that keeps block 3 is NaN."""
    folder = tmp_path_factory.mktemp("nan_model") / "tiny-nan"
    shutil.copytree(tiny_model_dir, folder)
    (folder / FINGERPRINT_FILE).unlink(missing_ok=True)  # the content changes below
    weights = load_file(folder / "model.safetensors")
    key = next(k for k in weights if "layers.3." in k and "mlp" in k)
    weights[key] = weights[key].clone()
    weights[key].view(-1)[0] = float("nan")
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


SMALL = ["--n-samples", "4", "--seq-len", "32", "--seed", "0"]


def calibration(model_dir, data_dir):
    return [
        "--model",
        str(model_dir),
        "--name",
        "broken",
        "--calibration",
        "ppl_c4",
        "--data-dir",
        str(data_dir),
        *SMALL,
    ]


def only_error(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(lines) == 1, lines
    return lines[0]


def test_prior_of_a_nan_model_is_an_error(nan_model_dir, data_dir, tmp_path, capsys):
    out = tmp_path / "prior.json"
    assert main(["prior", *calibration(nan_model_dir, data_dir), "--out", str(out)]) == 2
    error = only_error(capsys)
    assert "prior: model 'broken' gives non-finite calibration losses (L(∅)=nan" in error, error
    assert not out.exists()


def test_evaluate_of_a_nan_model_is_an_error(nan_model_dir, data_dir, tmp_path, capsys):
    metrics = tmp_path / "metrics.csv"
    argv = ["evaluate", "--model", str(nan_model_dir), "--name", "broken", "--tasks", "wikitext2,piqa"]
    argv += [
        "--limit",
        "4",
        "--data-dir",
        str(data_dir),
        "--ppl-seq-len",
        "32",
        "--ppl-max-tokens",
        "64",
        "--dtype",
        "float32",
    ]
    argv += ["--cache-dir", str(tmp_path / "cache"), "--out-metrics", str(metrics)]
    assert main(argv) == 2
    error = only_error(capsys)
    assert "evaluate: model 'broken' (dense) gives non-finite scores (wikitext2 perplexity=nan" in error, error
    assert not metrics.exists() and not list((tmp_path / "cache").glob("**/*.json"))
    # Without the broken block the model is fine, and is evaluated.
    assert main([*argv[:5], "--removed", "3", *argv[5:]]) == 0


def test_search_refuses_a_non_finite_selected_loss(nan_model_dir, data_dir, tmp_path, capsys, monkeypatch):
    """A search whose every candidate keeps the broken block: its 'best' loss is NaN, not a result."""
    prior = tmp_path / "prior.json"
    prior_doc = {"n_layers": 8, "scores": [float(i) for i in range(8)], "calibration": "ppl_c4"}
    prior.write_text(json.dumps(prior_doc))
    monkeypatch.setattr("depthprune.search.cli.check_prior", lambda *a, **k: None)
    original = __import__("depthprune.search.runner", fromlist=["run_search"]).run_search

    def search_keeping_block_3(evaluator, algorithm, budget, prior_scores, **kwargs):
        result: SearchResult = original(evaluator, "greedy", budget, prior_scores, **kwargs)
        result.loss = evaluator.evaluate([(0, 1)])[0].loss  # a set that keeps block 3
        return result

    monkeypatch.setattr("depthprune.search.runner.run_search", search_keeping_block_3)
    selection = tmp_path / "selection.json"
    argv = ["search", *calibration(nan_model_dir, data_dir), "--algorithm", "greedy", "--budget", "2"]
    argv += ["--prior", str(prior), "--workdir", str(tmp_path / "work"), "--out-selection", str(selection)]
    argv += ["--out-trace", str(tmp_path / "trace.csv")]
    assert main(argv) == 2
    error = only_error(capsys)
    assert "search: model 'broken' gives a non-finite selected set's loss nan" in error, error
    assert not selection.exists()

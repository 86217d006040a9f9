"""`depthprune search` and every algorithm end to end on a tiny random model with the real evaluator."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from depthprune.cli import build_parser, main
from depthprune.cli_common import build_evaluator
from depthprune.prior import compute_prior
from depthprune.search import ALGORITHMS
from depthprune.search.cli import parse_params
from depthprune.search.runner import TRACE_COLUMNS, run_search

SMALL = {"bo": {"n_trials": 15}, "ga": {"generations": 3}}
SELECTION_FIELDS = [
    "model",
    "calibration",
    "budget",
    "algorithm",
    "removed",
    "n_layers",
    "loss",
    "calibration_perplexity",
    "calibration_accuracy",
    "distinct_evaluations",
    "memo_hits",
    "blocks_run",
    "search_seconds",
    "prior_seconds",
    "seed",
    "dtype",
    "calibration_tokens",
    "hyperparameters",
    "diagnostics",
    "scoring_version",
    "versions",
]


def calibration_args(model_dir, data_dir, calibration):
    return [
        "--model",
        str(model_dir),
        "--calibration",
        calibration,
        "--data-dir",
        str(data_dir),
        "--n-samples",
        "4",
        "--seq-len",
        "32",
        "--seed",
        "0",
    ]


@pytest.fixture(scope="module", params=["ppl_c4", "tlm_cs170k"])
def evaluator_and_prior(request, tiny_model_dir, data_dir, tmp_path_factory):
    calibration = request.param
    args = build_parser().parse_args(
        ["prior", *calibration_args(tiny_model_dir, data_dir, calibration), "--out", "unused.json"]
    )
    evaluator = build_evaluator(args)
    prior = compute_prior(evaluator)
    path = tmp_path_factory.mktemp(calibration) / "prior.json"
    path.write_text(json.dumps(prior))
    return calibration, evaluator, prior, path


def test_every_algorithm_on_a_tiny_model(evaluator_and_prior, tmp_path):
    calibration, evaluator, prior, _ = evaluator_and_prior
    budget = 3
    results = {
        name: run_search(
            evaluator, name, budget, prior["scores"], seed=0, workdir=tmp_path / name, params=SMALL.get(name)
        )
        for name in ALGORITHMS
    }
    for name, result in results.items():
        assert len(result.removed) == budget and list(result.removed) == sorted(result.removed), name
        assert math.isfinite(result.loss), name
        # The reported loss is the evaluator's loss of the reported set.
        assert result.loss == pytest.approx(evaluator.loss(result.removed), rel=1e-6), name
        assert (result.accuracy is not None) == (calibration == "tlm_cs170k"), name
        assert result.distinct_evaluations >= 1 and len(result.trace) == result.distinct_evaluations + result.memo_hits
    # Searches that start from (or keep) the one-shot set can only improve on it.
    for name in ("ga", "bo", "fast_block_select"):
        assert results[name].loss <= results["one_shot"].loss + 1e-12, name
    assert results["greedy"].distinct_evaluations == 8 + 7 + 6


def test_search_command_writes_selection_and_trace(evaluator_and_prior, tiny_model_dir, data_dir, tmp_path):
    calibration, _, _, prior_path = evaluator_and_prior
    selection, trace = tmp_path / "out" / "selection.json", tmp_path / "out" / "trace.csv"
    status = main(
        [
            "search",
            *calibration_args(tiny_model_dir, data_dir, calibration),
            "--name",
            "tiny8",
            "--algorithm",
            "cbo",
            "--budget",
            "2",
            "--prior",
            str(prior_path),
            "--workdir",
            str(tmp_path / "work"),
            "--param",
            "rerank=4",
            "--out-selection",
            str(selection),
            "--out-trace",
            str(trace),
        ]
    )
    assert status == 0
    doc = json.loads(selection.read_text())
    assert list(doc) == SELECTION_FIELDS
    assert (doc["model"], doc["calibration"], doc["budget"], doc["algorithm"]) == ("tiny8", calibration, 2, "cbo")
    assert doc["dtype"] == "float32"  # dtype auto, resolved (the suite forces a float32 CPU)
    assert doc["hyperparameters"]["rerank"] == 4 and doc["hyperparameters"]["exact_limit"] == 100_000_000
    assert doc["n_layers"] == 8 and len(doc["removed"]) == 2 and doc["removed"] == sorted(doc["removed"])
    if calibration == "ppl_c4":
        assert doc["calibration_perplexity"] == pytest.approx(math.exp(doc["loss"]))
        assert doc["calibration_accuracy"] is None
    else:
        assert doc["calibration_perplexity"] is None and 0 <= doc["calibration_accuracy"] <= 1
    frame = pd.read_csv(trace, keep_default_na=False)
    assert list(frame.columns) == TRACE_COLUMNS
    assert len(frame) == doc["distinct_evaluations"] + doc["memo_hits"] == 4  # the reranked sets
    assert list(frame["order"]) == list(range(len(frame)))
    assert " ".join(map(str, doc["removed"])) in set(frame["removed"])


def test_unknown_param_is_a_clear_error(tmp_path, capsys):
    prior = tmp_path / "prior.json"
    prior.write_text(json.dumps({"calibration": "ppl_c4", "n_layers": 8, "scores": [1.0] * 8}))
    common = [
        "search",
        "--model",
        "tiny:llama-8",
        "--calibration",
        "ppl_c4",
        "--prior",
        str(prior),
        "--workdir",
        str(tmp_path / "work"),  # its own folder: an output inside the workdir is refused first
        "--out-selection",
        str(tmp_path / "s.json"),
        "--out-trace",
        str(tmp_path / "t.csv"),
    ]
    assert main([*common, "--algorithm", "ga", "--budget", "3", "--param", "popsize=8"]) == 2
    err = capsys.readouterr().err
    assert "'popsize'" in err and "elitism" in err and "population" in err
    assert main([*common, "--algorithm", "ga", "--budget", "8"]) == 2
    assert "--budget 8" in capsys.readouterr().err
    assert main([*common, "--algorithm", "ga", "--budget", "6", "--protected", "0 7"]) == 2
    assert main([*common, "--algorithm", "ga", "--budget", "0"]) == 2
    assert not (tmp_path / "s.json").exists()


def test_param_values_are_yaml_scalars():
    assert parse_params(
        ["exact_limit=5e6", "elitism=0.25", "coefficients=ablation", "prior_seeded=false", "n_trials=15"]
    ) == {
        "exact_limit": 5_000_000,
        "elitism": 0.25,
        "coefficients": "ablation",
        "prior_seeded": False,
        "n_trials": 15,
    }
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_params(["beam_width"])


def test_bench_param_overrides_are_per_algorithm():
    from depthprune.timing.search import algorithm_params

    assert algorithm_params(["bo.n_trials=5", "ga.generations=2", "bo.multivariate=false"]) == {
        "bo": {"n_trials": 5, "multivariate": False},
        "ga": {"generations": 2},
    }
    with pytest.raises(ValueError, match=r"ALGORITHM\.KEY=VALUE"):
        algorithm_params(["n_trials=5"])

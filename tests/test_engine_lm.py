"""The lm-eval model class: the same log-likelihoods and metrics as lm-eval's HFLM, through the engine."""

from __future__ import annotations

import pytest

from depthprune.evaluation import harness

TASKS = ["hellaswag", "winogrande", "lambada_openai"]  # shared contexts, shared continuations, single requests


@pytest.fixture(scope="module")
def pruned(tiny_model_dir):
    from depthprune.models import load_model, remove_blocks

    loaded = load_model(str(tiny_model_dir), dtype="float32", device="cpu")
    remove_blocks(loaded.model, (2, 5))
    return loaded


def test_engine_matches_hflm_per_request_and_per_metric(pruned, data_dir):
    from lm_eval.api.instance import Instance

    from depthprune.evaluation.engine_lm import DepthpruneLM

    hflm = harness.make_lm(pruned.model, pruned.tokenizer, 8, engine="hflm")
    engine = harness.make_lm(pruned.model, pruned.tokenizer, 8, engine="depthprune")
    assert isinstance(engine, DepthpruneLM)
    with harness.hub_offline(), harness.task_manager(data_dir, TASKS) as manager:
        for task in TASKS:
            ours = harness.run_task(engine, manager, task, limit=6, bootstrap_iters=0)
            theirs = harness.run_task(hflm, manager, task, limit=6, bootstrap_iters=0)
            assert [m.metric for m in ours.metrics] == [m.metric for m in theirs.metrics], task
            for a, b in zip(ours.metrics, theirs.metrics):  # accuracies equal; perplexity to float error
                assert a.value == b.value if a.metric != "perplexity" else a.value == pytest.approx(b.value, rel=1e-5)
    requests = [
        Instance("loglikelihood", {}, ("The cat sat on", " the mat"), 0),
        Instance("loglikelihood", {}, ("The cat sat on", " a hat today"), 1),
        Instance("loglikelihood", {}, ("A different context", " entirely"), 2),
    ]
    for (a, greedy_a), (b, greedy_b) in zip(engine.loglikelihood(requests), hflm.loglikelihood(requests)):
        assert abs(a - b) <= 1e-4 and greedy_a == greedy_b
    rolling = [Instance("loglikelihood_rolling", {}, ("Some text to score as a whole document. " * 20,), 0)]
    assert abs(engine.loglikelihood_rolling(rolling)[0] - hflm.loglikelihood_rolling(rolling)[0]) <= 1e-3


def test_registered_for_the_lm_eval_command_line():
    from lm_eval.api.registry import get_model

    import depthprune.evaluation.engine_lm as engine_lm

    assert get_model("depthprune") is engine_lm.DepthpruneLM


def test_timing_evaluate_compare_runs_every_path_and_agrees(tiny_model_dir, data_dir, capsys):
    """The README's evaluation benchmark (``timing evaluate --compare``) on the tiny model: HFLM, the
    engine one model at a time and the one-pass group see the same requests, agree on every metric,
    and the float64 referee rescores the most different requests."""
    from depthprune.cli import main

    argv = ["timing", "evaluate", "--compare", "--model", str(tiny_model_dir), "--data-dir", str(data_dir)]
    argv += ["--tasks", "wikitext2,piqa", "--limit", "4", "--ppl-seq-len", "64", "--ppl-max-tokens", "128"]
    argv += ["--compare-sets", "1 3", "1 4 6"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert any(line.startswith("one pass: ") for line in lines)
    assert any(line.startswith("float64 referee on the 5 most different requests") for line in lines)
    # HFLM runs the head at every position and every choice's context: the one pass must do less arithmetic
    (macs_line,) = [line for line in lines if line.startswith("linear multiply-adds (")]
    assert 0 < float(macs_line.split("grouped/hflm=")[1].split()[0]) < 1
    last = dict(item.split("=") for item in lines[-1].removeprefix("evaluate: ").split())
    assert lines[-1].startswith("evaluate: ") and last["metrics_equal"] == "yes"
    assert float(last["seconds_ratio"]) > 0 and float(last["max_abs_loglik_diff"]) <= 1e-4


def test_linear_macs_counts_rows_times_in_times_out_per_label():
    import torch

    from depthprune.timing.evaluate import LinearMacs

    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Linear(5, 2))
    with LinearMacs([model]) as counter:
        model(torch.zeros(4, 3))  # no label: not counted
        counter.label = "a"
        model(torch.zeros(2, 4, 3))  # 8 rows: 8*3*5 + 8*5*2
        counter.label = "b"
        model(torch.zeros(1, 3))
    model(torch.zeros(1, 3))  # hooks removed
    assert dict(counter.macs) == {"a": 8 * 15 + 8 * 10, "b": 15 + 10}

"""lm-eval glue: offline task YAMLs, all nine benchmarks offline, parity with the lm_eval command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from depthprune.evaluation.benchmarks import BENCHMARKS, LM_EVAL_TASKS, METRICS, EvalSettings
from depthprune.evaluation.harness import write_offline_tasks
from depthprune.evaluation.run import METRICS_COLUMNS, Labels, check_data, evaluate_model, metrics_frame

LIMIT = 3
REMOVED = (2, 5)


@pytest.fixture(scope="module")
def pruned_run(tiny_model_dir, data_dir, tmp_path_factory):
    """A pruned tiny model evaluated in-pipeline on all nine benchmarks offline, and its export."""
    from depthprune.models import export_pruned, load_model, remove_blocks

    loaded = load_model(str(tiny_model_dir), dtype="float32", device="cpu")
    remove_blocks(loaded.model, REMOVED)
    settings = EvalSettings(limit=LIMIT, ppl_seq_len=64, ppl_max_tokens=256, batch_size=8, data_dir=data_dir)
    evaluation = evaluate_model(loaded.model, loaded.tokenizer, settings, REMOVED)
    exported = export_pruned(loaded.model, loaded.tokenizer, tmp_path_factory.mktemp("export") / "pruned")
    return evaluation, settings, exported


def test_offline_task_yamls_reuse_lm_eval_definitions(data_dir, tmp_path):
    from lm_eval.tasks import TaskManager

    out = write_offline_tasks(data_dir, tmp_path, LM_EVAL_TASKS)
    for task in LM_EVAL_TASKS:
        config = yaml.safe_load((out / f"{task}.yaml").read_text())
        assert config["include"].endswith(".yaml") and "lm_eval/tasks" in config["include"]
        assert config["dataset_path"] == "json" and config["dataset_name"] is None
        assert all(str(data_dir) in path for path in config["dataset_kwargs"]["data_files"].values())
    arc = TaskManager(include_path=str(out), include_defaults=False).load(["arc_challenge"])["tasks"]["arc_challenge"]
    docs = list(arc.test_docs())
    assert len(docs) == 1172  # the whole mirror file, through lm-eval's own arc_challenge definition
    assert arc.doc_to_text(docs[0]).startswith("Question: ") and arc.config.doc_to_choice == "{{choices.text}}"


def test_missing_task_file_is_named(data_dir, tmp_path):
    for sub in ("wikitext-2-raw-v1", "c4", "hellaswag"):
        (tmp_path / sub).symlink_to(data_dir / sub)
    settings = EvalSettings(benchmarks=("wikitext2", "c4", "hellaswag", "piqa"), data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match=r"piqa/validation\.jsonl.*'piqa'"):
        check_data(settings)
    check_data(settings.replace(benchmarks=("wikitext2", "c4", "hellaswag")))  # all present: no error


def test_all_nine_benchmarks_offline(pruned_run):
    evaluation, settings, _ = pruned_run
    frame = metrics_frame(evaluation, Labels.for_removed("tiny", REMOVED, "ppl_c4", 2, "greedy"), settings)
    assert list(frame.columns) == METRICS_COLUMNS
    assert [(r.benchmark, r.metric) for r in frame.itertuples()] == [(b, m) for b in BENCHMARKS for m in METRICS[b]]
    assert set(frame.removed) == {"2 5"} and set(frame.algorithm) == {"greedy"}
    assert frame.groupby("benchmark").headline.sum().eq(1).all()
    headline = frame[frame.headline].set_index("benchmark").metric
    assert headline["hellaswag"] == "acc_norm" and headline["boolq"] == "acc" and headline["c4"] == "perplexity"
    ppl = frame[frame.metric == "perplexity"].set_index("benchmark")
    assert (ppl.value > 1).all() and ppl.loc["wikitext2", "n"] == 4 * 63 and ppl.loc["lambada_openai", "n"] == LIMIT
    acc = frame[frame.metric.isin(["acc", "acc_norm"])]
    assert acc.n.eq(LIMIT).all()
    assert ((acc.value * LIMIT).round(9) % 1 == 0).all()  # a fraction of the LIMIT documents


@pytest.mark.slow
def test_lm_eval_command_line_on_export_matches_in_pipeline(pruned_run, data_dir, tmp_path):
    """Marked ``slow``: lm-eval's own command line end to end on an exported model (about 19 s under AVX2)."""
    evaluation, _, exported = pruned_run
    tasks_dir = write_offline_tasks(data_dir, tmp_path / "tasks")
    command = [
        sys.executable,
        "-m",
        "lm_eval",
        "--model",
        "hf",
        "--model_args",
        f"pretrained={exported},dtype=float32",
        "--device",
        "cpu",
        "--tasks",
        ",".join(LM_EVAL_TASKS),
        "--include_path",
        str(tasks_dir),
        "--limit",
        str(LIMIT),
        "--batch_size",
        "8",
        "--output_path",
        str(tmp_path / "out"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (results_file,) = (tmp_path / "out").rglob("results_*.json")
    cli_results = json.loads(results_file.read_text())["results"]
    in_pipeline = {(m.benchmark, m.metric): m.value for m in evaluation.metrics}
    for task in LM_EVAL_TASKS:
        for metric in METRICS[task]:
            expected = in_pipeline[task, metric]
            assert cli_results[task][f"{metric},none"] == pytest.approx(expected, rel=1e-5), (task, metric)

"""Content-addressed evaluation cache and the ``depthprune evaluate`` command line."""

from __future__ import annotations

import json
import threading
import time

import pandas as pd

from depthprune.evaluation.benchmarks import EvalSettings
from depthprune.evaluation.cache import EvalCache, cache_key
from depthprune.evaluation.run import METRICS_COLUMNS, Labels, cache_payload, evaluate_removed_sets, metrics_frame

IDENTITY = {"spec": "tiny:llama-8", "dtype": "float32", "device": "cpu"}
SMALL = {"benchmarks": ("wikitext2", "piqa"), "limit": 2, "ppl_seq_len": 64, "ppl_max_tokens": 128, "batch_size": 4}


class CountingLoader:
    """Loads the tiny checkpoint, counting the loads (a cache hit must not load anything)."""

    def __init__(self, folder, delay: float = 0.0):
        self.folder, self.delay, self.calls = folder, delay, 0

    def __call__(self):
        from depthprune.models import load_model

        self.calls += 1
        time.sleep(self.delay)
        return load_model(str(self.folder), dtype="float32", device="cpu")


def key_of(settings, removed=(1, 3)):
    return cache_key(cache_payload(IDENTITY, removed, settings))


def test_key_covers_what_changes_a_figure_and_not_labels(data_dir, tmp_path):
    base = EvalSettings(**SMALL, data_dir=data_dir)
    assert key_of(base) == key_of(base.replace(headline={"piqa": "acc"}))  # a label, not a figure
    assert key_of(base) != key_of(base, removed=(1, 4))
    assert key_of(base) != key_of(base.replace(limit=3))
    assert key_of(base) != key_of(base.replace(ppl_seq_len=32))
    assert key_of(base) != key_of(base.replace(data_dir=None))  # hub instead of the mirror
    # The mirror is identified by content, not location.
    for sub in ("wikitext-2-raw-v1", "piqa"):
        (tmp_path / sub).symlink_to(data_dir / sub)
    assert key_of(base) == key_of(base.replace(data_dir=tmp_path))


def test_cache_hit_returns_identical_rows_without_loading(tiny_model_dir, data_dir, tmp_path):
    settings = EvalSettings(**SMALL, data_dir=data_dir)
    cache = EvalCache(tmp_path / "cache")
    loader = CountingLoader(tiny_model_dir)
    first = evaluate_removed_sets(
        model_identity=IDENTITY, removed_sets=[(3, 1)], settings=settings, load=loader, cache=cache
    )[0]
    start = time.perf_counter()
    second = evaluate_removed_sets(
        model_identity=IDENTITY, removed_sets=[(1, 3)], settings=settings, load=loader, cache=cache
    )[0]
    assert time.perf_counter() - start < 1.0
    assert loader.calls == 1 and not first.cache_hit and second.cache_hit
    a = metrics_frame(first, Labels("tiny", "ppl_c4", 2, "greedy"), settings)
    b = metrics_frame(second, Labels("tiny", "tlm_cs170k", 2, "beam"), settings)
    figures = ["removed", "benchmark", "metric", "value", "stderr", "n", "headline"]
    pd.testing.assert_frame_equal(a[figures], b[figures])
    assert set(b.algorithm) == {"beam"} and set(b.calibration) == {"tlm_cs170k"}
    assert a.loc[a.benchmark == "wikitext2", "value"].item() > 1


def test_concurrent_jobs_evaluate_a_set_once(tiny_model_dir, data_dir, tmp_path):
    settings = EvalSettings(**{**SMALL, "benchmarks": ("wikitext2",)}, data_dir=data_dir)
    cache = EvalCache(tmp_path / "cache")
    loader = CountingLoader(tiny_model_dir, delay=0.5)  # the second job arrives while the first computes
    results = []

    def job():
        evaluation = evaluate_removed_sets(
            model_identity=IDENTITY, removed_sets=[(2,)], settings=settings, load=loader, cache=cache
        )[0]
        results.append(evaluation)

    threads = [threading.Thread(target=job) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loader.calls == 1
    assert sorted(r.cache_hit for r in results) == [False, True]
    assert results[0].metrics == results[1].metrics
    assert not list((tmp_path / "cache").rglob("*.tmp"))  # atomic writes left no partial files


def run_cli(argv, capsys):
    from depthprune.cli import main

    code = main(argv)
    return code, capsys.readouterr()


def test_evaluate_command_labels_cache_and_outputs(tiny_model_dir, data_dir, tmp_path, capsys):
    selection = {"model": "tiny", "calibration": "ppl_c4", "budget": 2, "algorithm": "greedy", "removed": [1, 6]}
    (tmp_path / "selection.json").write_text(json.dumps(selection))
    common = [
        "evaluate",
        "--model",
        str(tiny_model_dir),
        "--name",
        "tiny",
        "--model-cache-dir",
        str(tmp_path / "models"),
        "--data-dir",
        str(data_dir),
        "--tasks",
        "wikitext2,piqa",
        "--limit",
        "2",
        "--ppl-seq-len",
        "64",
        "--ppl-max-tokens",
        "128",
        "--batch-size",
        "4",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    outputs = ["--out-metrics", str(tmp_path / "a.csv"), "--out-raw", str(tmp_path / "a.json")]
    code, _ = run_cli(common + ["--selection", str(tmp_path / "selection.json"), *outputs], capsys)
    assert code == 0
    a = pd.read_csv(tmp_path / "a.csv", keep_default_na=False)
    assert list(a.columns) == METRICS_COLUMNS
    assert set(a.algorithm) == {"greedy"} and set(a.calibration) == {"ppl_c4"} and set(a.removed) == {"1 6"}
    raw = json.loads((tmp_path / "a.json").read_text())
    assert raw["results"]["piqa"]["acc,none"] == a.loc[a.metric == "acc", "value"].item()
    assert raw["depthprune"]["labels"]["algorithm"] == "greedy"

    # Another algorithm that chose the same set: copied from the cache, relabelled.
    code, out = run_cli(
        common
        + [
            "--removed",
            "6 1",
            "--calibration",
            "ppl_c4",
            "--algorithm",
            "bo",
            "--budget",
            "2",
            "--out-metrics",
            str(tmp_path / "b.csv"),
        ],
        capsys,
    )
    assert code == 0 and "cache hit" in out.out
    b = pd.read_csv(tmp_path / "b.csv", keep_default_na=False)
    assert set(b.algorithm) == {"bo"}
    pd.testing.assert_frame_equal(a.drop(columns="algorithm"), b.drop(columns="algorithm"))

    # Dense model: labels none/0/dense, empty removed field.
    code, _ = run_cli(common + ["--tasks", "wikitext2", "--out-metrics", str(tmp_path / "dense.csv")], capsys)
    dense = pd.read_csv(tmp_path / "dense.csv", keep_default_na=False)
    assert code == 0
    assert dense.loc[0, ["calibration", "budget", "algorithm", "removed"]].tolist() == ["none", 0, "dense", ""]


def test_evaluate_command_names_missing_data_file(tiny_model_dir, tmp_path, capsys):
    code, out = run_cli(
        [
            "evaluate",
            "--model",
            str(tiny_model_dir),
            "--data-dir",
            str(tmp_path),
            "--tasks",
            "boolq",
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        capsys,
    )
    assert code == 2
    assert "boolq/validation.jsonl" in out.err and "not found" in out.err


def test_per_document_results_are_cached_and_reproduce_the_metrics(tiny_model_dir, data_dir, tmp_path):
    """lm-eval's per-document scores and the per-window NLLs are kept (Parquet in the cache entry);
    their means give back the reported accuracy and perplexity, and a cache hit returns them unchanged."""
    import math

    from depthprune.evaluation.cache import SAMPLES
    from depthprune.evaluation.run import SAMPLES_COLUMNS, samples_frame, write_outputs

    settings = EvalSettings(**SMALL, data_dir=data_dir)
    cache = EvalCache(tmp_path / "cache")
    loader = CountingLoader(tiny_model_dir)
    first = evaluate_removed_sets(
        model_identity=IDENTITY, removed_sets=[(1, 3)], settings=settings, load=loader, cache=cache
    )[0]
    assert (cache.entry_dir(first.cache_key) / SAMPLES).is_file()
    second = evaluate_removed_sets(
        model_identity=IDENTITY, removed_sets=[(1, 3)], settings=settings, load=loader, cache=cache
    )[0]
    assert second.cache_hit and loader.calls == 1
    labels = Labels("tiny", "ppl_c4", 2, "greedy")
    write_outputs(second, labels, settings, None, None, tmp_path / "samples.parquet")
    samples = pd.read_parquet(tmp_path / "samples.parquet")
    assert list(samples.columns) == SAMPLES_COLUMNS
    pd.testing.assert_frame_equal(samples, samples_frame(first, labels, settings))
    metrics = metrics_frame(first, labels, settings).set_index(["benchmark", "metric"])["value"]
    head = samples[samples["headline"]]
    piqa = head[head["benchmark"] == "piqa"]
    assert set(piqa["metric"]) == {"acc_norm"} and len(piqa) == 2
    assert piqa["value"].mean() == metrics[("piqa", "acc_norm")]
    assert {"acc", "loglik_0", "loglik_1", "target"} <= set(samples.loc[samples["benchmark"] == "piqa", "metric"])
    w2 = head[head["benchmark"] == "wikitext2"].pivot(index="unit", columns="metric", values="value")
    assert len(w2) == 2  # 128 tokens in windows of 64
    assert math.isclose(math.exp(w2["nll_sum"].sum() / w2["n_tokens"].sum()), metrics[("wikitext2", "perplexity")])


def test_evaluation_pass_then_each_group_from_the_cache(tiny_model_dir, data_dir, tmp_path, capsys):
    """The pipeline's pass (evaluation.pass_per: model): one `evaluate --dense --out-pass` computes
    every set of two groups and the dense model at once; the groups' and the dense model's own jobs
    then write their files from the cache without loading the model, equal to evaluating alone."""
    groups = {"ppl_c4": [[1, 6], [2, 3]], "tlm_cs170k": [[1, 6], [0, 7]]}  # one set chosen under both
    selections = {}
    for calibration, sets in groups.items():
        for index, removed in enumerate(sets):
            path = tmp_path / f"{calibration}-{index}.json"
            document = {"model": "tiny", "calibration": calibration, "budget": 2, "algorithm": f"a{index}"}
            path.write_text(json.dumps({**document, "removed": removed}))
            selections.setdefault(calibration, []).append(str(path))
    settings = ["--tasks", "wikitext2,piqa", "--limit", "2", "--ppl-seq-len", "64", "--ppl-max-tokens", "128"]
    common = ["evaluate", "--model", str(tiny_model_dir), "--name", "tiny", "--batch-size", "4", *settings]
    common += ["--model-cache-dir", str(tmp_path / "models"), "--data-dir", str(data_dir)]
    cached = [*common, "--cache-dir", str(tmp_path / "cache")]
    everything = [arg for paths in selections.values() for path in paths for arg in ("--selection", path)]
    code, _ = run_cli([*cached, *everything, "--dense", "--out-pass", str(tmp_path / "pass.json")], capsys)
    record = json.loads((tmp_path / "pass.json").read_text())
    assert code == 0 and record["computed"] == 4 and record["cache_hits"] == 0  # [1 6] once, and the dense
    assert sorted(s["removed"] for s in record["sets"]) == [[], [0, 7], [1, 6], [1, 6], [2, 3]]
    assert 0 < record["blocks_run"] < record["naive_blocks"]  # the dense prefix ran once for all four

    for calibration, paths in selections.items():
        outputs = [
            arg
            for index in range(len(paths))
            for arg in ("--out-metrics", str(tmp_path / f"{calibration}-{index}.csv"))
        ]
        code, out = run_cli([*cached, *(a for p in paths for a in ("--selection", p)), *outputs], capsys)
        assert code == 0 and out.out.count("cache hit") == 2 and "0 computed" in out.out
    code, out = run_cli([*cached, "--out-metrics", str(tmp_path / "dense.csv")], capsys)
    assert code == 0 and "cache hit" in out.out

    # The same numbers as each set evaluated alone, without the cache.
    for name, removed in (("tlm_cs170k-1", "0 7"), ("dense", "")):
        alone = tmp_path / f"alone-{name}.csv"
        code, _ = run_cli([*common, "--no-eval-cache", "--removed", removed, "--out-metrics", str(alone)], capsys)
        columns = ["benchmark", "metric", "value"]
        expected = pd.read_csv(alone, keep_default_na=False)[columns]
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / f"{name}.csv", keep_default_na=False)[columns], expected)

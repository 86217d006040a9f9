"""Cache keys come from contents and code, never from paths (issue: stale results served as fresh)."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from depthprune.cli import main
from depthprune.engine.memo import memo_key
from depthprune.models.fingerprint import FINGERPRINT_FILE, folder_fingerprint
from depthprune.search.runner import run_search
from synthetic import random_objective

EVAL = [
    "--tasks",
    "wikitext2",
    "--ppl-seq-len",
    "32",
    "--ppl-max-tokens",
    "64",
    "--device",
    "cpu",
    "--dtype",
    "float32",
]


def test_fingerprint_follows_content_not_path(tiny_model_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_model_dir, copy)
    (copy / FINGERPRINT_FILE).unlink(missing_ok=True)
    assert folder_fingerprint(copy) == folder_fingerprint(tiny_model_dir)  # same files, other path
    assert (copy / FINGERPRINT_FILE).is_file()  # computed once, kept beside the weights
    config = copy / "config.json"
    config.write_text(config.read_text().replace('"num_hidden_layers": 8', '"num_hidden_layers": 7'))
    assert folder_fingerprint(copy) != folder_fingerprint(tiny_model_dir)


def test_reexport_into_the_same_folder_is_not_a_cache_hit(tiny_model_dir, data_dir, tmp_path, capsys):
    """A 28-block export evaluated, then a 20-block one exported into the same folder: not a hit."""
    out, cache = tmp_path / "exported", tmp_path / "eval_cache"
    common = [*EVAL, "--data-dir", str(data_dir), "--cache-dir", str(cache)]
    results = []
    for removed in ("3", "2 3 4 5"):
        assert main(["export", "--model", str(tiny_model_dir), "--removed", removed, "--out", str(out)]) == 0
        capsys.readouterr()
        assert main(["evaluate", "--model", str(out), *common]) == 0
        results.append(capsys.readouterr().out)
    assert "evaluated" in results[0] and "evaluated" in results[1], results
    assert "cache hit" not in results[1]
    # The same export evaluated again is a hit; --recompute is not, and replaces the entry.
    assert main(["evaluate", "--model", str(out), *common]) == 0
    assert "cache hit" in capsys.readouterr().out
    assert main(["evaluate", "--model", str(out), *common, "--recompute"]) == 0
    assert "evaluated" in capsys.readouterr().out
    assert not list(cache.glob("*.lock")), "lock files left behind"


def test_memo_key_ignores_spec_and_path_but_not_content_dtype_or_code():
    base = {
        "model": "tiny:llama-8",
        "model_path": "/a",
        "model_fingerprint": "f1",
        "dtype": "float32",
        "scoring_version": 1,
        "protected": [],
        "calibration": "ppl_c4",
        "n_samples": 4,
    }
    assert memo_key(base) == memo_key({**base, "model": "other", "model_path": "/b", "protected": [0]})
    for change in ({"model_fingerprint": "f2"}, {"dtype": "bfloat16"}, {"scoring_version": 2}, {"n_samples": 8}):
        assert memo_key({**base, **change}) != memo_key(base), change


def test_evaluator_description_holds_fingerprint_and_version(tiny_model_dir, data_dir):
    from depthprune.cli import build_parser
    from depthprune.cli_common import build_evaluator
    from depthprune.versions import SCORING_VERSION

    args = build_parser().parse_args(
        [
            "prior",
            "--model",
            str(tiny_model_dir),
            "--calibration",
            "ppl_c4",
            "--data-dir",
            str(data_dir),
            "--n-samples",
            "2",
            "--seq-len",
            "16",
            "--device",
            "cpu",
            "--dtype",
            "float32",
            "--out",
            "unused.json",
        ]
    )
    described = build_evaluator(args).describe()
    assert described["model_fingerprint"] == folder_fingerprint(tiny_model_dir)
    assert described["scoring_version"] == SCORING_VERSION and described["dtype"] == "float32"


def _bo(workdir, n_trials):
    ev = random_objective(12, seed=3, interaction=0.3)
    return run_search(
        ev, "bo", 4, ev.prior(), seed=7, workdir=workdir, params={"n_trials": n_trials, "n_startup_trials": 4}
    )


def test_lowering_bo_n_trials_does_not_reuse_the_kept_study(tmp_path):
    _bo(tmp_path / "kept", 12)
    lowered = _bo(tmp_path / "kept", 6)
    fresh = _bo(tmp_path / "fresh", 6)
    assert lowered.distinct_evaluations == fresh.distinct_evaluations
    assert [e.removed for e in lowered.trace] == [e.removed for e in fresh.trace]
    assert lowered.removed == fresh.removed


def test_bo_study_name_holds_every_setting():
    from depthprune.search.base import SearchProblem
    from depthprune.search.bo import study_name

    ev = random_objective(12, seed=3)
    problem = SearchProblem(evaluator=ev, budget=4, prior=ev.prior(), seed=7, protected=frozenset(), workdir=".")
    names = {
        study_name(problem, {"n_trials": n, "n_startup_trials": s, "multivariate": True})
        for n in (6, 12)
        for s in (4, 10)
    }
    assert len(names) == 4


def _args(**kw):
    return argparse.Namespace(**kw)


@pytest.mark.parametrize("spec", ["meta-llama/Meta-Llama-3-8B", "meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B"])
def test_paper_model_ids_are_hub_ids_that_fail_at_once_offline(spec, monkeypatch, tmp_path, capsys):
    import time

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty local cache
    started = time.monotonic()
    code = main(["evaluate", "--model", spec, "--tasks", "wikitext2", "--out-metrics", str(tmp_path / "m.csv")])
    err = capsys.readouterr().err
    assert code == 2
    assert "Hugging Face hub id not reachable" in err and "folder not found" not in err, err
    assert time.monotonic() - started < 20  # no retries (usually well under a second)


def test_gguf_files_of_one_name_get_their_own_conversions(tmp_path, monkeypatch):
    """Issue 55: gguf:b/model.gguf after gguf:a/model.gguf (same file name, same cache) got a's
    converted weights. The converted folder is keyed by the file's content: another content gets
    another folder, the same content (a copy elsewhere) the same one."""
    from depthprune.models import loading

    a, b, copy_of_a = (tmp_path / where / "model.gguf" for where in ("a", "b", "c"))
    for path, content in ((a, b"GGUF a's weights"), (b, b"GGUF b's weights"), (copy_of_a, b"GGUF a's weights")):
        path.parent.mkdir()
        path.write_bytes(content)
    converted = []

    def convert(gguf, target):  # stands in for the transformers conversion, which needs a real model
        converted.append(gguf)
        target.mkdir(parents=True, exist_ok=True)
        return target

    monkeypatch.setattr(loading, "_convert_gguf", convert)
    cache = tmp_path / "cache"
    folder_a = loading.materialise(f"gguf:{a}", cache)
    folder_b = loading.materialise(f"gguf:{b}", cache)
    assert folder_a != folder_b
    assert loading.materialise(f"gguf:{copy_of_a}", cache) == folder_a  # content, not path
    assert {Path(f).parent for f in (folder_a, folder_b)} == {cache}
    assert Path(folder_a).name.startswith("model-") and Path(folder_b).name.startswith("model-")
    assert converted == [a, b, copy_of_a]
    a.write_bytes(b"GGUF a's weights, edited")  # the same file with new content: its own folder
    assert loading.materialise(f"gguf:{a}", cache) not in (folder_a, folder_b)


def test_a_source_file_is_hashed_once_while_it_is_unchanged(tmp_path):
    """The hash is recorded with the file's size and mtime, and reused while they hold (model jobs
    that convert nothing only stat the GGUF); a changed file is hashed again."""
    import hashlib
    import json
    import os

    from depthprune.models.fingerprint import SOURCE_HASHES_DIR, source_sha256

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF weights")
    cache = tmp_path / "cache"
    assert source_sha256(gguf, cache) == hashlib.sha256(b"GGUF weights").hexdigest()
    (record,) = (cache / SOURCE_HASHES_DIR).iterdir()
    stored = json.loads(record.read_text())
    assert stored["path"] == str(gguf.resolve()) and stored["size"] == len(b"GGUF weights")
    planted = "0" * 64  # what only a reused record can return
    record.write_text(json.dumps({**stored, "sha256": planted}))
    assert source_sha256(gguf, cache) == planted
    os.utime(gguf, ns=(stored["mtime_ns"] + 10**9, stored["mtime_ns"] + 10**9))
    assert source_sha256(gguf, cache) == hashlib.sha256(b"GGUF weights").hexdigest()

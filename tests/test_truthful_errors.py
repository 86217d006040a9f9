"""Errors that tell the truth, in one line (issue 45, findings 6 and 7): an I/O error (disk full, file
size limit, a folder where a file belongs) is said as such and never advises deleting a good cache;
"pass --data-dir" only when the data is missing; a corrupt BO study, a full results folder and an
output folder that cannot be made are one line with a non-zero exit, not tracebacks."""

from __future__ import annotations

import json
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from depthprune.cli import main
from depthprune.engine import memo as memo_module
from depthprune.engine.memo import SqliteMemo, check_memo_file

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--n-samples", "4", "--seq-len", "32", "--seed", "0"]


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1, err
    return lines[0]


def test_memo_that_is_a_folder_is_called_a_folder(tmp_path):
    with pytest.raises(ValueError) as caught:
        check_memo_file(tmp_path)
    assert "is a folder; name an SQLite file" in str(caught.value) and "delete" not in str(caught.value)


def test_io_error_on_a_valid_memo_is_not_called_corrupt(tmp_path, monkeypatch):
    """A full disk or `ulimit -f` makes SQLite report SQLITE_IOERR/SQLITE_FULL on a good memo:
    deleting it, as the old message advised, would destroy the cache."""
    path = tmp_path / "memo.sqlite"
    memo = SqliteMemo(path, "key", {"x": 1})
    memo.put((1,), 1.0, None, 0.1)
    memo.close()
    good = path.read_bytes()

    def full_disk(*args, **kwargs):
        err = sqlite3.OperationalError("database or disk is full")
        err.sqlite_errorname = "SQLITE_FULL"
        raise err

    monkeypatch.setattr(memo_module.sqlite3, "connect", full_disk)
    for check in (lambda: check_memo_file(path), lambda: SqliteMemo(path, "key", {"x": 1})):
        with pytest.raises(ValueError) as caught:
            check()
        message = str(caught.value)
        assert f"{path}: I/O error on the memo SQLite file (database or disk is full, SQLITE_FULL)" in message
        assert "ulimit -f" in message and "keep it" in message and "delete" not in message
    assert path.read_bytes() == good


def test_full_results_folder_is_one_line(tmp_path):
    """`ulimit -f` (RLIMIT_FSIZE) makes every write past the limit fail with EFBIG, as a full disk
    fails with ENOSPC: one line naming the error, exit 2, nothing half-written."""
    out = tmp_path / "profile.yaml"

    def small_file_limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))

    argv = [sys.executable, "-m", "depthprune", "plan", "--configfile", "config/smoke.yaml"]
    argv += ["--throughput", "10", "--config", f"data_dir={REPO.parent / 'shared' / 'data'}"]
    argv += ["--write-profile", str(out)]
    if not (REPO.parent / "shared" / "data" / "c4" / "train.jsonl").is_file():
        pytest.skip("offline data mirror not found")
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, preexec_fn=small_file_limit, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "error: I/O error on " in done.stderr and "File too large [errno 27]" in done.stderr, done.stderr
    assert not out.exists() and not list(tmp_path.glob(".profile.yaml.*"))


def test_weights_that_cannot_be_written_are_one_line(monkeypatch, capsys):
    """A fresh clone under `ulimit -f` first fails while writing the tiny model's weights, where
    safetensors raises its own SafetensorError, not an OSError: still one line and exit 2."""
    from safetensors import SafetensorError

    from depthprune import plan_cli

    def fail(args):
        raise SafetensorError("Error while serializing: I/O error: File too large (os error 27)")

    monkeypatch.setattr(plan_cli, "run", fail)
    assert main(["plan", "--configfile", "config/smoke.yaml", "--throughput", "10"]) == 2
    error = one_error(capsys)
    assert "depthprune plan: error: I/O error while writing model weights:" in error
    assert "File too large" in error


def test_render_into_a_folder_it_cannot_make_is_one_line(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    argv = ["render", "--aggregate", str(REPO / "results" / "aggregate"), "--out", str(blocker / "figures")]
    assert main([*argv, "--only", "table1", "--bootstrap-resamples", "10"]) == 2
    error = one_error(capsys)
    assert "depthprune render: error: I/O error on " in error and str(blocker) in error, error


@pytest.fixture(scope="module")
def prior_path(tiny_model_dir, data_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("prior") / "prior.json"
    argv = ["prior", "--model", str(tiny_model_dir), "--calibration", "ppl_c4", "--data-dir", str(data_dir), *SMALL]
    assert main([*argv, "--out", str(path)]) == 0
    return path


def test_corrupt_bo_study_is_one_line_pointing_at_recompute(tiny_model_dir, data_dir, prior_path, tmp_path, capsys):
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "bo_study.sqlite3").write_bytes(b"not an SQLite file " * 50)
    argv = ["search", "--model", str(tiny_model_dir), "--calibration", "ppl_c4", "--data-dir", str(data_dir), *SMALL]
    argv += ["--algorithm", "bo", "--param", "n_trials=3", "--budget", "2", "--prior", str(prior_path)]
    argv += ["--workdir", str(workdir), "--out-selection", str(tmp_path / "s.json"), "--out-trace", str(tmp_path / "t")]
    assert main(argv) == 2
    error = one_error(capsys)
    assert f"{workdir / 'bo_study.sqlite3'}: not a readable BO study" in error and "--recompute" in error, error
    assert main([argv[0], "--recompute", *argv[1:]]) == 0  # the search's own scratch state: --recompute clears it
    assert json.loads((tmp_path / "s.json").read_text())["budget"] == 2


def test_offline_data_found_but_wrong_does_not_say_pass_data_dir(tiny_model_dir, data_dir, tmp_path, capsys):
    mirror = tmp_path / "mirror" / "piqa"
    mirror.mkdir(parents=True)
    rows = [json.loads(line) for line in (data_dir / "piqa" / "validation.jsonl").read_text().splitlines()[:6]]
    (mirror / "validation.jsonl").write_text("".join(json.dumps({"question": r["goal"]}) + "\n" for r in rows))
    argv = ["evaluate", "--model", str(tiny_model_dir), "--tasks", "piqa", "--limit", "4"]
    argv += ["--data-dir", str(mirror.parent), "--no-eval-cache", "--out-metrics", str(tmp_path / "m.csv")]
    assert main(argv) == 2
    error = one_error(capsys)
    assert f"lm-eval task 'piqa': its offline data {mirror / 'validation.jsonl'} could not be read" in error, error
    assert "--data-dir" not in error and not (tmp_path / "m.csv").exists()

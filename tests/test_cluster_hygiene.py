"""Nothing lost and nothing left behind: export safety, atomic folders, umask, locks, temporaries,
log handlers, and the memo written by several processes at once."""

from __future__ import annotations

import logging
import multiprocessing
import os
import subprocess
import sys

import pytest

from depthprune.cli import main
from depthprune.engine.memo import SqliteMemo
from depthprune.evaluation.cache import EvalCache
from depthprune.io import atomic_dir, atomic_write_text

# --------------------------------------------------------------------------- export


def test_export_refuses_a_folder_it_did_not_create(tiny_model_dir, tmp_path, capsys):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("my thesis")
    code = main(["export", "--model", str(tiny_model_dir), "--removed", "3", "--out", str(target)])
    assert code == 2
    assert "is not a previous export" in capsys.readouterr().err
    assert (target / "notes.txt").read_text() == "my thesis"


def test_export_refuses_the_current_folder(tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keep.txt").write_text("x")
    for out in (".", str(tmp_path), ".."):
        code = main(["export", "--model", str(tiny_model_dir), "--removed", "3", "--out", out, "--overwrite"])
        assert code == 2
        assert "refusing to export over the current folder" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").exists()


def test_export_replaces_a_previous_export_and_overwrite_is_explicit(tiny_model_dir, tmp_path):
    import json

    out = tmp_path / "pruned"
    assert main(["export", "--model", str(tiny_model_dir), "--removed", "3", "--out", str(out)]) == 0
    assert main(["export", "--model", str(tiny_model_dir), "--removed", "2 3", "--out", str(out)]) == 0
    assert json.loads((out / "depthprune.json").read_text())["removed_layers"] == [2, 3]
    other = tmp_path / "other"
    other.mkdir()
    (other / "file").write_text("x")
    assert main(["export", "--model", str(tiny_model_dir), "--removed", "3", "--out", str(other), "--overwrite"]) == 0
    assert not (other / "file").exists() and (other / "depthprune.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temporary siblings left behind"


def test_atomic_dir_keeps_the_old_folder_when_the_new_one_fails(tmp_path):
    target = tmp_path / "out"
    target.mkdir()
    (target / "old").write_text("old")
    with pytest.raises(RuntimeError), atomic_dir(target, replace=True) as tmp:
        (tmp / "new").write_text("half")
        raise RuntimeError("crash mid-write")
    assert (target / "old").read_text() == "old" and not (target / "new").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    with atomic_dir(target, replace=True) as tmp:
        (tmp / "new").write_text("new")
    assert [p.name for p in target.iterdir()] == ["new"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_outputs_follow_the_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        with atomic_dir(tmp_path / "folder") as tmp:
            (tmp / "sub").mkdir()
            atomic_write_text(tmp / "sub" / "f.txt", "x")
        atomic_write_text(tmp_path / "file.txt", "x")
    finally:
        os.umask(previous)
    assert (tmp_path / "folder").stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "folder" / "sub" / "f.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "file.txt").stat().st_mode & 0o777 == 0o644


def test_temporaries_of_a_killed_process_are_removed_on_the_next_run(tmp_path):
    script = (
        "import os, sys, time\n"
        "from depthprune.io import atomic_dir, atomic_path\n"
        "with atomic_dir(sys.argv[1] + '/model') as tmp, atomic_path(sys.argv[1] + '/result.json') as f:\n"
        "    (tmp / 'weights').write_text('x'); print('ready', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.kill()
    proc.wait()
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert len(leftovers) == 2  # what a SIGKILL leaves: a temporary folder and a temporary file
    with atomic_dir(tmp_path / "model") as tmp:
        (tmp / "weights").write_text("y")
    atomic_write_text(tmp_path / "result.json", "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "result.json"]


# --------------------------------------------------------------------------- evaluation-cache locks


def test_lock_files_are_removed_on_success_and_failure(tmp_path):
    cache = EvalCache(tmp_path)
    with cache.lock("k1"):
        assert (tmp_path / "k1.lock").exists()
    with pytest.raises(ValueError), cache.lock("k2"):
        raise ValueError("evaluation failed")
    assert not list(tmp_path.glob("*.lock"))


def _hold_lock(root, key, started, release):
    with EvalCache(root).lock(key):
        started.set()
        release.wait(30)


def test_lock_left_by_a_killed_job_is_taken_over(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    started, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(str(tmp_path), "k", started, release))
    holder.start()
    assert started.wait(60)
    holder.kill()
    holder.join()
    assert (tmp_path / "k.lock").exists()  # a kill cannot clean up
    with EvalCache(tmp_path).lock("k"):  # the kernel released the dead job's flock
        pass
    assert not (tmp_path / "k.lock").exists()


# --------------------------------------------------------------------------- logging


def test_log_handlers_do_not_outlive_the_invocation(tmp_path, capsys):
    root = logging.getLogger()
    before = list(root.handlers)
    log_file = tmp_path / "run.log"
    assert (
        main(
            [
                "--log-file",
                str(log_file),
                "export",
                "--model",
                "nowhere/x/y",
                "--removed",
                "1",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert root.handlers == before
    assert "error" in log_file.read_text()
    capsys.readouterr()
    logging.getLogger("depthprune.engine.evaluator").info(
        "after the command"
    )  # once raised "I/O operation on closed file"
    assert "Logging error" not in capsys.readouterr().err


# --------------------------------------------------------------------------- memo concurrency


def _writer(path, journal, worker, n, start):
    memo = SqliteMemo(path, "cfg", {"test": True}, journal=journal)
    start.wait(30)
    for i in range(n):
        memo.put((worker, 100 + i), float(worker * 1000 + i), None, 0.0)
        assert memo.get((worker, 100 + i)) == (float(worker * 1000 + i), None, 0.0)
    memo.close()


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_memo_written_by_several_processes(journal, tmp_path):
    path = tmp_path / "memo.sqlite"
    SqliteMemo(path, "cfg", {"test": True}, journal=journal).close()
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    workers = [ctx.Process(target=_writer, args=(str(path), journal, w, 150, start)) for w in range(4)]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    memo = SqliteMemo(path, "cfg", {"test": True}, journal=journal)
    assert len(memo) == 4 * 150
    assert memo.journal_mode == journal
    assert memo.get((3, 249)) == (3149.0, None, 0.0)


def test_bad_journal_mode_is_named(tmp_path):
    with pytest.raises(ValueError, match="memo_journal"):
        SqliteMemo(tmp_path / "m.sqlite", "cfg", {}, journal="truncate")

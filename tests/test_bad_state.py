"""Broken files left by a crash or a hand: a corrupt memo or lm-eval JSONL line, an export over a file,
a prior with nothing to score. Each is one line naming the file (exit 2), before any model load."""

from __future__ import annotations

import sqlite3

import pytest

from depthprune.cli import main
from depthprune.engine.memo import SqliteMemo, check_memo_file
from depthprune.io import atomic_dir


@pytest.fixture
def no_model_load(monkeypatch):
    """Any model load fails the test: the error must come before it."""
    import depthprune.models.loading as loading

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the input was checked")

    monkeypatch.setattr(loading, "load_model", refuse)


def prior_argv(model, data_dir, tmp_path, *extra):
    argv = ["prior", "--model", str(model), "--calibration", "ppl_c4", "--data-dir", str(data_dir)]
    return argv + ["--n-samples", "4", "--seq-len", "16", "--out", str(tmp_path / "prior.json"), *extra]


def error_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if " ERROR " in line or "Traceback" in line]


def corrupt_sqlite(path):
    """A real memo whose pages are then overwritten: SQLite reports it malformed or not a database."""
    memo = SqliteMemo(path, "key", {"x": 1})
    memo.put((1,), 1.0, None, 0.1)
    memo.close()
    data = bytearray(path.read_bytes())
    data[100 : len(data)] = b"\xa5" * (len(data) - 100)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["garbage", "pages"])
def test_corrupt_memo_is_one_line_naming_it_before_the_model_load(
    damage, tiny_model_dir, data_dir, tmp_path, capsys, no_model_load
):
    memo = tmp_path / "memo.sqlite"
    if damage == "garbage":
        memo.write_bytes(b"not a database, just bytes " * 8)
    else:
        corrupt_sqlite(memo)
    argv = prior_argv(tiny_model_dir, data_dir, tmp_path)
    argv[argv.index("--out") : argv.index("--out")] = ["--memo", str(memo)]
    assert main(argv) == 2
    errors = error_lines(capsys)
    assert len(errors) == 1 and f"{memo}: " in errors[0] and "memo SQLite file" in errors[0], errors
    assert not (tmp_path / "prior.json").exists()


def test_memo_opened_later_still_names_the_file(tmp_path):
    memo = tmp_path / "memo.sqlite"
    memo.write_bytes(b"not a database, just bytes " * 8)
    with pytest.raises(ValueError, match=f"{memo}: not a depthprune memo"):
        SqliteMemo(memo, "key", {"x": 1})


def test_a_good_memo_and_a_missing_one_pass_the_check(tmp_path):
    check_memo_file(None)
    check_memo_file(tmp_path / "absent.sqlite")
    memo = SqliteMemo(tmp_path / "memo.sqlite", "key", {"x": 1})
    memo.put((1,), 1.0, None, 0.1)
    memo.close()
    check_memo_file(tmp_path / "memo.sqlite")
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    with pytest.raises(ValueError, match="without the memo's tables"):
        check_memo_file(other)


def test_corrupt_lm_eval_line_names_file_and_line(tiny_model_dir, data_dir, tmp_path, capsys, no_model_load):
    mirror = tmp_path / "mirror" / "piqa"
    mirror.mkdir(parents=True)
    rows = (data_dir / "piqa" / "validation.jsonl").read_text().splitlines()[:10]
    rows[6] = rows[6][: len(rows[6]) // 2]  # a line cut short (a copy interrupted, a bad edit)
    (mirror / "validation.jsonl").write_text("\n".join(rows) + "\n")
    argv = ["evaluate", "--model", str(tiny_model_dir), "--removed", "1", "--tasks", "piqa", "--limit", "4"]
    argv += ["--data-dir", str(mirror.parent), "--no-eval-cache", "--out-metrics", str(tmp_path / "m.csv")]
    assert main(argv) == 2
    errors = error_lines(capsys)
    assert len(errors) == 1 and f"{mirror / 'validation.jsonl'}:7: not valid JSON" in errors[0], errors
    assert "--data-dir" not in errors[0]
    assert not (tmp_path / "m.csv").exists()


def test_prior_with_every_layer_protected_is_an_error(tiny_model_dir, data_dir, tmp_path, capsys, no_model_load):
    argv = prior_argv(tiny_model_dir, data_dir, tmp_path, "--protected", "0 1 2 3 4 5 6 7")
    assert main(argv) == 2
    errors = error_lines(capsys)
    assert len(errors) == 1 and "protect all 8 layers" in errors[0], errors
    assert not (tmp_path / "prior.json").exists()


def test_folder_replacing_a_file_leaves_no_hidden_backup(tmp_path):
    """`export --overwrite` onto a file: the file's backup is a file, removed like a folder's."""
    target = tmp_path / "export"
    target.write_text("an old file")
    with atomic_dir(target, replace=True) as tmp:
        (tmp / "config.json").write_text("{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    assert (target / "config.json").is_file()

"""Nothing the tool did not create is deleted or replaced (issue 45, findings 1 and 2): a search
workdir is emptied by --recompute only if the search created it, and a model-cache target that is
not a conversion of ours is refused, not replaced."""

from __future__ import annotations

import json

import pytest

from depthprune.cli import main
from depthprune.search.runner import WORKDIR_MARKER, claim_workdir, clear_workdir

SMALL = ["--n-samples", "4", "--seq-len", "32", "--seed", "0"]


def user_files(folder):
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "src").mkdir()
    (folder / "src" / "main.py").write_text("print('hello')\n")


def assert_user_files_kept(folder):
    assert (folder / "notes.txt").read_text() == "my notes\n"
    assert (folder / "src" / "main.py").read_text() == "print('hello')\n"


@pytest.fixture(scope="module")
def prior_path(tiny_model_dir, data_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("prior") / "prior.json"
    assert main(["prior", *search_model_args(tiny_model_dir, data_dir), "--out", str(path)]) == 0
    return path


def search_model_args(model_dir, data_dir):
    return ["--model", str(model_dir), "--calibration", "ppl_c4", "--data-dir", str(data_dir), *SMALL]


def search_args(model_dir, data_dir, prior, workdir, out):
    return [
        "search",
        *search_model_args(model_dir, data_dir),
        "--algorithm",
        "bo",
        "--param",
        "n_trials=3",
        "--budget",
        "2",
        "--prior",
        str(prior),
        "--workdir",
        str(workdir),
        "--out-selection",
        str(out / "selection.json"),
        "--out-trace",
        str(out / "trace.csv"),
    ]


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_recompute_refuses_to_empty_a_folder_it_did_not_create(
    how, tiny_model_dir, data_dir, prior_path, tmp_path, monkeypatch, capsys
):
    project = tmp_path / "proj"
    project.mkdir()
    user_files(project)
    monkeypatch.chdir(project)
    args = search_args(tiny_model_dir, data_dir, prior_path, ".", tmp_path / "out")
    if how == "flag":
        args.insert(1, "--recompute")
    else:
        monkeypatch.setenv("DEPTHPRUNE_RECOMPUTE", "1")  # as the README tells cluster users
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--workdir .: --recompute would empty this folder" in err and WORKDIR_MARKER in err
    assert_user_files_kept(project)
    assert not (tmp_path / "out" / "selection.json").exists()
    assert not (project / WORKDIR_MARKER).exists()  # a plain run must not mark it either (it never did)
    assert not (project / "search.lock").exists()  # nor leave its lock in the user's folder


def test_search_marks_its_workdir_and_recompute_empties_it(tiny_model_dir, data_dir, prior_path, tmp_path):
    workdir = tmp_path / "work"
    args = search_args(tiny_model_dir, data_dir, prior_path, workdir, tmp_path / "out")
    assert main(args) == 0
    assert (workdir / WORKDIR_MARKER).is_file() and (workdir / "bo_study.sqlite3").is_file()
    (workdir / "bo_study.sqlite3-journal").write_text("x")  # a side file SQLite leaves when killed
    assert main([args[0], "--recompute", *args[1:]]) == 0
    assert not (workdir / "bo_study.sqlite3-journal").exists()
    assert json.loads((tmp_path / "out" / "selection.json").read_text())["distinct_evaluations"] == 3


def test_workdir_of_an_earlier_version_is_still_ours(tmp_path):
    """Workdirs made before the marker hold only the lock and the BO study: still emptied, then marked."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    for name in ("search.lock", "bo_study.sqlite3", "bo_study.sqlite3.lock"):
        (workdir / name).write_text("")
    clear_workdir(workdir)
    assert [p.name for p in workdir.iterdir()] == ["search.lock"]
    claim_workdir(workdir)
    assert (workdir / WORKDIR_MARKER).is_file()


def test_claim_leaves_a_folder_with_other_files_unmarked(tmp_path):
    user_files(tmp_path)
    claim_workdir(tmp_path)
    assert not (tmp_path / WORKDIR_MARKER).exists()
    with pytest.raises(ValueError, match="not created by `depthprune search`"):
        clear_workdir(tmp_path)
    assert_user_files_kept(tmp_path)


def test_prepare_model_refuses_to_replace_a_user_folder(tmp_path, capsys):
    """`prepare-model --model gguf:/m/mymodel.gguf --model-cache-dir /m` with a folder of the name the
    conversion would take (/m/mymodel-<sha256 prefix>/)."""
    from depthprune.models.loading import gguf_target

    (tmp_path / "mymodel.gguf").write_bytes(b"GGUF not really")
    user_folder = gguf_target(tmp_path / "mymodel.gguf", tmp_path)
    user_folder.mkdir()
    user_files(user_folder)
    status = main(["prepare-model", "--model", f"gguf:{tmp_path / 'mymodel.gguf'}", "--model-cache-dir", str(tmp_path)])
    assert status == 2
    err = capsys.readouterr().err
    assert f"model cache {user_folder}: exists and is not a model converted by depthprune" in err
    assert_user_files_kept(user_folder)

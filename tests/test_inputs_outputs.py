"""Nothing the user made is lost (issue 55): a folder the tool replaces or empties holds only what it
wrote, and no command writes an output over one of its inputs or over another of its outputs."""

from __future__ import annotations

import json
import shutil

import pytest

from depthprune.cli import main
from depthprune.errors import InputError
from depthprune.io import OwnedFolder, atomic_dir, check_inputs_outputs
from depthprune.search.runner import WORKDIR_MARKER, claim_workdir

SMALL = ["--n-samples", "4", "--seq-len", "16", "--seed", "0"]


@pytest.fixture
def no_model_load(monkeypatch):
    """Any model load fails the test: the refusal must come before it."""
    import depthprune.models.loading as loading

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the command line was checked")

    monkeypatch.setattr(loading, "load_model", refuse)


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if " ERROR " in line]
    assert len(lines) == 1, err
    return lines[0]


def model_args(model_dir, data_dir):
    return ["--model", str(model_dir), "--calibration", "ppl_c4", "--data-dir", str(data_dir), *SMALL]


@pytest.fixture(scope="module")
def prior_path(tiny_model_dir, data_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("prior") / "prior.json"
    assert main(["prior", *model_args(tiny_model_dir, data_dir), "--out", str(path)]) == 0
    return path


# ------------------------------------------------------------------ data loss: folders the tool owns


def test_recompute_keeps_a_file_the_user_put_into_a_search_workdir(
    tiny_model_dir, data_dir, prior_path, tmp_path, capsys, no_model_load
):
    """`search --recompute --workdir d`, d made and marked by an earlier search, a file added since."""
    workdir = tmp_path / "work"
    claim_workdir(workdir)  # what the earlier search left: its marker and its study
    (workdir / "bo_study.sqlite3").write_bytes(b"the earlier search's study")
    (workdir / "notes.txt").write_text("my notes\n")
    argv = [
        "search",
        "--recompute",
        *model_args(tiny_model_dir, data_dir),
        *("--algorithm", "bo", "--budget", "2", "--prior", str(prior_path), "--workdir", str(workdir)),
        *("--out-selection", str(tmp_path / "selection.json"), "--out-trace", str(tmp_path / "trace.csv")),
    ]
    assert main(argv) == 2
    error = error_line(capsys)
    assert f"--workdir {workdir}: --recompute would empty this folder" in error and "notes.txt" in error, error
    assert (workdir / "notes.txt").read_text() == "my notes\n"
    assert (workdir / "bo_study.sqlite3").read_bytes() == b"the earlier search's study"  # nothing deleted
    assert (workdir / WORKDIR_MARKER).is_file() and not (tmp_path / "selection.json").exists()


def test_reexport_keeps_a_file_the_user_added_to_an_export(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "pruned"
    assert main(["export", "--model", str(tiny_model_dir), "--removed", "3", "--out", str(out)]) == 0
    manifest = json.loads((out / "depthprune.json").read_text())
    assert "config.json" in manifest["files"] and "depthprune.json" not in manifest["files"]
    assert sorted(manifest["files"]) == sorted(p.name for p in out.iterdir() if p.name != "depthprune.json")
    (out / "notes.txt").write_text("my notes\n")
    capsys.readouterr()
    assert main(["export", "--model", str(tiny_model_dir), "--removed", "2 3", "--out", str(out)]) == 2
    error = error_line(capsys)
    assert f"--out {out}: export would replace this folder" in error and "notes.txt" in error, error
    assert (out / "notes.txt").read_text() == "my notes\n"
    assert json.loads((out / "depthprune.json").read_text())["removed_layers"] == [3]  # the old export kept
    (out / "notes.txt").unlink()  # once only export's files are left, re-exporting replaces them
    assert main(["export", "--model", str(tiny_model_dir), "--removed", "2 3", "--out", str(out)]) == 0
    assert json.loads((out / "depthprune.json").read_text())["removed_layers"] == [2, 3]


def test_an_export_without_a_file_list_is_not_replaced_without_overwrite(tmp_path):
    """An export written before depthprune.json listed its files: its files cannot be told from a user's."""
    from depthprune.models.pruning import check_export_target

    out = tmp_path / "old-export"
    out.mkdir()
    (out / "depthprune.json").write_text(json.dumps({"removed_layers": [3]}))
    (out / "config.json").write_text("{}")
    with pytest.raises(ValueError, match=r"depthprune.json records no file contents .*: config.json; .*--overwrite"):
        check_export_target(out)
    assert check_export_target(out, overwrite=True) == out
    assert (out / "config.json").is_file()


def test_a_file_added_while_exporting_keeps_the_old_folder(tmp_path):
    """The check runs again just before the swap (atomic_dir's before_replace)."""
    owned = OwnedFolder(marker="made-by-us", command="`test`", manifest=True)
    target = tmp_path / "out"
    target.mkdir()
    (target / "weights").write_text("old")
    owned.write_manifest(target)

    def only_ours(path):
        owned.check_only_ours(path, "--out", "replacing")

    with (
        pytest.raises(
            ValueError, match=r"holds files `test` did not write, or whose contents changed since: notes\.txt"
        ),
        atomic_dir(target, replace=True, before_replace=only_ours) as tmp,
    ):
        (tmp / "weights").write_text("new")
        (target / "notes.txt").write_text("mine")
    assert (target / "weights").read_text() == "old" and (target / "notes.txt").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # the new folder is dropped


def test_emptying_an_owned_folder_deletes_only_its_own_entries(tmp_path):
    import re

    owned = OwnedFolder(marker="mark", command="`test`", reserved=re.compile(r"lock|study\.sqlite3(-wal)?"))
    (tmp_path / "mark").write_text("")
    for name in ("study.sqlite3", "study.sqlite3-wal", "lock"):
        (tmp_path / name).write_text("")
    owned.empty(tmp_path, "--workdir", "emptying", keep=["lock"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lock", "mark"]
    (tmp_path / "study.sqlite3").write_text("")
    (tmp_path / "src").mkdir()
    with pytest.raises(ValueError, match=r"--workdir .*: emptying, but it holds files `test` did not write: src/"):
        owned.empty(tmp_path, "--workdir", "emptying")
    assert (tmp_path / "study.sqlite3").exists() and (tmp_path / "src").is_dir()


# ------------------------------------------------------------------ inputs are never outputs


def test_prior_refuses_to_write_over_its_memo(tiny_model_dir, data_dir, tmp_path, capsys, no_model_load):
    from depthprune.engine.memo import SqliteMemo

    memo = tmp_path / "m.sqlite"
    SqliteMemo(memo, "key", {"x": 1}).close()
    before = memo.read_bytes()
    argv = ["prior", *model_args(tiny_model_dir, data_dir), "--memo", str(memo), "--out", str(memo)]
    assert main(argv) == 2
    error = error_line(capsys)
    assert f"--out {memo} is the same path as --memo {memo}" in error, error
    assert memo.read_bytes() == before


def test_search_refuses_one_path_for_both_outputs(tmp_path, capsys):
    """Checked first: not even the workdir is made (the prior need not exist)."""
    out = tmp_path / "result"
    argv = [
        "search",
        *("--model", "tiny:llama-8", "--calibration", "ppl_c4", "--algorithm", "greedy", "--budget", "2"),
        *("--prior", str(tmp_path / "prior.json"), "--workdir", str(tmp_path / "work")),
        *("--out-selection", str(out), "--out-trace", str(out)),
    ]
    assert main(argv) == 2
    error = error_line(capsys)
    assert f"--out-selection {out} is the same path as --out-trace {out}" in error, error
    assert not (tmp_path / "work").exists() and not out.exists()


def copy_of(folder, where):
    shutil.copytree(folder, where, ignore=shutil.ignore_patterns(".depthprune-fingerprint.json"))
    return where


@pytest.mark.parametrize(
    "case",
    ["evaluate", "export", "prepare-model", "aggregate", "render", "results-page", "plan", "prior-items"],
)
def test_every_command_refuses_an_output_over_an_input(case, tmp_path, capsys, no_model_load):
    """One input-over-output case per command; the input is left byte for byte as it was."""
    given = tmp_path / "input.json"
    given.write_text('{"removed": [3]}\n')
    inputs = {
        "evaluate": (
            ["evaluate", "--model", "tiny:llama-8", "--selection", str(given), "--out-metrics", str(given)],
            "--out-metrics",
            "--selection",
        ),
        "export": (
            ["export", "--model", str(tmp_path), "--removed", "3", "--out", str(tmp_path / "pruned")],
            "--out",
            "--model",
        ),
        "prepare-model": (["prepare-model", "--model", f"gguf:{given}", "--out", str(given)], "--out", "--model"),
        "aggregate": (
            [
                "aggregate",
                "--selections",
                str(given),
                "--base-aggregate",
                str(tmp_path / "base"),
                "--base-calibrations",
                "ppl_c4",
                "--out",
                str(tmp_path / "base"),
            ],
            "--out",
            "--base-aggregate",
        ),
        "render": (["render", "--aggregate", str(tmp_path), "--out", str(tmp_path)], "--out", "--aggregate"),
        "results-page": (
            ["results-page", "--repo", str(tmp_path), "--studies", "figs", "--out", str(tmp_path / "figs" / "page.md")],
            "--out",
            "--studies",
        ),
        "plan": (
            ["plan", "--base", str(given), "--throughput", "100", "--write-profile", str(given)],
            "--write-profile",
            "--base",
        ),
        "prior-items": (
            [
                "prior",
                "--model",
                "tiny:llama-8",
                "--calibration",
                "tlm_cs170k",
                "--items-from",
                str(given),
                "--out",
                str(given),
            ],
            "--out",
            "--items-from",
        ),
    }
    argv, output_option, input_option = inputs[case]
    assert main(argv) == 2
    error = error_line(capsys)
    assert f"{output_option} " in error and f" {input_option} " in error and "must not overwrite an input" in error
    assert given.read_text() == '{"removed": [3]}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input.json"]  # nothing written


def test_paths_are_compared_resolved(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "data")
    with pytest.raises(ValueError, match=r"--out link/prior.json lies inside --data-dir \./data/ "):
        check_inputs_outputs({"--data-dir": "./data/"}, {"--out": "link/prior.json"})
    with pytest.raises(ValueError, match=r"--out \. contains --model data"):
        check_inputs_outputs({"--model": "data"}, {"--out": "."})
    with pytest.raises(ValueError, match=r"--out-selection link contains --out-trace data/x"):
        check_inputs_outputs({}, {"--out-selection": "link", "--out-trace": "data/x"})
    check_inputs_outputs(
        {"--results": "data", "--memo": None}, {"--out": "data/agg"}, outputs_may_lie_inside=["--results"]
    )
    check_inputs_outputs({"--prior": "data/prior.json"}, {"--out-selection": "data/selection.json"})  # siblings


# ------------------------------------------------------------------ a memo that is not one; a selection for another model


def test_a_memo_that_is_a_users_text_file_is_not_called_deletable(
    tiny_model_dir, data_dir, tmp_path, capsys, no_model_load
):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not a memo\n")
    argv = ["prior", *model_args(tiny_model_dir, data_dir), "--memo", str(notes), "--out", str(tmp_path / "p.json")]
    assert main(argv) == 2
    error = error_line(capsys)
    assert f"{notes}: not a depthprune memo" in error and "pass another path" in error, error
    assert "delete" not in error
    assert notes.read_text() == "my notes, not a memo\n"


def test_export_warns_about_a_selection_made_for_another_model(tiny_model_dir, tmp_path, caplog):
    """As evaluate does (cli_common.read_selection): the selection names the model it was made on."""
    selection = tmp_path / "selection.json"
    selection.write_text(json.dumps({"model": "tiny-qwen3-8", "removed": [3], "n_layers": 8}))
    out = tmp_path / "pruned"
    with caplog.at_level("WARNING"):
        assert main(["export", "--model", str(tiny_model_dir), "--selection", str(selection), "--out", str(out)]) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert f"{selection} was selected on model 'tiny-qwen3-8'; exporting it from 'tiny-llama-8'" in warnings, warnings


def test_evaluate_and_export_read_a_selection_with_one_check(tmp_path, caplog):
    from depthprune.cli_common import read_selection

    selection = tmp_path / "selection.json"
    selection.write_text(json.dumps({"model": "tiny-llama-8", "removed": [3]}))
    with caplog.at_level("WARNING"):
        assert read_selection(selection, "tiny-llama-8")["removed"] == [3]
        assert not caplog.records
        read_selection(selection, "tiny-qwen3-8")
    assert (
        caplog.records[0].getMessage()
        == f"{selection} was selected on model 'tiny-llama-8'; evaluating it on 'tiny-qwen3-8'"
    )
    selection.write_text(json.dumps(["not", "a", "selection"]))
    with pytest.raises(InputError, match="must hold a JSON object"):
        read_selection(selection, "tiny-llama-8")
    selection.write_text(json.dumps({"model": "tiny-llama-8"}))
    with pytest.raises(InputError, match="lacks removed"):
        read_selection(selection, "tiny-llama-8")

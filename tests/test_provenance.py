"""`depthprune aggregate` refuses inputs of mixed provenance (dtype, scoring version, torch) and names
the files; selections.csv carries the dtype; render still reads an aggregate without that column."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from depthprune.cli import main
from test_reporting_pipeline import write_tree

PROVENANCE = {"dtype": "float32", "scoring_version": 3, "versions": {"torch": "2.13.0"}}


def study(tmp_path):
    """alpha/ppl_c4/M2 with every algorithm, each selection.json recording one provenance."""
    results = write_tree(tmp_path / "results", [("alpha", "ppl_c4", 2)], dense=False)
    selections = sorted(results.rglob("selection.json"))
    for path in selections:
        path.write_text(json.dumps({**json.loads(path.read_text()), **PROVENANCE}))
    return results, selections


def edit(path, **changes):
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def aggregate(results, out) -> int:
    return main(["aggregate", "--results", str(results), "--out", str(out)])


def error_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if " ERROR " in line]


def test_one_provenance_aggregates_with_a_dtype_column(tmp_path):
    results, selections = study(tmp_path)
    assert aggregate(results, tmp_path / "agg") == 0
    table = pd.read_csv(tmp_path / "agg" / "selections.csv")
    assert list(table.columns[table.columns.get_loc("seed") :][:2]) == ["seed", "dtype"]
    assert (table["dtype"] == "float32").all() and len(table) == len(selections)


@pytest.mark.parametrize(
    ("changes", "shown"),
    [
        ({"dtype": "bfloat16"}, "dtype=bfloat16"),
        ({"scoring_version": 2}, "scoring_version=2"),
        ({"versions": {"torch": "2.12.0"}}, "torch=2.12.0"),
        ({"scoring_version": None}, "scoring_version=not recorded"),
    ],
)
def test_mixed_selections_are_refused_naming_the_files(tmp_path, capsys, changes, shown):
    results, selections = study(tmp_path)
    edit(selections[0], **changes)
    assert aggregate(results, tmp_path / "agg") == 2
    errors = error_lines(capsys)
    assert len(errors) == 1 and "mixed provenance" in errors[0], errors
    assert f"{shown} in 1 file(s): {selections[0]}" in errors[0]
    assert not (tmp_path / "agg").exists()


def test_an_evaluation_of_other_provenance_is_refused(tmp_path, capsys):
    results, selections = study(tmp_path)
    key = {"model": {"dtype": "float32", "scoring_version": 3}, "versions": {"torch": "2.13.0"}}
    raws = [path.with_name("lm_eval.json") for path in selections]
    for raw in raws:
        raw.write_text(json.dumps({"results": {}, "depthprune": {"dtype": "float32", "key": key}}))
    assert aggregate(results, tmp_path / "same") == 0
    stale = {"model": {"dtype": "float32", "scoring_version": 2}, "versions": {"torch": "2.13.0"}}
    raws[1].write_text(json.dumps({"results": {}, "depthprune": {"dtype": "float32", "key": stale}}))
    assert aggregate(results, tmp_path / "mixed") == 2
    errors = error_lines(capsys)
    assert len(errors) == 1 and f"scoring_version=2 in 1 file(s): {raws[1]}" in errors[0], errors


def test_render_reads_an_aggregate_without_the_dtype_column(tmp_path):
    """Aggregates committed before the column (results/**/aggregate/) still render."""
    results, _ = study(tmp_path)
    assert aggregate(results, tmp_path / "agg") == 0
    for suffix in (".csv", ".parquet"):
        path = tmp_path / "agg" / f"selections{suffix}"
        frame = pd.read_parquet(path) if suffix == ".parquet" else pd.read_csv(path)
        frame = frame.drop(columns="dtype")
        frame.to_parquet(path, index=False) if suffix == ".parquet" else frame.to_csv(path, index=False)
    out = tmp_path / "figures"
    assert main(["render", "--aggregate", str(tmp_path / "agg"), "--out", str(out), "--only", "table3,table4"]) == 0
    assert (out / "tables" / "table4.csv").is_file()


def folder_bytes(folder) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_a_refused_aggregate_leaves_the_previous_one_intact(tmp_path):
    """Issue 55: the mixed inputs are refused before anything is written; the last aggregate stays."""
    results, selections = study(tmp_path)
    out = tmp_path / "agg"
    assert aggregate(results, out) == 0
    (out / "notes.txt").write_text("the user's\n")  # a file the tool did not write: never touched
    before = folder_bytes(out)
    edit(selections[0], dtype="bfloat16")
    assert aggregate(results, out) == 2
    assert folder_bytes(out) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging folder left


def test_a_failure_while_writing_leaves_the_previous_aggregate_intact(tmp_path, monkeypatch):
    """The tables are written apart and moved in only when every file is complete: a failure after
    some of them were written leaves the previous aggregate whole, not half old and half new."""
    import depthprune.reporting.aggregate as aggregate_module

    results, selections = study(tmp_path)
    out = tmp_path / "agg"
    assert aggregate(results, out) == 0
    before = folder_bytes(out)
    for path in selections:  # another, consistent study: every table would change
        edit(path, dtype="bfloat16")

    def disk_full(samples, out_dir):
        raise OSError(28, "No space left on device", str(out_dir))

    monkeypatch.setattr(aggregate_module, "write_samples", disk_full)
    assert aggregate(results, out) != 0
    assert folder_bytes(out) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    monkeypatch.undo()
    assert aggregate(results, out) == 0  # without the failure, the new tables replace the old ones
    after = folder_bytes(out)
    assert set(after) == set(before) and after["selections.csv"] != before["selections.csv"]

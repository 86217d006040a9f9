"""Issue 70's probes, one test each: a user's file is never lost, a result is never silently wrong,
and a refusal names the option and the fix (one error line, exit 2, nothing written).

The data-loss tests assert that the user's file survives; every other test that nothing was written."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
from pathlib import Path

import pytest

from depthprune.cli import main
from depthprune.errors import InputError

REPO = Path(__file__).resolve().parents[1]


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if " ERROR " in line or ": error: " in line]
    assert len(lines) == 1, err
    return lines[0]


# ------------------------------------------------------------------ data lost (each exited 0 before)


def test_an_edited_export_manifest_deletes_no_user_file(tiny_model_dir, tmp_path, capsys):
    """depthprune.json edited to list a user's file: a second export must not delete it. The
    manifest records each file's SHA-256; a name alone (or a wrong digest) proves nothing."""
    out = tmp_path / "pruned"
    assert main(["export", "--model", str(tiny_model_dir), "--removed", "3", "--out", str(out)]) == 0
    manifest = json.loads((out / "depthprune.json").read_text())
    assert all(re.fullmatch(r"[0-9a-f]{64}", digest) for digest in manifest["files"].values()), manifest
    (out / "notes.txt").write_text("my notes\n")
    for listed in ({**manifest["files"], "notes.txt": "0" * 64}, [*manifest["files"], "notes.txt"]):
        (out / "depthprune.json").write_text(json.dumps({**manifest, "files": listed}))
        capsys.readouterr()
        assert main(["export", "--model", str(tiny_model_dir), "--removed", "2 3", "--out", str(out)]) == 2
        error = error_line(capsys)
        assert f"--out {out}: export would replace this folder" in error and "notes.txt" in error, error
        assert (out / "notes.txt").read_text() == "my notes\n"


def test_a_changed_file_of_an_export_is_not_its_own(tiny_model_dir, tmp_path, capsys):
    """A file export wrote, then edited by the user (same name, other content), is the user's now."""
    out = tmp_path / "pruned"
    assert main(["export", "--model", str(tiny_model_dir), "--removed", "3", "--out", str(out)]) == 0
    config = out / "config.json"
    config.write_text(config.read_text().replace("{", '{\n  "my_note": "edited",', 1))
    capsys.readouterr()
    assert main(["export", "--model", str(tiny_model_dir), "--removed", "2 3", "--out", str(out)]) == 2
    error = error_line(capsys)
    assert "contents changed since: config.json" in error, error
    assert '"my_note": "edited"' in config.read_text()


@pytest.mark.parametrize("files", [["notes.txt"], {"notes.txt": "0" * 64}])
def test_a_hand_written_manifest_does_not_make_a_user_folder_an_export(tmp_path, files):
    from depthprune.models.pruning import check_export_target

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "depthprune.json").write_text(json.dumps({"removed_layers": [], "files": files}))
    with pytest.raises(InputError, match=r"export would replace this folder, but .*notes\.txt"):
        check_export_target(folder)
    assert (folder / "notes.txt").read_text() == "my notes\n"


def test_recompute_keeps_a_user_folder_named_like_a_search_file(tmp_path):
    """A folder named like SQLite's side file (bo_study.sqlite3-journal/) inside a search workdir is
    not the search's: --recompute refuses and deletes nothing."""
    from depthprune.search.runner import WORKDIR_MARKER, claim_workdir, clear_workdir

    workdir = tmp_path / "work"
    claim_workdir(workdir)
    (workdir / "bo_study.sqlite3").write_bytes(b"the study")
    inside = workdir / "bo_study.sqlite3-journal"
    inside.mkdir()
    (inside / "data.csv").write_text("mine\n")
    with pytest.raises(InputError, match=r"--recompute would empty this folder, .*bo_study\.sqlite3-journal/"):
        clear_workdir(workdir)
    assert (inside / "data.csv").read_text() == "mine\n"
    assert (workdir / "bo_study.sqlite3").read_bytes() == b"the study" and (workdir / WORKDIR_MARKER).is_file()


def test_recompute_never_follows_a_link_named_like_a_search_file(tmp_path):
    from depthprune.search.runner import claim_workdir, clear_workdir

    workdir = tmp_path / "work"
    claim_workdir(workdir)
    target = tmp_path / "precious.sqlite3"
    target.write_bytes(b"mine")
    (workdir / "bo_study.sqlite3").symlink_to(target)
    with pytest.raises(InputError, match=r"bo_study\.sqlite3"):
        clear_workdir(workdir)
    assert (workdir / "bo_study.sqlite3").is_symlink() and target.read_bytes() == b"mine"


def test_results_page_does_not_replace_a_device_or_a_pipe(tmp_path, capsys):
    """`results-page --out /dev/full` replaced the device with a regular file (as root). A named
    pipe stands in for it here: any output that is neither a file nor a folder is refused."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    assert main(["results-page", "--repo", str(REPO), "--studies", "figures", "--out", str(pipe)]) == 2
    error = error_line(capsys)
    assert f"--out {pipe}: exists and is a named pipe, not a file or a folder" in error, error
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)


def test_no_atomic_write_replaces_what_is_not_a_regular_file(tmp_path):
    from depthprune.io import atomic_write_text

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(InputError, match="exists and is a named pipe, not a regular file"):
        atomic_write_text(pipe, "text")
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
    (tmp_path / "folder").mkdir()
    with pytest.raises(InputError, match="exists and is a folder"):
        atomic_write_text(tmp_path / "folder", "text")


# ------------------------------------------------------------------ silently wrong (each exited 0 before)


def selection(**fields) -> dict:
    return {"model": "tiny", "calibration": "ppl_c4", "budget": 2, "algorithm": "beam", "seed": 0,
            "removed": [1, 2], "n_layers": 8, "loss": 3.5, **fields}  # fmt: skip


def test_source_selection_does_not_overwrite_its_input(tmp_path, capsys, monkeypatch):
    source = tmp_path / "x.json"
    source.write_text(json.dumps(selection()))
    before = source.read_bytes()
    monkeypatch.chdir(tmp_path)
    argv = ["source-selection", "--from", "x.json", "--model-name", "tiny", "--calibration", "ppl_c4"]
    argv += ["--algorithm", "beam", "--seed", "0", "--budget", "2", "--out", "./x.json"]
    assert main(argv) == 2
    assert "--out ./x.json is the same path as --from x.json" in error_line(capsys)
    assert source.read_bytes() == before


def test_random_sets_refuses_one_path_for_two_draws(tmp_path, capsys):
    out = str(tmp_path / "d.json")
    argv = ["random-sets", "--model-name", "tiny", "--n-layers", "8", "--budget", "3", "--count", "2"]
    argv += ["--draw-seed", "1", "--seed", "0", "--out", out, "--out", out]
    assert main(argv) == 2
    assert "one output would overwrite the other" in error_line(capsys)
    assert not Path(out).exists()


@pytest.mark.parametrize(("loss", "why"), [(math.nan, "NaN"), (math.inf, "Infinity"), (None, "missing or null")])
def test_a_selection_with_a_non_finite_loss_does_not_enter_the_aggregate(tmp_path, capsys, loss, why):
    path = tmp_path / "selection.json"
    path.write_text(json.dumps(selection(loss=loss)))  # json writes NaN and Infinity for those floats
    assert why in path.read_text() or loss is None
    out = tmp_path / "aggregate"
    assert main(["aggregate", "--selections", str(path), "--metrics", "--out", str(out)]) == 2
    error = error_line(capsys)
    assert f"{path}: selection.json 'loss'" in error and ("finite number" in error or "null" in error), error
    assert not out.exists()
    # the random-set control and the dense model record no loss: null stays allowed there
    from depthprune.results_schema import read_selection_json

    path.write_text(json.dumps(selection(loss=None, algorithm="random_set_00", calibration="none")))
    assert read_selection_json(path)["loss"] is None


@pytest.mark.parametrize("value", [math.inf, math.nan])
def test_render_refuses_summary_twins_with_a_non_finite_loss(tmp_path, capsys, value):
    import pandas as pd

    from depthprune.io import atomic_write_csv, atomic_write_parquet

    aggregate = tmp_path / "aggregate"
    shutil.copytree(REPO / "results" / "protect_none" / "aggregate", aggregate)
    summary = pd.read_parquet(aggregate / "summary.parquet")
    row = int((summary["algorithm"] != "dense").to_numpy().nonzero()[0][0])
    summary.loc[row, "loss"] = value
    atomic_write_parquet(aggregate / "summary.parquet", summary)  # both twins, as write_aggregate writes them
    atomic_write_csv(aggregate / "summary.csv", summary)
    out = tmp_path / "figures"
    assert main(["render", "--aggregate", str(aggregate), "--out", str(out), "--only", "table1"]) == 2
    error = error_line(capsys)
    assert f"summary.parquet: row {row}: loss is {value}" in error and "finite number" in error, error
    assert not out.exists()


def test_infinite_values_are_refused_where_results_are_read(tmp_path):
    from depthprune.evaluation.benchmarks import METRICS_COLUMNS
    from depthprune.results_schema import RUN_METRICS, check_csv

    path = tmp_path / "metrics.csv"
    path.write_text(",".join(METRICS_COLUMNS) + "\ntiny,ppl_c4,2,beam,1 2,arc_easy,acc,inf,,,true\n")
    with pytest.raises(InputError, match=r"line 2: value is 'inf', not a finite number"):
        check_csv(path, RUN_METRICS)


# ------------------------------------------------------------------ misleading errors: one line, option and fix


def test_random_sets_refuses_no_draws_and_blocks_outside_the_model(tmp_path, capsys):
    base = ["random-sets", "--model-name", "tiny", "--n-layers", "8", "--budget", "3", "--draw-seed", "1"]
    assert main([*base, "--seed", "0", "--count", "0", "--out", str(tmp_path / "a.json")]) == 2
    assert "--count 0: draw at least one set" in error_line(capsys)
    argv = [*base, "--seed", "0", "--count", "1", "--protected", "0 99", "--out", str(tmp_path / "a.json")]
    assert main(argv) == 2
    assert "--protected '0 99': block(s) 99 outside the model's 8 blocks" in error_line(capsys)
    assert not any(tmp_path.iterdir())


def test_source_selection_on_another_csv_names_the_files_it_reads(tmp_path, capsys):
    table = tmp_path / "summary.csv"
    table.write_text("model,removed\ntiny,1 2\n")
    argv = ["source-selection", "--from", str(table), "--model-name", "tiny", "--calibration", "ppl_c4"]
    argv += ["--algorithm", "beam", "--seed", "0", "--budget", "2", "--out", str(tmp_path / "s.json")]
    assert main(argv) == 2
    error = error_line(capsys)
    assert "neither a selection.json nor an aggregate's selections.csv" in error and "not valid JSON" not in error
    assert not (tmp_path / "s.json").exists()


def test_cbo_diagnose_refuses_its_memo_as_its_out(tiny_model_dir, data_dir, tmp_path, capsys):
    memo = tmp_path / "m"
    memo.write_bytes(b"")
    argv = ["cbo-diagnose", "--model", str(tiny_model_dir), "--calibration", "ppl_c4", "--data-dir", str(data_dir)]
    argv += ["--memo", str(memo), "--out", str(memo)]
    assert main(argv) == 2
    error = error_line(capsys)
    assert f"--out {memo} is the same path as --memo" in error and "File exists" not in error, error


def test_results_page_refuses_a_study_given_twice(tmp_path, capsys):
    out = tmp_path / "page.md"
    argv = ["results-page", "--repo", str(REPO), "--studies", "figures", "figures/protect_none", "figures/"]
    assert main([*argv, "--out", str(out)]) == 2
    assert "--studies: figures given more than once" in error_line(capsys)
    assert not out.exists()


def test_render_only_naming_nothing_is_refused(tmp_path, capsys):
    out = tmp_path / "figures"
    assert main(["render", "--aggregate", str(REPO / "results/aggregate"), "--out", str(out), "--only", ","]) == 2
    assert "--only ',': names no output; leave --only out to render everything" in error_line(capsys)
    assert not out.exists()


def test_aggregate_refuses_a_carried_aggregate_as_the_perplexity_source(tmp_path):
    """The rescore study's own aggregate as --perplexity-from said 'ran in nan'."""
    from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS
    from depthprune.reporting.aggregate import Aggregate, load_aggregate, load_samples
    from depthprune.reporting.carried_perplexity import carry_perplexity

    own = REPO / "results" / "rescore_informative" / "aggregate"
    agg, samples = load_aggregate(own), load_samples(own)
    scored_here = Aggregate(
        selections=agg.selections,
        metrics=agg.metrics[~agg.metrics["benchmark"].isin(PERPLEXITY_BENCHMARKS)],
        summary=agg.summary,
    )
    with pytest.raises(InputError, match=r"is itself a study whose perplexities were carried .*source_study"):
        carry_perplexity(scored_here, samples[~samples["benchmark"].isin(PERPLEXITY_BENCHMARKS)], own)


@pytest.mark.parametrize("command", ["render", "failed-search-sensitivity"])
def test_bootstrap_sizes_that_cannot_fit_memory_are_refused_at_parse_time(tmp_path, capsys, command):
    """1e9 resamples raised numpy's MemoryError after the data was read."""
    argv = [command, "--aggregate", str(REPO / "results/aggregate"), "--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--bootstrap-resamples", str(10**12)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --bootstrap-resamples: the bootstrap needs about" in err and "GiB" in err, err
    assert "use at most" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_the_render_checks_the_bootstrap_against_the_study_s_documents():
    """Past the command line's floor, the estimate with the study's own documents, before allocating."""
    import pandas as pd

    from depthprune.reporting.statistics.bootstrap import document_replicates

    samples = pd.read_parquet(REPO / "results/aggregate/samples.parquet")
    with pytest.raises(InputError, match=r"bootstrap_resamples \d+: the bootstrap needs about .* documents"):
        document_replicates(samples, n_resamples=10**10 // 32)


def test_plan_refuses_a_bootstrap_that_cannot_fit_before_reading_a_model(tmp_path, capsys, data_dir, monkeypatch):
    import depthprune.plan as planning

    monkeypatch.setattr(planning, "model_planning", lambda *a, **k: pytest.fail("a model was read first"))
    argv = ["plan", "--throughput", "10", "--configfile", str(REPO / "config/smoke.yaml"), "--data-dir", str(data_dir)]
    argv += ["--base", str(REPO / "config.yaml"), "--model-cache-dir", str(tmp_path / "models")]
    argv += ["--config", "analysis={bootstrap_resamples: 1000000000000}", f"data_dir={data_dir}"]
    assert main(argv) == 2
    error = error_line(capsys)
    assert "analysis.bootstrap_resamples 1000000000000: the bootstrap needs about" in error, error
    assert not (tmp_path / "models").exists()


def test_plan_checks_the_calibration_data_before_converting_a_model(tmp_path, capsys, data_dir, monkeypatch):
    """A calibration sample the data cannot give was refused only after SmolLM2 was converted (517 MB)."""
    import depthprune.plan as planning

    monkeypatch.setattr(planning, "model_planning", lambda *a, **k: pytest.fail("a model was read first"))
    calibration = "calibration={tlm: {n_samples: 100000, seq_len: 128}, perplexity: {n_samples: 4, seq_len: 32}}"
    argv = ["plan", "--throughput", "10", "--configfile", str(REPO / "config/smoke.yaml"), "--data-dir", str(data_dir)]
    argv += ["--base", str(REPO / "config.yaml"), "--model-cache-dir", str(tmp_path / "models")]
    argv += ["--config", calibration, f"data_dir={data_dir}"]
    assert main(argv) == 2
    assert "config: calibration.tlm (calibration tlm_cs170k): n_samples=100000 exceeds the" in error_line(capsys)
    assert not (tmp_path / "models").exists()

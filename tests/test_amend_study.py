"""Amending a committed study (reporting/amend.py; issue 67): an algorithm relabelled where its name
now means other code, and one more algorithm's runs added to the aggregate, every committed row kept.

The synthetic study is test_cross_control's: seven algorithms under ppl_c4 and tlm_cs170k, per-document
scores built so that every run of a calibration scores alike.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from depthprune.cli import main
from depthprune.reporting.aggregate import aggregate, collect_samples
from depthprune.reporting.amend import (
    ADDED_RUNS_RECORD,
    RELABEL_RECORD,
    add_runs,
    relabel_aggregate,
    relabel_runs,
)
from test_cross_control import ALGORITHMS, build_aggregate, write_run

CALIBRATIONS = ["ppl_c4", "tlm_cs170k"]


@pytest.fixture()
def committed(tmp_path):
    """A committed study whose ``cbo`` rows were made by the code now called ``cbo_taylor``."""
    return build_aggregate(tmp_path / "runs", CALIBRATIONS, tmp_path / "aggregate")


def added_runs(root: Path, algorithm: str = "cbo", calibrations=CALIBRATIONS, dtype: str = "float32") -> Path:
    for calibration in calibrations:
        write_run(root, calibration, algorithm, dtype)
    write_run(root, "none", "dense")
    return root


def frames(folder: Path) -> dict[str, pd.DataFrame]:
    names = ("selections", "metrics", "summary", "samples")
    return {name: pd.read_parquet(folder / f"{name}.parquet") for name in names}


def test_relabelling_an_aggregate_renames_the_algorithm_in_every_table_and_nothing_else(committed, capsys):
    before = frames(committed)
    assert main(["relabel-algorithm", "--from", "cbo", "--to", "cbo_taylor", str(committed)]) == 0
    after = frames(committed)
    for name, frame in before.items():
        renamed = frame.assign(algorithm=frame["algorithm"].replace({"cbo": "cbo_taylor"}))
        keys = [k for k in ("model", "calibration", "budget", "algorithm", "seed") if k in frame]
        expected = renamed.sort_values(keys, kind="stable").reset_index(drop=True)
        pd.testing.assert_frame_equal(after[name], expected, check_like=False)
        assert "cbo" not in set(after[name]["algorithm"]) and "cbo_taylor" in set(after[name]["algorithm"])
    assert json.loads((committed / RELABEL_RECORD).read_text()) == {"cbo": "cbo_taylor"}
    assert "2 cbo runs" in capsys.readouterr().out


def test_relabelling_refuses_a_name_already_there_or_absent(committed):
    with pytest.raises(ValueError, match="already holds greedy runs"):
        relabel_aggregate(committed, "cbo", "greedy")
    with pytest.raises(ValueError, match="holds no cbo_taylor runs"):
        relabel_aggregate(committed, "cbo_taylor", "cbo_x")
    before = (committed / "summary.csv").read_bytes()
    assert main(["relabel-algorithm", "--from", "cbo", "--to", "bo", str(committed)]) == 2
    assert (committed / "summary.csv").read_bytes() == before  # nothing written


def test_relabelling_runs_moves_each_folder_and_renames_only_the_recorded_algorithm(tmp_path):
    root = added_runs(tmp_path / "runs", "cbo")
    run = root / "alpha" / "ppl_c4" / "seed0" / "M2"
    metrics_before = (run / "cbo" / "metrics.csv").read_text()
    samples_before = pd.read_parquet(run / "cbo" / "samples.parquet")
    moved = relabel_runs(root, "cbo", "cbo_taylor")
    assert sorted(p.relative_to(root).as_posix() for p in moved) == [
        "alpha/ppl_c4/seed0/M2/cbo_taylor",
        "alpha/tlm_cs170k/seed0/M2/cbo_taylor",
    ]
    assert not (run / "cbo").exists()
    assert json.loads((run / "cbo_taylor" / "selection.json").read_text())["algorithm"] == "cbo_taylor"
    assert (run / "cbo_taylor" / "metrics.csv").read_text() == metrics_before.replace(",cbo,", ",cbo_taylor,")
    samples = pd.read_parquet(run / "cbo_taylor" / "samples.parquet")
    pd.testing.assert_frame_equal(samples, samples_before.assign(algorithm="cbo_taylor"))
    # the aggregate of the relabelled runs names them by their new name
    agg = aggregate(sorted(root.glob("*/*/seed*/M*/*/selection.json")), sorted(root.glob("**/metrics.csv")))
    assert set(agg.selections["algorithm"]) == {"cbo_taylor"}


def test_relabelling_runs_moves_nothing_when_one_folder_records_another_algorithm(tmp_path):
    root = added_runs(tmp_path / "runs", "cbo")
    odd = root / "alpha" / "tlm_cs170k" / "seed0" / "M2" / "cbo" / "selection.json"
    odd.write_text(json.dumps({**json.loads(odd.read_text()), "algorithm": "bo"}))
    with pytest.raises(ValueError, match="records algorithm 'bo', not 'cbo'"):
        relabel_runs(root, "cbo", "cbo_taylor")
    assert not list(root.glob("**/cbo_taylor"))


def test_added_runs_join_the_study_and_every_committed_row_stays(committed, tmp_path):
    relabel = ["relabel-algorithm", "--from", "cbo", "--to", "cbo_taylor", str(committed)]
    assert main(relabel) == 0
    before = frames(committed)
    added = added_runs(tmp_path / "added")
    assert main(["add-runs", "--aggregate", str(committed), "--results", str(added)]) == 0
    after = frames(committed)
    for name in ("selections", "metrics", "summary", "samples"):
        frame = after[name]
        kept = frame[frame["algorithm"] != "cbo"].reset_index(drop=True)
        pd.testing.assert_frame_equal(
            kept.drop(columns="source", errors="ignore"), before[name].drop(columns="source", errors="ignore")
        )
        dense = set() if name == "selections" else {"dense"}
        assert set(frame["algorithm"]) == set(ALGORITHMS) | {"cbo_taylor"} | dense
    # the dense model's rows are the study's own; the added evaluation of it was only compared
    assert (after["selections"]["algorithm"] == "cbo").sum() == 2
    assert (after["samples"]["algorithm"] == "dense").sum() == (before["samples"]["algorithm"] == "dense").sum()
    # the same aggregate as one built in a single study from every run
    everything = tmp_path / "all"
    for calibration in CALIBRATIONS:
        for algorithm in ALGORITHMS + ["cbo_taylor"]:
            write_run(everything, calibration, algorithm)
    write_run(everything, "none", "dense")
    whole = aggregate(
        sorted(everything.glob("*/*/seed*/M*/*/selection.json")), sorted(everything.glob("**/metrics.csv"))
    )
    pd.testing.assert_frame_equal(after["summary"], whole.summary)
    record = json.loads((committed / ADDED_RUNS_RECORD).read_text())
    assert len(record) == 1 and record[0]["algorithms"] == ["cbo"] and record[0]["runs"] == 2
    assert (record[0]["answers_differ"], record[0]["max_perplexity_rel_diff"]) == (0, 0.0)


def study_and_added(committed: Path, added: Path):
    agg = aggregate(sorted(added.glob("*/*/seed*/M*/*/selection.json")), sorted(added.glob("**/metrics.csv")))
    return agg, collect_samples(sorted(added.glob("**/samples.parquet")), agg.selections)


def test_added_runs_are_refused_where_they_are_not_new_or_not_comparable(committed, tmp_path):
    # cbo is still the committed rows' name: the study holds those runs
    agg, samples = study_and_added(committed, added_runs(tmp_path / "again"))
    with pytest.raises(ValueError, match="the added runs and this study both hold"):
        add_runs(committed, agg, samples)
    # another precision
    agg, samples = study_and_added(committed, added_runs(tmp_path / "bf16", "cbo_fisher", dtype="bfloat16"))
    with pytest.raises(ValueError, match=r"dtype \['bfloat16'\].*\['float32'\]"):
        add_runs(committed, agg, samples)
    # a cell the study does not have
    agg, samples = study_and_added(committed, added_runs(tmp_path / "cell", "cbo_fisher", calibrations=["ppl_cs170k"]))
    with pytest.raises(ValueError, match="the study has no alpha ppl_cs170k seed 0 M=2 runs"):
        add_runs(committed, agg, samples)
    # a dense evaluation that is not the study's
    agg, samples = study_and_added(committed, added_runs(tmp_path / "dense", "cbo_fisher"))
    flipped = samples.copy()
    flipped.loc[(flipped.algorithm == "dense") & (flipped.benchmark == "boolq") & (flipped.unit < 20), "value"] = 0.0
    with pytest.raises(ValueError, match=r"answers 20 of .* documents differently"):
        add_runs(committed, agg, flipped)


def test_add_runs_writes_nothing_on_a_refusal_and_says_why_in_one_line(committed, tmp_path, capsys):
    shutil.copytree(committed, tmp_path / "before")
    added = added_runs(tmp_path / "again")
    assert main(["add-runs", "--aggregate", str(committed), "--results", str(added)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "add-runs: error:" in err[0] and "both hold" in err[0]
    for path in (tmp_path / "before").iterdir():
        assert (committed / path.name).read_bytes() == path.read_bytes(), path.name
    assert not (committed / ADDED_RUNS_RECORD).exists()


REPO = Path(__file__).resolve().parents[1]


def test_every_committed_cbo_row_was_made_by_the_code_its_name_registers():
    """No committed aggregate row carries a name whose code no longer computes it (issue 67): a `cbo`
    row records the registry's `cbo` coefficients (Jansen et al.'s Fisher energy), a `cbo_taylor`
    row the expansion's; `relabel-algorithm` renamed the rows made before the two were told apart."""
    from depthprune.search import ALGORITHMS as SEARCHES

    expected = {name: SEARCHES[name].defaults["coefficients"] for name in ("cbo", "cbo_taylor", "cbo_ablation")}
    assert expected["cbo"] == "fisher" and expected["cbo_taylor"] == "gradient"
    checked = 0
    for path in sorted(REPO.glob("results/*/aggregate/selections.parquet")):
        selections = pd.read_parquet(path)
        for name, coefficients in expected.items():
            rows = selections[selections["algorithm"] == name]
            recorded = sorted({json.loads(text).get("coefficients") for text in rows["hyperparameters"]})
            assert recorded in ([], [coefficients]), f"{path}: {name} rows record coefficients {recorded}"
            checked += len(rows)
    assert checked > 0

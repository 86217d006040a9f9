"""The held-out loss through the aggregate (optional selections/summary column) into Table 4's
calibration-vs-held-out gap; absent everywhere when no selection has it."""

from __future__ import annotations

import json

import pandas as pd

from depthprune.evaluation.benchmarks import METRICS_COLUMNS
from depthprune.reporting.aggregate import HELDOUT_COLUMNS, _selections_frame, build_summary
from depthprune.reporting.analysis.frames import heldout_gap
from depthprune.reporting.tables.paper_tables import table4


def write_selection(path, algorithm, removed, loss, heldout=None):
    record = {
        "model": "m",
        "calibration": "tlm_cs170k",
        "budget": len(removed),
        "algorithm": algorithm,
        "removed": removed,
        "n_layers": 12,
        "loss": loss,
        "seed": 0,
        "search_seconds": 1.0,
        "distinct_evaluations": 3,
    }
    if heldout is not None:
        record["heldout"] = {"loss": heldout, "accuracy": 0.5, "n_samples": 128}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def frames(tmp_path, with_heldout):
    h = (lambda v: v) if with_heldout else (lambda v: None)
    paths = [
        write_selection(tmp_path / "a.json", "one_shot", [1, 2], -1.0, h(-0.5)),
        write_selection(tmp_path / "b.json", "greedy", [3, 4], -2.0, h(-0.2)),  # lower cal., higher held-out
        write_selection(tmp_path / "c.json", "beam", [5, 6], -1.5, h(-0.8)),  # lower both
    ]
    selections = _selections_frame(paths)
    return selections, build_summary(selections, pd.DataFrame(columns=METRICS_COLUMNS))


def test_no_heldout_no_columns(tmp_path):
    selections, summary = frames(tmp_path, with_heldout=False)
    for column in HELDOUT_COLUMNS:
        assert column not in selections.columns and column not in summary.columns
    assert "heldout_gap" not in table4(summary).frame.columns


def test_heldout_gap_and_overfitting_flag(tmp_path):
    selections, summary = frames(tmp_path, with_heldout=True)
    assert list(selections.sort_values("algorithm")["heldout_loss"]) == [-0.8, -0.2, -0.5]
    gap = heldout_gap(summary).set_index("algorithm")
    assert gap.loc["greedy", "heldout_gap"] == 1.8 and gap.loc["beam", "heldout_gap"] == 0.7
    assert gap["overfits"].to_dict() == {"beam": False, "greedy": True, "one_shot": False}
    frame = table4(summary).frame.set_index("algorithm")
    assert bool(frame.loc["greedy", "overfits"]) and frame.loc["one_shot", "heldout_gap"] == 0.5


def test_calibration_tokens_column_only_where_every_selection_records_them(tmp_path):
    import json

    from depthprune.reporting.aggregate import _selections_frame

    def selection(name, removed, tokens):
        doc = {"model": "m", "calibration": "ppl_c4", "budget": 1, "algorithm": name, "removed": removed}
        doc |= {"n_layers": 4, "loss": 1.0, "seed": 0, "dtype": "float32"}
        if tokens is not None:
            doc["calibration_tokens"] = tokens
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        return path

    both = _selections_frame([selection("greedy", [1], 512), selection("one_shot", [2], 512)])
    assert both["calibration_tokens"].tolist() == [512, 512]
    assert list(both.columns).index("calibration_tokens") == list(both.columns).index("dtype") + 1
    older = _selections_frame([selection("greedy", [1], 512), selection("one_shot", [2], None)])
    assert "calibration_tokens" not in older.columns

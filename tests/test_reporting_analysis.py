"""Unit tests of the reporting analyses and table formatting, on small hand-made frames."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from depthprune.reporting.analysis.agreement import agreement_stats, full_overlap, jaccard, pairwise_jaccard
from depthprune.reporting.analysis.correlation import spearman_table
from depthprune.reporting.statistics.bootstrap import two_way
from depthprune.reporting.tables.table_format import (
    Column,
    ReportTable,
    fmt_fraction,
    to_csv_frame,
    to_latex,
    to_markdown,
)


def test_jaccard_known_values():
    assert jaccard({1, 2}, {1, 3}) == pytest.approx(1 / 3)
    assert jaccard({1, 2, 3}, {1, 2, 3}) == 1.0
    assert jaccard({1, 2}, {3, 4}) == 0.0
    assert jaccard(set(), set()) == 1.0


def test_full_overlap_and_agreement_stats():
    # Six algorithms agree on {1, 2, 3}, one picks {1, 2, 4}: 15 pairs at 1.0, 6 pairs at 2/4.
    sets = [{1, 2, 3}] * 6 + [{1, 2, 4}]
    stats = agreement_stats(sets)
    assert stats["n_sets"] == 7 and stats["n_pairs"] == 21
    assert stats["mean_jaccard"] == pytest.approx((15 + 6 * 0.5) / 21)
    assert stats["min_jaccard"] == pytest.approx(0.5)
    assert stats["max_jaccard"] == pytest.approx(1.0)
    assert stats["full_overlap"] == pytest.approx(2 / 4)  # {1,2} of {1,2,3,4}
    assert full_overlap([{0, 1}, {2, 3}]) == 0.0
    assert math.isnan(agreement_stats([{1}])["mean_jaccard"])


def _selections(rows):
    return pd.DataFrame(rows, columns=["model", "calibration", "budget", "algorithm", "removed", "n_layers"])


def test_pairwise_jaccard_relations():
    sel = _selections(
        [
            ("m", "ppl_c4", 2, "greedy", "1 2", 8),
            ("m", "ppl_c4", 2, "beam", "1 3", 8),
            ("m", "tlm_cs170k", 2, "greedy", "1 2", 8),
            ("m", "tlm_cs170k", 2, "beam", "5 6", 8),
            ("m", "none", 0, "dense", "", 8),  # never paired
        ]
    )
    pairs = pairwise_jaccard(sel)
    assert len(pairs) == 6  # C(4, 2); the dense row is left out
    by = {
        (r.relation, r.algorithm_a, r.calibration_a, r.algorithm_b, r.calibration_b): r.jaccard
        for r in pairs.itertuples()
    }
    assert by[("within", "greedy", "ppl_c4", "beam", "ppl_c4")] == pytest.approx(1 / 3)
    assert by[("within", "greedy", "tlm_cs170k", "beam", "tlm_cs170k")] == 0.0
    assert by[("across_same_algorithm", "greedy", "ppl_c4", "greedy", "tlm_cs170k")] == 1.0
    assert by[("across_same_algorithm", "beam", "ppl_c4", "beam", "tlm_cs170k")] == 0.0
    assert sorted(pairs["relation"]) == sorted(["within"] * 2 + ["across_same_algorithm"] * 2 + ["across_other"] * 2)


def _summary(ppl, acc, calibration="ppl_c4"):
    algorithms = ["one_shot", "greedy", "beam", "ga", "bo", "cbo", "fast_block_select"][: len(ppl)]
    return pd.DataFrame(
        {
            "model": "m",
            "budget": 2,
            "calibration": calibration,
            "algorithm": algorithms,
            "avg_perplexity": ppl,
            "avg_accuracy": acc,
        }
    )


def test_spearman_known_values():
    ppl = [10, 20, 30, 40, 50, 60, 70]
    # Accuracy ranks 2,1,4,3,6,5,7: sum d^2 = 6, rho = 1 - 6*6/(7*48) = 1 - 36/336.
    acc = [0.2, 0.1, 0.4, 0.3, 0.6, 0.5, 0.7]
    row = spearman_table(_summary(ppl, acc)).iloc[0]
    assert row["n"] == 7
    assert row["rho"] == pytest.approx(1 - 36 / 336)
    assert 0 < row["p_value"] < 0.05
    assert row["calibration_kind"] == "ppl"
    reverse = spearman_table(_summary(ppl, acc[::-1], "tlm_cs170k")).iloc[0]
    assert reverse["rho"] == pytest.approx(-(1 - 36 / 336))
    assert reverse["calibration_kind"] == "tlm"


def test_spearman_degrades_to_nan():
    few = spearman_table(_summary([1.0, 2.0, np.nan], [0.1, 0.2, 0.3])).iloc[0]
    assert few["n"] == 2 and math.isnan(few["rho"]) and "only 2" in few["note"]
    constant = spearman_table(_summary([1.0, 2.0, 3.0], [0.5, 0.5, 0.5])).iloc[0]
    assert math.isnan(constant["rho"]) and constant["note"] == "constant averages"


def test_two_way_decomposition_known_values():
    # y[a, c] = calibration effect (+-1) + algorithm effect (0.1 q): additive, no interaction.
    q = np.arange(7) - 3
    grid = np.stack([1 + 0.1 * q, 3 + 0.1 * q], axis=1)
    shares = {k: v[0] for k, v in two_way(grid[None]).items()}
    ss_cal, ss_alg = 7 * 2 * 1.0, 2 * 0.01 * 28
    assert shares["ss_total"] == pytest.approx(ss_cal + ss_alg)
    assert shares["share_calibration"] == pytest.approx(ss_cal / (ss_cal + ss_alg))
    assert shares["share_algorithm"] == pytest.approx(ss_alg / (ss_cal + ss_alg))
    assert shares["share_interaction"] == pytest.approx(0, abs=1e-12)
    assert (shares["df_calibration"], shares["df_algorithm"], shares["df_interaction"]) == (1, 6, 6)
    assert shares["ms_calibration"] == pytest.approx(ss_cal / 1) and shares["ms_algorithm"] == pytest.approx(ss_alg / 6)
    # Pure interaction: opposite slopes under the two calibrations, equal means.
    inter = {k: v[0] for k, v in two_way(np.stack([q * 1.0, -q * 1.0], axis=1)[None]).items()}
    assert inter["share_calibration"] == pytest.approx(0) and inter["share_algorithm"] == pytest.approx(0)
    assert inter["share_interaction"] == pytest.approx(1)


def test_table_bold_per_block_ties_and_reference():
    frame = pd.DataFrame(
        {
            "block": ["a", "a", "a", "b", "b", "b", "b", "c", "c"],
            "name": ["ref", "x_1", "y", "x", "y", "w", "z", "u", "v"],
            "score": [0.99, 0.5, 0.7, 0.3, 0.3, 0.1, np.nan, 0.4, 0.4],
        }
    )
    table = ReportTable(
        name="t",
        title="Table T",
        caption="test",
        frame=frame,
        columns=[
            Column("block", "Block"),
            Column("name", "Name"),
            Column("score", "Score", fmt_fraction, best="max", numeric=True),
        ],
        block=["block"],
        reference=frame["name"] == "ref",
    )
    csv = to_csv_frame(table)
    # The reference row (0.99) is never bold; tied bests are both bold; NaN shows as a dash, never
    # bold; a block whose values all tie (c) has no bold.
    assert csv["best_score"].tolist() == [False, False, True, True, True, False, False, False, False]
    md = to_markdown(table)
    assert "| a | ref | 0.99 |" in md and "|  | y | **0.70** |" in md and "| – |" in md
    tex = to_latex(table)
    assert r"x\_1 & 0.50 \\" in tex and r"\textbf{0.30}" in tex and r"z & -- \\" in tex
    assert tex.count(r"\midrule") == 3  # after the header and between the three blocks

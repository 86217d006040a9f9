"""§5.2's algorithm spread as the paper words it (docs/method.md §7, issue 57): the verdict counts the
perplexity-pruned conditions with every search; the other readings are descriptive rows."""

from __future__ import annotations

import pandas as pd

from depthprune.reporting.analysis.frames import without_failed_searches
from depthprune.reporting.verdicts.observations import paper_values
from depthprune.reporting.verdicts.paper_shifts import cell_grids, in_spread_claim, perplexity_decision
from depthprune.reporting.verdicts.variance import perplexity_rows

# log10 average perplexity per (algorithm, calibration); cbo fails under ppl_c4 (loss above one-shot's)
PERPLEXITY = {
    ("one_shot", "ppl_c4"): 1.2,
    ("greedy", "ppl_c4"): 1.1,
    ("cbo", "ppl_c4"): 3.5,
    ("one_shot", "tlm_cs170k"): 2.5,
    ("greedy", "tlm_cs170k"): 4.8,
    ("cbo", "tlm_cs170k"): 3.1,
}
LOSS = {("one_shot", "ppl_c4"): 3.0, ("greedy", "ppl_c4"): 2.9, ("cbo", "ppl_c4"): 9.0}


def summary() -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "model": "m",
                "budget": 7,
                "seed": 0,
                "algorithm": a,
                "calibration": c,
                "avg_perplexity": 10**v,
                "avg_accuracy": 0.4,
                "loss": LOSS.get((a, c), 1.0 if a != "greedy" else 0.9),
            }
            for (a, c), v in PERPLEXITY.items()
        ]
    )


def test_tlm_conditions_do_not_count_for_the_algorithm_half():
    assert in_spread_claim("ppl_c4") and not in_spread_claim("tlm_cs170k")


def spread_rows_of(rows):
    return {r["scope"]: r for r in rows if "algorithm spread" in r["statistic"] and r["scope"].startswith("all")}


def test_spread_readings_with_and_without_failed_searches():
    frame = summary()
    reduced, failed = without_failed_searches(frame)
    assert failed  # cbo under ppl_c4
    rows, overall = perplexity_rows(frame, reduced, True, None, paper_values()["section_5_2"], None, "")
    spread = spread_rows_of(rows)
    assert set(spread) == {
        "all",
        "all, reading: TLM conditions included",
        "all, without failed searches",
        "all, without failed searches, reading: TLM conditions included",
    }
    # the verdict: ppl_c4 with every search, cbo's failed search spreads it over 2.4 orders
    assert spread["all"]["value"] == 0 and spread["all"]["verdict"] == "does not hold"
    # every other reading is descriptive, with the verdict its rule would give in the note
    assert spread["all, without failed searches"]["value"] == 1
    assert "would give: holds" in spread["all, without failed searches"]["note"]
    assert all(r["verdict"] == "descriptive" for scope, r in spread.items() if scope != "all")
    assert spread["all, reading: TLM conditions included"]["value"] == 0
    # the claim's algorithm half is the verdict row's
    assert perplexity_decision(cell_grids(frame, "log10_avg_perplexity"))[1] == "does not hold"
    assert perplexity_decision(cell_grids(reduced, "log10_avg_perplexity"))[1] == "holds"
    assert overall["log10_avg_perplexity"] == "does not hold"

"""The cross-seed decision rule (docs/method.md §10): §5.1's label-swap null over seeds, §5.3's sign
count over (M, seed) cells, and the pooled two-stage median."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from depthprune.reporting.statistics.nulls import within_across_permutation, within_minus_across
from depthprune.reporting.statistics.two_stage import two_stage_pooled
from depthprune.reporting.verdicts.across_seeds import (
    cells_needed,
    decision_table,
    sets_across_seeds,
    sign_count_noise_probability,
    sign_count_verdict,
    within_across_terms,
    within_across_under_flips,
)

ALGORITHMS = ["one_shot", "greedy", "beam", "ga", "bo", "cbo", "fast_block_select"]
CALIBRATIONS = ("ppl_c4", "tlm_cs170k")


def random_sets(rng, n_layers: int = 30, m: int = 7) -> dict:
    return {(a, c): sorted(rng.choice(n_layers, m, replace=False).tolist()) for a in ALGORITHMS for c in CALIBRATIONS}


def as_selections(sets: dict, budget: int = 7) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"model": "m", "budget": budget, "algorithm": a, "calibration": c, "removed": " ".join(map(str, v))}
            for (a, c), v in sets.items()
        ]
    )


def test_flip_terms_reproduce_within_minus_across_for_every_flip():
    rng = np.random.default_rng(1)
    sets = random_sets(rng)
    terms = within_across_terms({k: " ".join(map(str, v)) for k, v in sets.items()})
    flips = np.array(list(itertools.product((False, True), repeat=len(ALGORITHMS))))
    fast = within_across_under_flips(terms, flips)
    for row, value in zip(flips, fast):
        swapped = dict(sets)
        for algorithm, flip in zip(sorted(ALGORITHMS), row):
            if flip:
                swapped[(algorithm, "ppl_c4")], swapped[(algorithm, "tlm_cs170k")] = (
                    sets[(algorithm, "tlm_cs170k")],
                    sets[(algorithm, "ppl_c4")],
                )
        assert value == pytest.approx(within_minus_across(swapped), abs=1e-12)


@pytest.mark.parametrize("seed", [3, 4])
def test_one_seed_monte_carlo_p_matches_the_exact_permutation(seed):
    """With one seed the §10 null is the single-seed label-swap null: the 10,000-draw p estimates
    the exact 2^7 enumeration within Monte-Carlo error."""
    rng = np.random.default_rng(seed)
    sets = random_sets(rng)
    # make calibration matter a little so p is neither 1 nor at its floor
    for a in ALGORITHMS[:4]:
        sets[(a, "tlm_cs170k")] = [0, 1, 2, 3, 4, 5, 6]
    observed, exact = within_across_permutation(sets, list(CALIBRATIONS))
    table = sets_across_seeds({0: as_selections(sets)})
    row = table.iloc[0]
    assert row["estimate"] == pytest.approx(observed)
    assert row["p_value"] == pytest.approx(exact, abs=4 * np.sqrt(exact * (1 - exact) / 10_000) + 1e-3)


def test_sets_verdict_over_seeds_holds_only_when_calibration_separates_the_sets():
    rng = np.random.default_rng(7)
    separated = {}
    for s in range(3):
        sets = {(a, "ppl_c4"): [1, 2, 3, 4, 5, 6, 7] for a in ALGORITHMS}
        sets |= {(a, "tlm_cs170k"): [20, 21, 22, 23, 24, 25, 26] for a in ALGORITHMS}
        separated[s] = as_selections(sets)
    held = sets_across_seeds(separated).iloc[0]
    assert held["estimate"] == pytest.approx(1.0)  # within 1, across 0 in every seed
    assert held["p_value"] < 0.05 and held["verdict"] == "holds"
    noise = sets_across_seeds({s: as_selections(random_sets(rng)) for s in range(3)}).iloc[0]
    assert noise["verdict"] in ("inconclusive", "does not hold")


def test_sets_null_pass_rate_on_pure_noise_is_near_alpha():
    """How often §10's §5.1 rule passes when calibration does nothing (sets drawn at random): about
    5 %, never far above (the test can fail, and rarely passes on noise)."""
    rng = np.random.default_rng(11)
    passes = sum(
        sets_across_seeds({s: as_selections(random_sets(rng)) for s in range(2)}, draws=1000).iloc[0]["verdict"]
        == "holds"
        for _ in range(40)
    )
    assert passes <= 7  # 40 studies at 5 %: expected 2, P(> 7) < 0.1 %


@pytest.mark.parametrize(("n", "needed", "noise"), [(8, 7, 9 / 256), (6, 6, 1 / 64), (4, 4, 1 / 16), (2, 2, 1 / 4)])
def test_sign_count_rule_and_its_noise_rate(n, needed, noise):
    assert cells_needed(n) == needed
    assert sign_count_noise_probability(n) == pytest.approx(noise)


def test_sign_count_verdicts():
    assert sign_count_verdict(np.array([0.5] * 7 + [-0.1]), +1)[0] == "holds"
    assert sign_count_verdict(np.array([0.5] * 6 + [-0.1] * 2), +1)[0] == "inconclusive"
    assert sign_count_verdict(np.array([-0.5] * 7 + [0.2]), +1)[0] == "does not hold"
    # zero and undefined count on neither side
    assert sign_count_verdict(np.array([0.5] * 6 + [0.0, np.nan]), +1)[:3] == ("inconclusive", 6, 0)


def test_pooled_two_stage_median_by_hand():
    """Two seeds, two cells each, replicates constant within a seed: every replicate's median is the
    median of four drawn values; drawing seed 0 twice gives 0.1, seed 1 twice 0.5, one of each 0.3."""
    cells = {
        0: (np.array([0.0, 0.2]), np.tile([0.0, 0.2], (50, 1))),
        1: (np.array([0.4, 0.6]), np.tile([0.4, 0.6], (50, 1))),
    }
    estimate, lo, hi = two_stage_pooled(cells, np.median, n_resamples=4000)
    assert estimate == pytest.approx(0.3)
    assert (lo, hi) == (pytest.approx(0.1), pytest.approx(0.5))


def test_decision_table_counts_seeds_and_reports_partial_claims():
    two_stage = pd.DataFrame(
        [
            {
                "model": "m",
                "budget": 7,
                "statistic": "TLM − perplexity, mean of the algorithms (points)",
                "condition": "",
                "n_seeds": 1,
                "seed": s,
                "estimate": e,
                "ci_low": e - 1,
                "ci_high": e + 1,
                "document_variance": 0.25,
                "seed_variance": np.nan,
                "direction": "",
                "verdict": v,
            }
            for s, e, v in (("0", -3.0, "holds"), ("1", -0.5, "inconclusive"))
        ]
        + [
            {
                "model": "m",
                "budget": 7,
                "statistic": "TLM − perplexity, mean of the algorithms (points)",
                "condition": "",
                "n_seeds": 2,
                "seed": "two-stage",
                "estimate": -1.75,
                "ci_low": -3.5,
                "ci_high": 0.2,
                "document_variance": 0.25,
                "seed_variance": 2.9,
                "direction": "level",
                "verdict": "inconclusive",
            }
        ]
    )
    rho = pd.DataFrame(
        [
            {
                "seed": s,
                "model": "m",
                "budget": b,
                "calibration": "tlm_cs170k",
                "kind": "tlm",
                "rho": r,
                "replicates": None,
            }
            for s, b, r in ((0, 7, 0.3), (0, 9, 0.2), (1, 7, 0.1), (1, 9, -0.4))
        ]
    )
    sets = pd.DataFrame(columns=["model", "budget", "n_seeds", "per_seed", "estimate", "p_value", "verdict"])
    per_seed = pd.DataFrame(
        {
            "claim": ["5.3", "5.3", "5.3"],
            "seed": ["0", "1", "every seed"],
            "verdict": ["holds", "inconclusive", "inconclusive"],
        }
    )
    claims = decision_table(two_stage, rho, sets, per_seed, strong_rho=0.5).set_index("statistic")
    gap = claims.loc["m M=7: TLM − perplexity, mean of the algorithms (points)"]
    assert gap["seeds_holding"] == "1 of 2" and gap["verdict"] == "inconclusive"
    signs = claims.loc["TLM pruning: cells with ρ > 0 (distinct sets)"]
    assert signs["estimate"] == 3 and signs["verdict"] == "inconclusive"  # 3 of 4; the rule needs 4 of 4
    claim = claims[(claims.index == "claim") & (claims["claim"] == "5.3")].iloc[0]
    assert claim["seeds_holding"] == "1 of 2" and claim["verdict"] == "inconclusive"


def test_a_band_pass_that_noise_passes_too_is_uninformative_across_seeds():
    """The accuracy ratio's band test passes on pure noise often (its per-seed null pass, from each
    seed's observations): a two-stage pass is then uninformative, as a single seed's would be."""
    ratio = "accuracy shift ratio calibration / algorithm, max over cells"
    base = {
        "model": "all",
        "budget": 0,
        "statistic": ratio,
        "condition": "",
        "document_variance": 0.05,
        "seed_variance": 0.0,
    }
    two_stage = pd.DataFrame(
        [
            {**base, "n_seeds": 1, "seed": s, "estimate": 1.1, "ci_low": 0.8, "ci_high": 1.4, "verdict": "holds"}
            for s in ("0", "1")
        ]
        + [
            {
                **base,
                "n_seeds": 2,
                "seed": "two-stage",
                "estimate": 1.1,
                "ci_low": 0.8,
                "ci_high": 1.4,
                "verdict": "holds",
            }
        ]
    )
    empty_rho = pd.DataFrame(columns=["seed", "model", "budget", "calibration", "kind", "rho", "replicates"])
    empty_sets = pd.DataFrame(columns=["model", "budget", "n_seeds", "per_seed", "estimate", "p_value", "verdict"])

    def verdict(null_pass):
        claims = decision_table(two_stage, empty_rho, empty_sets, None, 0.5, accuracy_null_pass=null_pass)
        return claims[claims["statistic"].str.startswith("accuracy")].iloc[0]

    noisy = verdict({0: 0.55, 1: 0.40})
    assert noisy["verdict"] == "uninformative" and noisy["seeds_holding"] == "0 of 2"
    assert noisy["per_seed"] == "uninformative, uninformative"
    strict = verdict({0: 0.03, 1: 0.05})
    assert strict["verdict"] == "holds" and strict["seeds_holding"] == "2 of 2"

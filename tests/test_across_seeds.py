"""The cross-seed decision rule (docs/method.md §10): §5.1's label-swap null over seeds, §5.3's sign
count over (M, seed) cells, and the pooled two-stage median."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student_t

from depthprune.reporting.statistics.noise_null import UnitScores, across_seeds_verdict_rates
from depthprune.reporting.statistics.nulls import within_across_permutation, within_minus_across
from depthprune.reporting.statistics.two_stage import GAP, SEEDS_COLUMNS, two_stage_pooled
from depthprune.reporting.verdicts.across_seeds import (
    EITHER_CLAIM,
    RHO_CELL_COLUMNS,
    across_seeds_noise,
    cells_needed,
    decision_markdown,
    decision_table,
    sets_across_seeds,
    sign_count_noise_probability,
    sign_count_verdict,
    two_stage_table,
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
    # Random sets: never a pass; a mean ≤ 0 ("does not hold") is what the label-swap null itself
    # reaches about half the time, so it is uninformative.
    assert noise["verdict"] in ("inconclusive", "uninformative")
    assert noise["null_pass_probability"] <= 0.05 and noise["null_fail_probability"] > 0.2
    assert (noise["verdict"] == "uninformative") == (noise["estimate"] <= 0)


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
    median of four drawn values; drawing seed 0 twice gives 0.1, seed 1 twice 0.5, one of each 0.3
    (standard deviation sqrt(0.02)). The t-based seed stage: 0.3 ± t_{0.975, 1} · sd · sqrt(2 / 1)."""
    cells = {
        0: (np.array([0.0, 0.2]), np.tile([0.0, 0.2], (50, 1))),
        1: (np.array([0.4, 0.6]), np.tile([0.4, 0.6], (50, 1))),
    }
    estimate, lo, hi = two_stage_pooled(cells, np.median, n_resamples=20_000)
    assert estimate == pytest.approx(0.3)
    half = student_t.ppf(0.975, 1) * np.sqrt(0.02) * np.sqrt(2)
    assert (lo, hi) == (pytest.approx(0.3 - half, rel=0.03), pytest.approx(0.3 + half, rel=0.03))


def test_pooled_two_stage_shares_the_document_resample_between_seeds():
    """Each seed's one cell moves with the documents: replicate b is +d_b in seed 0 and −d_b in
    seed 1. Read with a shared b, drawing one of each seed always gives a median of 0; drawn
    independently it would not."""
    d = np.linspace(-1, 1, 101)
    cells = {0: (np.array([0.0]), d[:, None]), 1: (np.array([0.0]), -d[:, None])}
    rng_free = two_stage_pooled(cells, np.mean, n_resamples=4000)
    # A mean over the two drawn seeds: one of each -> 0 exactly; two of one seed -> ±d_b.
    assert rng_free[0] == 0.0
    # the replicates' spread: 1/2 of them 0, 1/2 of them ±d_b (variance of d: 0.34), times t_1 · sqrt(2)
    half = student_t.ppf(0.975, 1) * np.sqrt(0.5 * np.mean(d**2)) * np.sqrt(2)
    assert rng_free[2] == pytest.approx(half, rel=0.06)


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
                "perplexity": np.array([1.0, 2.0, 3.0]),
                "accuracy": np.array([0.5, 0.4, 0.3]),
                "representatives": ["a", "b", "c"],
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
    assert signs["estimate"] == 3 and signs["verdict"] == "descriptive"  # 3 of 4: a description
    assert "needed 4 of 4" in signs["rule"] and "would say inconclusive" in signs["rule"]
    mean = claims.loc["TLM pruning: mean ρ over (M, seed) cells (claim: > 0)"]
    assert mean["estimate"] == pytest.approx(0.05) and mean["verdict"] == "inconclusive"
    claim = claims[(claims.index == "claim") & (claims["claim"] == "5.3")].iloc[0]
    assert claim["seeds_holding"] == "1 of 2" and claim["verdict"] == "inconclusive"


def accuracy_ratio_rows(verdicts: dict[str, str], rates: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """seeds_two_stage rows of the pooled accuracy ratio: per seed label its verdict and noise rates."""
    ratio = "accuracy shift ratio calibration / algorithm, max over cells"
    return pd.DataFrame(
        [
            {
                "model": "all",
                "budget": 0,
                "statistic": ratio,
                "condition": "",
                "n_seeds": 2 if label == "two-stage" else 1,
                "seed": label,
                "estimate": 1.1,
                "ci_low": 0.8,
                "ci_high": 1.4,
                "document_variance": 0.05,
                "seed_variance": 0.0,
                "null_pass_probability": rates[label][0],
                "null_fail_probability": rates[label][1],
                "verdict": verdict,
            }
            for label, verdict in verdicts.items()
        ],
        columns=SEEDS_COLUMNS,
    )


EMPTY_RHO = pd.DataFrame(columns=RHO_CELL_COLUMNS)
EMPTY_SETS = pd.DataFrame(columns=["model", "budget", "n_seeds", "per_seed", "estimate", "p_value", "verdict"])


def test_the_claims_table_gives_each_statistic_the_verdict_of_the_two_stage_table():
    """One verdict per statistic: seeds_claims.csv repeats seeds_two_stage.csv's verdicts (a seed's
    `inconclusive` there is not `uninformative` here), with the noise rates beside them."""
    rates = {"0": (0.55, 0.0), "1": (0.05, 0.0), "two-stage": (0.9, 0.0)}
    two_stage = accuracy_ratio_rows({"0": "uninformative", "1": "inconclusive", "two-stage": "uninformative"}, rates)
    claims = decision_table(two_stage, EMPTY_RHO, EMPTY_SETS, None, 0.5)
    row = claims[claims["statistic"].str.startswith("accuracy")].iloc[0]
    assert row["per_seed"] == "uninformative, inconclusive" and row["verdict"] == "uninformative"
    assert row["null_pass_probability"] == 0.9


def test_noise_rates_make_a_pass_and_a_does_not_hold_uninformative_in_the_two_stage_table(monkeypatch):
    """two_stage_table applies each row's own noise rates: the seeds' (single-seed rule) to their
    rows, the across-seeds rule's to the two-stage row; a `does not hold` that noise reaches > 20 %
    is uninformative like a pass."""
    from depthprune.reporting.verdicts import across_seeds

    ratio = "accuracy shift ratio calibration / algorithm, max over cells"
    rows = {0: (1.1, np.full(100, 1.1) + np.linspace(-0.1, 0.1, 100)), 1: (5.0, np.linspace(4.5, 5.5, 100))}

    def statistics(summary, reps):
        seed = int(summary)
        return {("all", 0, ratio, ""): rows[seed]}

    monkeypatch.setattr(across_seeds, "per_seed_statistics", statistics)
    noise = {ratio: {"0": (0.5, 0.0), "1": (0.0, 0.3), "two-stage": (0.01, 0.01)}}
    table = two_stage_table({0: "0", 1: "1"}, {0: None, 1: None}, 2.0, noise).set_index("seed")
    assert table.loc["0", "verdict"] == "uninformative"  # holds; noise passes 50 %
    assert table.loc["1", "verdict"] == "uninformative"  # does not hold (5 > 2); noise fails 30 %
    assert table.loc["1", "null_fail_probability"] == 0.3
    quiet = {ratio: {"0": (0.01, 0.0), "1": (0.0, 0.05), "two-stage": (0.01, 0.01)}}
    table = two_stage_table({0: "0", 1: "1"}, {0: None, 1: None}, 2.0, quiet).set_index("seed")
    assert (table.loc["0", "verdict"], table.loc["1", "verdict"]) == ("holds", "does not hold")


def ppl_cells(rhos: dict[tuple[int, int], float]) -> pd.DataFrame:
    """ρ cells under perplexity pruning, each with three distinct sets (seed, M) -> ρ."""
    return pd.DataFrame(
        [
            {
                "seed": s,
                "model": "m",
                "budget": b,
                "calibration": "ppl_c4",
                "kind": "ppl",
                "rho": r,
                "replicates": None,
                "perplexity": np.array([1.0, 2.0, 3.0]),
                "accuracy": np.array([0.5, 0.4, 0.3]),
                "representatives": ["a", "b", "c"],
            }
            for (s, b), r in rhos.items()
        ],
        columns=RHO_CELL_COLUMNS,
    )


def test_the_negative_or_weak_claim_is_the_or_of_its_parts_and_noise_can_make_it_uninformative():
    """Across seeds, perplexity pruning's claim is `either` of the mean-ρ test and the weak median;
    a pass that null studies of the "or" reach more than 20 % of the time is uninformative, and rates
    simulated for another strong_rho are not used."""
    cells = ppl_cells({(0, 7): 0.2, (0, 9): -0.1, (1, 7): 0.1, (1, 9): -0.2})  # weak, not negative
    claims = decision_table(accuracy_ratio_rows({}, {}), cells, EMPTY_SETS, None, 0.5).set_index("statistic")
    negative = claims.loc["perplexity pruning: mean ρ over (M, seed) cells (part 'negative': < 0)"]
    weak = claims.loc["perplexity pruning: median ρ over cells (part 'weak': −0.5 < median < 0.5)"]
    either_row = claims.loc[f"{EITHER_CLAIM} (claim: mean ρ < 0, or −0.5 < median ρ < 0.5)"]
    assert (negative["verdict"], weak["verdict"], either_row["verdict"]) == ("inconclusive", "holds", "holds")
    # The shuffled-document null (no association) is where the claim is true: its pass rate is shown,
    # not used as a false-positive rate (issue 66 item 5); its fail rate judges a `does not hold`.
    noisy = {EITHER_CLAIM: (0.5, 0.9, 0.3)}
    claims = decision_table(accuracy_ratio_rows({}, {}), cells, EMPTY_SETS, None, 0.5, noise=noisy)
    row = claims[claims["statistic"].str.startswith(EITHER_CLAIM)].iloc[0]
    assert row["verdict"] == "holds" and np.isnan(row["null_pass_probability"])  # no replicates: no boundary rate
    assert "it holds in 90.0% of them" in row["rule"]
    strong = ppl_cells({(0, 7): 0.9, (0, 9): 0.8, (1, 7): 0.9, (1, 9): 0.8})
    claims = decision_table(accuracy_ratio_rows({}, {}), strong, EMPTY_SETS, None, 0.5, noise=noisy)
    row = claims[claims["statistic"].str.startswith(EITHER_CLAIM)].iloc[0]
    assert row["verdict"] == "uninformative" and row["null_fail_probability"] == 0.3  # fails; noise fails 30 %
    assert claims[(claims["statistic"] == "claim") & (claims["claim"] == "5.3")]["verdict"].iloc[0] == "uninformative"
    other = decision_table(accuracy_ratio_rows({}, {}), cells, EMPTY_SETS, None, 0.3, noise=noisy)
    row = other[other["statistic"].str.startswith(EITHER_CLAIM)].iloc[0]
    assert np.isnan(row["null_pass_probability"])  # simulated for 0.5, not 0.3
    strong = ppl_cells({(0, 7): 0.9, (0, 9): 0.8, (1, 7): 0.7, (1, 9): 0.9})  # strong positive: neither part
    claims = decision_table(accuracy_ratio_rows({}, {}), strong, EMPTY_SETS, None, 0.5)
    row = claims[claims["statistic"].str.startswith(EITHER_CLAIM)].iloc[0]
    # both parts fail: the median is strong, and the mean lies on the positive side with p = 1/36 + 1/(1 + draws)
    # (each seed's two identical cells move together: both seeds must draw ρ = 1)
    assert row["verdict"] == "does not hold"


def unit_scores(values: dict[str, np.ndarray]) -> UnitScores:
    n_runs = next(iter(values.values())).shape[0]
    runs = pd.DataFrame(
        [{"model": "m", "calibration": f"c{r}", "budget": 7, "algorithm": "a", "seed": 0} for r in range(n_runs)]
    )
    return UnitScores(runs=runs, values=values, tokens=dict.fromkeys(values))


def test_across_seeds_null_studies_permute_each_seed_and_share_the_document_resamples():
    """A null study of the multi-seed rule permutes every seed's documents independently, and
    bootstraps every seed with the same resamples: the sum over runs of a replicate (unchanged by a
    permutation among runs) is then the same in every seed, while the seeds' observed averages differ."""
    rng = np.random.default_rng(5)
    scores = {"arc_easy": (rng.random((4, 50)) < 0.5).astype(float)}
    cells = {s: [unit_scores(scores)] for s in range(3)}
    seen = []

    def rule(observed, replicates):
        totals = [replicates[s][0].sum(axis=1) for s in sorted(replicates)]
        shared = all(np.allclose(t, totals[0]) for t in totals)
        differ = not all(np.array_equal(observed[s][0], observed[0][0]) for s in observed)
        seen.append((shared, differ))
        return "holds" if len(seen) % 4 == 0 else "does not hold"

    rates = across_seeds_verdict_rates(cells, rule, "accuracy", n_null=40, n_inner=30)
    assert all(shared for shared, _ in seen) and sum(differ for _, differ in seen) >= 38
    assert rates == {"does not hold": 0.75, "holds": 0.25}


def test_across_seeds_noise_rates_are_those_of_the_across_seeds_rule(monkeypatch):
    """The two-stage row's rates come from null studies of the whole multi-seed study judged by the
    across-seeds rule (a t interval over seeds in the band), not from the seeds' own rates: here the
    seeds' single-seed rule is made to pass every null study and the across-seeds one never."""
    from depthprune.reporting.verdicts import across_seeds

    calls = []

    def single_seed(samples, grids, kind, decide, tasks=None, rule=None):
        return (1.0, 0.0)

    def multi_seed(cells, decide, kind):
        calls.append(sorted(cells))
        return {"does not hold": 1.0} if kind == "accuracy" else {}

    monkeypatch.setattr(across_seeds, "noise_pass_fail", single_seed)
    monkeypatch.setattr(across_seeds, "across_seeds_verdict_rates", multi_seed)
    monkeypatch.setattr(across_seeds, "cell_grids", lambda summary, response, reps: [{"model": "m", "budget": 7}])
    monkeypatch.setattr(across_seeds, "noise_cells", lambda samples, grids, kind, tasks=None: ["cell"])
    monkeypatch.setattr(across_seeds, "rho_cells", lambda summaries, reps: EMPTY_RHO)
    noise = across_seeds_noise({0: None, 1: None}, {0: "r", 1: "r"}, {0: "s", 1: "s"}, 2.0)
    ratio = "accuracy shift ratio calibration / algorithm, max over cells"
    assert noise[ratio] == {"0": (1.0, 0.0), "1": (1.0, 0.0), "two-stage": (0.0, 1.0)}
    assert calls == [[0, 1], [0, 1], [0, 1]]  # accuracy ratio, gap, perplexity: every seed in one null study


def test_every_accuracy_row_gets_an_informative_twin_and_a_changed_verdict_is_marked():
    """The secondary analysis (docs/method.md §10): each accuracy row is followed by its twin on the
    informative tasks, which never enters the claim; the row and its claim are marked when the twin's
    verdict differs, and left unmarked when it agrees."""
    primary = accuracy_ratio_rows(
        {"0": "holds", "1": "holds", "two-stage": "holds"}, dict.fromkeys("01", (0.0, 0.0)) | {"two-stage": (0.0, 0.0)}
    )
    rates = dict.fromkeys(("0", "1", "two-stage"), (0.0, 0.0))
    differs = accuracy_ratio_rows({"0": "holds", "1": "does not hold", "two-stage": "does not hold"}, rates)
    cells = ppl_cells({(0, 7): 0.2, (0, 9): -0.1, (1, 7): 0.1, (1, 9): -0.2})
    informative = {"two_stage": differs, "rho": cells, "noise": {}}
    claims = decision_table(primary, cells, EMPTY_SETS, None, 0.5, informative=informative).set_index("statistic")
    label = "accuracy: accuracy shift ratio calibration / algorithm, max over cells (claim: comparable)"
    assert claims.loc[label, "verdict"] == "holds" and claims.loc[label, "changed_by_informative"] == "yes"
    twin = claims.loc[label + ", informative tasks"]
    assert twin["verdict"] == "does not hold" and twin["per_seed"] == "holds, does not hold"
    by_claim = claims[claims.index == "claim"].set_index("claim")
    # the max-shift ratio is the paper's number beside the SD-ratio test, not part of §5.2's claim (§10):
    # with no verdict-bearing §5.2 row the claim is not testable, and an extra row decides it
    assert by_claim.loc["5.2", "verdict"] == "not testable"
    sd_ratio = {"claim": "5.2", "statistic": "SD ratio (claim: comparable)", "verdict": "does not hold"}
    described = {"claim": "5.2", "statistic": "calibration SD", "verdict": "descriptive"}
    decided = decision_table(primary, cells, EMPTY_SETS, None, 0.5, extra_rows=[sd_ratio, described])
    assert decided.set_index("statistic").loc["claim"].set_index("claim").loc["5.2", "verdict"] == "does not hold"
    # §5.3: the same cells on the informative tasks: every twin agrees, nothing is marked changed
    either_label = f"{EITHER_CLAIM} (claim: mean ρ < 0, or −0.5 < median ρ < 0.5)"
    assert claims.loc[either_label, "changed_by_informative"] == "no"
    assert claims.loc[either_label + ", informative tasks", "verdict"] == claims.loc[either_label, "verdict"]
    assert by_claim.loc["5.3", "changed_by_informative"] == "no"
    assert claims.loc["perplexity pruning: cells with ρ < 0 (distinct sets)", "changed_by_informative"] == ""
    # without the secondary analysis: no twins, no marks
    plain = decision_table(primary, cells, EMPTY_SETS, None, 0.5)
    assert not plain["statistic"].str.endswith(", informative tasks").any()
    assert (plain["changed_by_informative"].fillna("") == "").all()


def test_the_markdown_table_leaves_empty_cells_empty():
    """A row without per-seed tests (the weak median, §5.1) shows an empty "seeds holding" cell, not nan."""
    cells = ppl_cells({(0, 7): 0.2, (0, 9): -0.1, (1, 7): 0.1, (1, 9): -0.2})
    claims = decision_table(accuracy_ratio_rows({}, {}), cells, EMPTY_SETS, None, 0.5)
    text = decision_markdown(claims, 2)
    assert "nan" not in text and "part 'weak'" in text


def _calibrated_study(p_ppl: float, p_tlm: float, seed: int, n_docs: int = 120):
    """One seed's summary and per-document samples: three paper searches under both paper
    calibrations at accuracies ``p_ppl`` / ``p_tlm`` on three tasks (0/1 per document)."""
    rng = np.random.default_rng(seed)
    rows, summary = [], []
    for calibration, p in (("ppl_c4", p_ppl), ("tlm_cs170k", p_tlm)):
        for j, algorithm in enumerate(("one_shot", "greedy", "beam")):
            removed = f"{j} {j + 10} {calibration}"
            accuracies = []
            for task in ("hellaswag", "arc_easy", "piqa"):
                correct = (rng.random(n_docs) < p).astype(float)
                accuracies.append(correct.mean())
                rows.append(
                    pd.DataFrame(
                        {
                            "model": "m", "calibration": calibration, "budget": 7, "algorithm": algorithm,
                            "removed": removed, "benchmark": task, "unit": np.arange(n_docs), "metric": "acc_norm",
                            "value": correct, "headline": True, "seed": seed,
                        }
                    )
                )  # fmt: skip
            summary.append(
                {
                    "model": "m", "calibration": calibration, "budget": 7, "algorithm": algorithm, "removed": removed,
                    "seed": seed, "avg_accuracy": float(np.mean(accuracies)),
                }
            )  # fmt: skip
    return pd.DataFrame(summary), pd.concat(rows, ignore_index=True)


def test_the_gap_rows_carry_the_rate_at_which_noise_excludes_zero():
    """Issue 66: the TLM − perplexity gap rows had no noise rate though §11 judges the gap with one.
    With no calibration effect the two one-sided rates are small; with a large one the observed
    direction's row gets the rate of that side."""
    from depthprune.reporting.verdicts.across_seeds import gap_noise_rates

    study = {s: _calibrated_study(0.5, 0.5, s) for s in (0, 1, 2)}
    rates = gap_noise_rates({s: v[0] for s, v in study.items()}, {s: v[1] for s, v in study.items()})
    assert set(rates) == {("m", 7)}
    lower, higher = rates[("m", 7)]
    assert 0 <= lower < 0.1 and 0 <= higher < 0.1
    two_stage = pd.DataFrame(
        [
            {
                "model": "m", "budget": 7, "statistic": GAP, "condition": "", "n_seeds": 3, "seed": "two-stage",
                "estimate": -5.0, "ci_low": -8.0, "ci_high": -2.0, "document_variance": 1.0, "seed_variance": 1.0,
                "direction": "lower", "verdict": "holds",
            }
        ]
    )  # fmt: skip
    claims = decision_table(two_stage, EMPTY_RHO, EMPTY_SETS, None, 0.5, noise={GAP: {("m", 7): (0.004, 0.007)}})
    gap = claims[claims["statistic"] == f"m M=7: {GAP}"].iloc[0]
    assert (gap["null_pass_probability"], gap["null_fail_probability"]) == (0.004, 0.007)
    assert gap["verdict"] == "holds" and "noise" in gap["rule"]
    noisy = decision_table(two_stage, EMPTY_RHO, EMPTY_SETS, None, 0.5, noise={GAP: {("m", 7): (0.3, 0.3)}})
    assert noisy[noisy["statistic"] == f"m M=7: {GAP}"].iloc[0]["verdict"] == "uninformative"


def tlm_cells(rhos: dict[tuple[int, int], float]) -> pd.DataFrame:
    """ρ cells under TLM pruning (``ppl_cells`` relabelled)."""
    cells = ppl_cells(rhos)
    return cells.assign(calibration="tlm_cs170k", kind="tlm")


def test_a_claim_with_a_part_that_does_not_hold_does_not_hold():
    """§5.3 is a conjunction (TLM's ρ > 0 *but* perplexity pruning's negative or weak): when TLM's
    part does not hold at its noise level and the other part holds, the claim does not hold, and its
    rule names the failing part with the rate at which noise alone fails it (issue 66, item 8)."""
    ppl = ppl_cells({(s, b): -0.2 for s in range(4) for b in (7, 9)})
    tlm = tlm_cells({(s, b): -1.0 for s in range(4) for b in (7, 9)})
    # three distinct sets per cell: the accuracies reverse the perplexities, so ρ = −1 in every cell
    rho = pd.concat([ppl, tlm], ignore_index=True)
    claims = decision_table(accuracy_ratio_rows({}, {}), rho, EMPTY_SETS, None, 0.5)
    tlm_row = claims[claims["statistic"] == "TLM pruning: mean ρ over (M, seed) cells (claim: > 0)"].iloc[0]
    assert tlm_row["verdict"] == "does not hold"
    either_row = claims[claims["statistic"].str.startswith(EITHER_CLAIM)].iloc[0]
    assert either_row["verdict"] == "holds"
    claim = claims[(claims["statistic"] == "claim") & (claims["claim"] == "5.3")].iloc[0]
    assert claim["verdict"] == "does not hold"
    assert "does not hold: TLM pruning: mean ρ" in claim["rule"] and "noise fails it" in claim["rule"]


def test_conjunction_and_unanimous_differ_only_where_a_part_fails():
    """A claim's parts combine as a conjunction (any part that does not hold refutes it); a claim's
    replicates (its verdict per seed) as unanimity (disagreeing seeds leave it inconclusive)."""
    from depthprune.reporting.verdicts.rules import conjunction, unanimous

    assert conjunction(["holds", "does not hold"]) == "does not hold"
    assert unanimous(["holds", "does not hold"]) == "inconclusive"
    assert conjunction(["inconclusive", "does not hold", "uninformative"]) == "does not hold"
    for verdicts, expected in (
        (["holds", "holds"], "holds"),
        (["does not hold", "does not hold"], "does not hold"),
        (["holds", "uninformative"], "uninformative"),
        (["holds", "inconclusive"], "inconclusive"),
        (["uninformative", "inconclusive"], "inconclusive"),
        (["descriptive"], "not testable"),
    ):
        assert conjunction(verdicts) == unanimous(verdicts) == expected


def test_the_weak_parts_null_rate_exceeds_zero_where_alignment_is_strong():
    """The weak part (median ρ inside (−0.5, 0.5)) is judged by how often it holds where it is false:
    studies resampled from the seeds and documents with the median ρ moved to ±0.5. With little seed
    and document noise its interval is narrow and such studies sometimes pass it; with the spread of
    a real four-seed study they cannot (issue 66, item 5)."""
    from depthprune.reporting.verdicts.rho_combination import boundary_rates

    rng = np.random.default_rng(3)
    null = rng.uniform(-1, 1, 20_000)
    observed = {s: np.array([0.0, 0.01]) + rng.normal(0, 0.05) for s in range(4)}
    quiet = {s: (v, v + rng.normal(0, 0.01, (300, 2))) for s, v in observed.items()}
    weak_pass, either_pass = boundary_rates(quiet, null, 0.5, studies=1000, inner=200)
    assert 0 < weak_pass < 0.5  # studies where "weak" is false pass it: a rate the rule can be judged by
    assert 0 < either_pass <= weak_pass  # at +0.5 the "or" holds only through its weak part
    noisy = {s: (np.array([-0.8, 0.6]), rng.normal([-0.8, 0.6], 0.3, (300, 2))) for s in range(4)}
    assert boundary_rates(noisy, null, 0.5, studies=200, inner=200)[0] == 0


def test_the_mean_rho_row_names_the_search_that_carries_it():
    """One search whose sets alone make ρ negative: the row says what the mean is without it, with its
    own permutation p (issue 66 item 5: CBO's role in the row itself)."""
    from depthprune.reporting.verdicts.rho_combination import most_influential, without_algorithm

    rows = []
    for s in range(4):
        for b in (7, 9):
            rows.append(
                {
                    "seed": s,
                    "model": "m",
                    "budget": b,
                    "calibration": "ppl_c4",
                    "kind": "ppl",
                    "rho": np.nan,
                    "replicates": None,
                    # cbo's set: the highest perplexity and the lowest accuracy; the others unrelated
                    "perplexity": np.array([1.0, 2.0, 3.0, 4.0, 9.0]),
                    "accuracy": np.array([0.50, 0.52, 0.49, 0.51, 0.30]),
                    "representatives": ["one_shot", "greedy", "beam", "ga", "cbo"],
                    "finders": [("one_shot", "bo"), ("greedy",), ("beam",), ("ga",), ("cbo",)],
                }
            )
    cells = pd.DataFrame(rows, columns=RHO_CELL_COLUMNS)
    full = without_algorithm(cells, "none")
    cells["rho"] = full["rho"]
    assert (cells["rho"] < 0).all()
    found = most_influential(cells, -1)
    assert found["algorithm"] == "cbo" and found["cells"] == 8
    assert found["mean"] > float(cells["rho"].mean()) and found["verdict"] != "holds"
    # a set another search found too stays, represented by it
    reduced = without_algorithm(cells, "one_shot")
    assert reduced["representatives"].iloc[0][0] == "bo" and len(reduced["perplexity"].iloc[0]) == 5

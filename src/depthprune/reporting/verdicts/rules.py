"""How a statistic becomes a verdict: ``holds``, ``does not hold`` or ``inconclusive`` (the interval
straddles the threshold, or an end lies within Monte-Carlo error of it: ``bootstrap.resolved``);
``descriptive`` rows carry a number but no test; ``uninformative`` when pure noise reaches the
verdict more often than ``UNINFORMATIVE_LEVEL`` (``reporting/statistics/noise_null.py``): a pass or
an inconclusive result when noise passes that often, a ``does not hold`` when noise fails that often. One row of
``observations.csv`` (``observation_row``, ``COLUMNS``); one claim's verdict from its parts
(``conjunction``), and one verdict from a claim's replicates (``unanimous``).
"""

from __future__ import annotations

import numpy as np

from depthprune.reporting.statistics.bootstrap import resolved
from depthprune.reporting.statistics.noise_null import UNINFORMATIVE_LEVEL

HOLDS, FAILS, UNSURE, DESCRIPTIVE = "holds", "does not hold", "inconclusive", "descriptive"
UNINFORMATIVE = "uninformative"  # pure noise reaches the verdict more often than UNINFORMATIVE_LEVEL
NOT_TESTABLE = "not testable"
COLUMNS = [
    "claim",
    "scope",
    "statistic",
    "value",
    "ci_low",
    "ci_high",
    "ci_low_mc_se",
    "ci_high_mc_se",
    "null_value",
    "p_value",
    "null_pass_probability",
    "null_fail_probability",
    "paper_value",
    "verdict",
    "note",
]
NAN2 = (float("nan"), float("nan"))


def above(lo: float, hi: float, value: float, threshold: float, se: tuple[float, float] = NAN2) -> str:
    """holds if the interval (or, without one, the value) is above ``threshold``; fails if below.

    ``se``: the Monte-Carlo standard errors of the ends; an end within that error of the threshold
    does not decide (inconclusive).
    """
    if np.isnan(lo) or np.isnan(hi):
        if np.isnan(value):
            return UNSURE
        return HOLDS if value > threshold else FAILS
    if lo > threshold and resolved(lo, se[0], threshold):
        return HOLDS
    if hi <= threshold and resolved(hi, se[1], threshold):
        return FAILS
    return UNSURE


def below(
    lo: float, hi: float, value: float, threshold: float, strict: bool = False, se: tuple[float, float] = NAN2
) -> str:
    """holds if the interval (or, without one, the value) is ≤ ``threshold`` (< if ``strict``); fails if
    above. An end within Monte-Carlo error (``se``) of the threshold does not decide."""
    ok = (lambda x: x < threshold) if strict else (lambda x: x <= threshold)
    if np.isnan(lo) or np.isnan(hi):
        if np.isnan(value):
            return UNSURE
        return HOLDS if ok(value) else FAILS
    if ok(hi) and resolved(hi, se[1], threshold):
        return HOLDS
    if not ok(lo) and resolved(lo, se[0], threshold):
        return FAILS
    return UNSURE


def within_band(lo: float, hi: float, value: float, band: float, se: tuple[float, float] = NAN2) -> str:
    """The two-sided "comparable" test: holds if the interval lies inside [1/band, band], fails if it
    lies wholly outside (above band or below 1/band); an end within Monte-Carlo error of either edge
    does not decide. Without an interval the point value decides."""
    low, high = 1 / band, band
    if np.isnan(lo) or np.isnan(hi):
        if np.isnan(value):
            return UNSURE
        return HOLDS if low <= value <= high else FAILS
    if low <= lo and hi <= high and resolved(lo, se[0], low) and resolved(hi, se[1], high):
        return HOLDS
    if (lo > high and resolved(lo, se[0], high)) or (hi < low and resolved(hi, se[1], low)):
        return FAILS
    return UNSURE


def conjunction(verdicts: list[str]) -> str:
    """A claim's verdict from its parts (docs/method.md §7, amended by issue 66): every claim the
    paper makes is a conjunction of its parts (its halves, and each condition of a statement about
    every condition), so it does not hold when any part does not hold; a part's ``does not hold`` was
    judged at its rule's noise level already (a failure that noise reaches more than UNINFORMATIVE_LEVEL of
    the time reads ``uninformative`` and does not count). It holds when every part holds, is
    ``uninformative`` when every part holds or is uninformative and one is, else inconclusive; no
    tested part -> not testable."""
    return FAILS if FAILS in verdicts else unanimous(verdicts)  # without a failing part, the two agree


def unanimous(verdicts: list[str]) -> str:
    """One verdict from replicates of the same claim (its verdict at each seed): unanimous, else
    inconclusive; ``uninformative`` when every replicate holds or is uninformative and one is; none ->
    not testable. Replicates are not parts: a seed where a claim fails and one where it holds
    disagree, they do not refute each other."""
    tested = [v for v in verdicts if v in (HOLDS, FAILS, UNSURE, UNINFORMATIVE)]
    if not tested:
        return NOT_TESTABLE
    if all(v == HOLDS for v in tested):
        return HOLDS
    if all(v == FAILS for v in tested):
        return FAILS
    if all(v in (HOLDS, UNINFORMATIVE) for v in tested):
        return UNINFORMATIVE
    return UNSURE


def observation_row(
    claim,
    scope,
    statistic,
    value,
    ci=NAN2,
    paper="",
    verdict=DESCRIPTIVE,
    se=NAN2,
    null=float("nan"),
    p=float("nan"),
    note="",
    null_pass=float("nan"),
    null_fail=float("nan"),
) -> dict:
    return {
        "claim": claim,
        "scope": scope,
        "statistic": statistic,
        "value": float(value),
        "ci_low": float(ci[0]),
        "ci_high": float(ci[1]),
        "ci_low_mc_se": float(se[0]),
        "ci_high_mc_se": float(se[1]),
        "null_value": float(null),
        "p_value": float(p),
        "null_pass_probability": float(null_pass),
        "null_fail_probability": float(null_fail),
        "paper_value": paper,
        "verdict": verdict,
        "note": note,
    }


def uninformative_under_noise(verdict: str, null_pass: float, null_fail: float = float("nan")) -> str:
    """``uninformative`` when pure noise reaches the verdict more often than UNINFORMATIVE_LEVEL:
    ``null_pass`` (the share of null studies passing the test) judges a pass and an inconclusive
    result, ``null_fail`` (the share reaching ``does not hold``) judges a ``does not hold``. A verdict
    that a study with no effect at all reaches one time in five says too little about the claim,
    whichever way it goes (docs/method.md §7)."""
    rate = null_fail if verdict == FAILS else null_pass if verdict in (HOLDS, UNSURE) else float("nan")
    if np.isfinite(rate) and rate > UNINFORMATIVE_LEVEL:
        return UNINFORMATIVE
    return verdict

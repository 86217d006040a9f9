"""Which way a verdict's "holds" points, for the README's tables (the one place that says it).

The paper's claims (§5.1-§5.3) are judged as the paper states them (docs/method.md §7), so for every
statistic of such a claim "holds" is evidence for the paper. The TLM − perplexity gap (docs/method.md
§10) is this project's test, not the paper's: it holds when the TLM-pruned models' average accuracy
differs from the perplexity-pruned models'. The paper reads TLM pruning as moving models along the
perplexity axis "without a comparable shift along the accuracy axis" (its §5.2, Figure 2), so a gap
that holds is evidence against that reading, whichever way it goes. The random-set control
(docs/method.md §11) holds when the searches' sets beat chance selection.

The verdicts' claims are named in reporting/verdicts/ (the CSVs' ``claim`` column); this module maps
those names and is kept here, beside the pages that print it, so that the verdict code stays free of
presentation. A claim it does not know is an error naming it: a new kind of claim must say its
direction here before a page can print it.
"""

from __future__ import annotations

SUPPORTS = "supports the paper"
TLM_WORSE = "against the paper (TLM worse than perplexity pruning)"
TLM_BETTER = "against the paper (TLM better than perplexity pruning)"
TLM_DIFFERS = "against the paper (TLM and perplexity pruning differ)"
# The claim of the TLM − perplexity accuracy gap rows (seeds_claims.csv, calibration_contrast.csv).
GAP = "gap"
# The paper's claims: its section numbers.
PAPER_CLAIMS = ("5.1", "5.2", "5.3")
# The random-set control (docs/method.md §11): do the searches' sets beat chance selection? The paper
# takes it for granted and never tests it (it evaluates no random sets).
RANDOM_SETS = "random sets"
BEATS_CHANCE = "the searches beat chance selection (the paper assumes it, never tests it)"


def holds_means(claim: str, gap_estimate: float | None = None) -> str:
    """What a "holds" of `claim` says about the paper. For the gap, `gap_estimate` (TLM − perplexity,
    any unit) says which way TLM differs; without a sign (none, zero or NaN) the text says only that
    they differ."""
    claim = claim.removeprefix("§")
    if claim in PAPER_CLAIMS:
        return SUPPORTS
    if claim == GAP:
        if gap_estimate is None or not gap_estimate or gap_estimate != gap_estimate:
            return TLM_DIFFERS
        return TLM_WORSE if gap_estimate < 0 else TLM_BETTER
    if claim == RANDOM_SETS:
        return BEATS_CHANCE
    raise ValueError(
        f"claim {claim!r}: no direction for its verdict in reporting/pages/directions.py "
        f"(known: {', '.join((*PAPER_CLAIMS, GAP, RANDOM_SETS))}); say there what its 'holds' means"
    )

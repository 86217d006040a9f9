"""Size an evaluation-only study from one measured pass (issue 58, docs/method.md §11).

Reads the per-document results of a pass evaluated at n documents per task (an aggregate's
``samples.parquet``) and prints, per comparison, the paired standard error of the average headline
accuracy over the pass's tasks and its minimum detectable difference (two-sided 5 %, 80 % power,
``bootstrap.MDD_FACTOR``) at n and at each candidate document count: the paired SE of a mean of
per-document differences scales as 1/sqrt(n) (``power.mdd_at``). Single-seed, document-level MDDs:
a study over seeds adds the seed variance (docs/method.md §10), which one pass cannot measure.

    python scripts/size_rescore.py SAMPLES.parquet [--candidates 116 500 1000]
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from depthprune.reporting.statistics.bootstrap import MDD_FACTOR
from depthprune.reporting.statistics.power import mdd_at

PAPER_CALIBRATIONS = ("ppl_c4", "tlm_cs170k")


def headline_accuracy(samples: pd.DataFrame) -> pd.DataFrame:
    """documents × runs: the headline accuracy of every run on every document, per benchmark."""
    acc = samples[samples["headline"]]
    return acc.pivot_table(index=["benchmark", "unit"], columns=["calibration", "algorithm"], values="value")


def paired_se(wide: pd.DataFrame, left: list, right: list) -> tuple[float, int]:
    """SE (points) of mean(left runs) − mean(right runs) on the average over benchmarks, and n per task."""
    difference = wide[left].mean(axis=1) - wide[right].mean(axis=1)
    per_task = difference.groupby(level="benchmark").agg(["var", "count"])
    variance = (per_task["var"] / per_task["count"]).sum() / len(per_task) ** 2
    return 100 * float(np.sqrt(variance)), int(per_task["count"].min())


def comparisons(wide: pd.DataFrame) -> dict[str, list[tuple[list, list]]]:
    """name -> [(left runs, right runs)]: the accuracy claims' paired contrasts within one seed."""
    runs = list(wide.columns)
    by = {cal: [r for r in runs if r[0] == cal] for cal in PAPER_CALIBRATIONS}
    random_sets = [r for r in runs if r[1].startswith("random_set_")]
    algorithms = sorted({a for _, a in by["tlm_cs170k"]} & {a for _, a in by["ppl_c4"]})
    return {
        "TLM − perplexity, mean over the searches": [(by["tlm_cs170k"], by["ppl_c4"])],
        "TLM − perplexity, one search (median over searches)": [
            ([("tlm_cs170k", a)], [("ppl_c4", a)]) for a in algorithms
        ],
        "TLM − random sets, means": [(by["tlm_cs170k"], random_sets)],
        "perplexity − random sets, means": [(by["ppl_c4"], random_sets)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", help="an aggregate's samples.parquet (one seed's pass)")
    parser.add_argument("--candidates", type=int, nargs="+", default=[116, 500, 1000])
    args = parser.parse_args()
    wide = headline_accuracy(pd.read_parquet(args.samples)).dropna(axis=1)
    print(f"tasks: {', '.join(sorted(wide.index.get_level_values('benchmark').unique()))}; runs: {wide.shape[1]}")
    header = ["comparison", "n", "SE (points)"] + [f"mdd at {c}" for c in args.candidates]
    print(" | ".join(header))
    for name, pairs in comparisons(wide).items():
        ses = [paired_se(wide, left, right) for left, right in pairs]
        se = float(np.median([s for s, _ in ses]))
        n = ses[0][1]
        cells = [name, str(n), f"{se:.2f}"] + [f"{mdd_at(se, n, c):.2f}" for c in args.candidates]
        print(" | ".join(cells))
    print(f"(mdd = {MDD_FACTOR:.3f} · SE; SE scaled by sqrt(n / candidate))")


if __name__ == "__main__":
    main()

"""Calibration-size study (beyond the paper, which never varies it): how stable and how good the
pruned sets are as the calibration grows.

Input: the aggregate summary of a study run with ``calibration_sizes`` and ``seeds`` (calibration
labels such as ``tlm_cs170k-n16``; seeds are ``seed<k>/`` folders, see ``depthprune.calibration.variants``). Per model, calibration,
size, M and algorithm, across seeds:

- ``jaccard_mean``: mean pairwise Jaccard of the removed sets of the seeds (1 = every seed removes the
  same blocks; the calibration sample, not the search, decides the set when it is low);
  ``jaccard_lo`` / ``_hi`` is its 95 % bootstrap interval over the draws (a draw never paired with
  its own copy);
- ``jaccard_random`` / ``jaccard_p_value``: the same statistic's expectation for as many uniform
  random sets of the same size drawn from the searches' candidates (``n_candidates``: the blocks less
  the protected ones; exact), the central 95 % range of that null (``jaccard_random_lo`` / ``_hi``,
  simulated) and the simulated permutation p-value of ``jaccard_mean`` against it (reporting/statistics/nulls.py);
- ``loss_mean`` / ``loss_std``: the calibration loss of the found set (docs/method.md §2; comparable
  across seeds of one size, not across objectives); ``heldout_loss_mean`` / ``_std`` / ``_min`` /
  ``_max``: the same objective on the fixed held-out draw (one draw for every size and seed, so
  comparable across sizes);
- ``avg_accuracy_mean`` / ``_std`` (six zero-shot tasks) and ``avg_perplexity_geomean`` (WikiText-2,
  C4, LAMBADA; geometric mean over seeds, since perplexities of pruned models span decades), with the
  spread over seeds (min–max); a study that evaluates only WikiText-2 reports its perplexity there
  instead (``perplexity_of``); and, from the per-document results, a 95 % paired-bootstrap interval
  over the evaluation documents of the same mean over seeds (``avg_accuracy_lo``/``_hi``,
  ``avg_perplexity_lo``/``_hi``; reporting/statistics/bootstrap.py, docs/method.md §7);
- ``acc_minus_ppl`` (TLM rows): that mean accuracy minus the perplexity calibration's at its largest
  size (``versus_ppl_size``; same model, M and algorithm), with its paired interval over the same
  documents (``acc_minus_ppl_lo`` / ``_hi``): the paper's §5.2 comparison at each TLM size.

A size is called *stable* for an algorithm when ``jaccard_mean`` >= ``STABLE_JACCARD`` (0.5): with
M = 7, two seeds then share at least 5 of the 7 removed blocks on average (5 shared: 5/9 = 0.56;
4 shared: 4/10 = 0.40), more agreement across calibration samples than the paper reports between
algorithms under one calibration for Qwen3 and TLM (§5.1: 0.36, 0.51). The default study takes, per
calibration, the smallest size stable for every algorithm within its time target, else the largest
that fits (docs/method.md §8).

Rendered as ``calibration_size.{pdf,png}`` and ``tables/calibration_size.{csv,md,tex}``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from depthprune.calibration.variants import parse_label
from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS
from depthprune.io import parse_layers
from depthprune.reporting.aggregate import calibration_kind
from depthprune.reporting.analysis.frames import depth_of
from depthprune.reporting.statistics.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, document_replicates, interval
from depthprune.reporting.statistics.nulls import agreement_null, draw_bootstrap_mean_jaccard, random_mean_jaccard_range
from depthprune.reporting.style import ordered_algorithms

NAME = "calibration_size"
STABLE_JACCARD = 0.5
GROUP = ["model", "calibration", "size", "budget", "algorithm"]


def jaccard(a: frozenset, b: frozenset) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def mean_pairwise_jaccard(sets) -> float:
    """Mean Jaccard over all pairs; NaN with fewer than two sets (stability needs two seeds)."""
    sets = [frozenset(s) for s in sets]
    pairs = list(itertools.combinations(sets, 2))
    return float(np.mean([jaccard(a, b) for a, b in pairs])) if pairs else math.nan


def _size_columns(label: str) -> dict:
    variant = parse_label(label)
    return {
        "calibration": variant.base,
        "size": variant.size_label,
        "n_samples": variant.n_samples,
        "seq_len": variant.seq_len,
        "variant_seed": variant.seed,
    }


def perplexity_source(summary: pd.DataFrame) -> str:
    """The perplexity the study reports: ``avg_perplexity`` (WikiText-2, C4, LAMBADA) when its pruned
    runs have it, else the one perplexity benchmark they all have (the v2 preset evaluates WikiText-2
    alone): the summary column's name."""
    pruned = summary[summary["calibration"].map(calibration_kind).isin(["tlm", "ppl"])]
    if "avg_perplexity" in pruned and pruned["avg_perplexity"].notna().any():
        return "avg_perplexity"
    for benchmark in PERPLEXITY_BENCHMARKS:
        column = f"ppl_{benchmark}"
        if column in pruned and pruned[column].notna().any():
            return column
    return "avg_perplexity"


def _mean_std(values: pd.Series) -> tuple[float, float]:
    values = pd.to_numeric(values, errors="coerce")
    return values.mean(), values.std(ddof=1) if values.notna().sum() > 1 else math.nan


def calibration_size_table(summary: pd.DataFrame, stable_jaccard: float = STABLE_JACCARD) -> pd.DataFrame:
    """One row per (model, calibration, size, M, algorithm) with the statistics across seeds; ``stable``
    says whether the seeds' mean pairwise Jaccard reaches ``stable_jaccard``."""
    pruned = summary[summary["calibration"].map(calibration_kind).isin(["tlm", "ppl"])].copy()
    if pruned.empty:
        return pd.DataFrame(columns=GROUP)
    perplexity = perplexity_source(summary)
    parts = pd.DataFrame([_size_columns(label) for label in pruned["calibration"]], index=pruned.index)
    pruned = pruned.drop(columns=["calibration"]).join(parts)
    # The seed of a run: its label's, else the one recorded in selection.json.
    if "seed" in pruned:
        pruned["run_seed"] = pruned["variant_seed"].fillna(pruned["seed"])
    else:
        pruned["run_seed"] = pruned["variant_seed"]
    rows = []
    for key, group in pruned.groupby(GROUP, sort=False, dropna=False):
        sets = [parse_layers(r) if isinstance(r, str) else () for r in group["removed"]]
        acc = pd.to_numeric(group.get("avg_accuracy"), errors="coerce")
        ppl = pd.to_numeric(group.get(perplexity), errors="coerce")
        log_ppl = np.log(ppl[ppl > 0])
        first = group.iloc[0]
        jaccard_mean = mean_pairwise_jaccard(sets)
        # Random sets are drawn from the searches' candidates: the blocks less the protected ones.
        candidates = depth_of(group.assign(layers=sets))
        size = len(sets[0]) if sets else 0
        # Both are NaN with fewer than two draws.
        expected, p_value = agreement_null(candidates, size, len(sets), jaccard_mean)
        null_lo, null_hi = random_mean_jaccard_range(candidates, size, len(sets))
        jaccard_lo, jaccard_hi = draw_bootstrap_mean_jaccard(sets)
        loss_mean, loss_std = _mean_std(group.get("loss"))
        heldout = pd.to_numeric(group["heldout_loss"], errors="coerce") if "heldout_loss" in group else None
        heldout_mean, heldout_std = _mean_std(heldout) if heldout is not None else (math.nan, math.nan)
        rows.append(
            dict(
                zip(GROUP, key),
                n_samples=first["n_samples"],
                seq_len=first["seq_len"],
                n_seeds=int(group["run_seed"].nunique(dropna=False)),
                distinct_sets=len({frozenset(s) for s in sets}),
                n_candidates=candidates,
                jaccard_mean=jaccard_mean,
                jaccard_lo=jaccard_lo,
                jaccard_hi=jaccard_hi,
                jaccard_random=expected,
                jaccard_random_lo=null_lo,
                jaccard_random_hi=null_hi,
                jaccard_p_value=p_value,
                loss_mean=loss_mean,
                loss_std=loss_std,
                heldout_loss_mean=heldout_mean,
                heldout_loss_std=heldout_std,
                heldout_loss_min=heldout.min() if heldout is not None else math.nan,
                heldout_loss_max=heldout.max() if heldout is not None else math.nan,
                calibration_accuracy_mean=pd.to_numeric(group.get("calibration_accuracy"), errors="coerce").mean(),
                heldout_accuracy_mean=pd.to_numeric(group.get("heldout_accuracy"), errors="coerce").mean()
                if "heldout_accuracy" in group
                else math.nan,
                avg_accuracy_mean=acc.mean(),
                avg_accuracy_std=acc.std(ddof=1) if acc.notna().sum() > 1 else math.nan,
                avg_accuracy_min=acc.min(),
                avg_accuracy_max=acc.max(),
                perplexity_of=perplexity.removeprefix("ppl_").removeprefix("avg_perplexity") or "average",
                avg_perplexity_geomean=float(np.exp(log_ppl.mean()))
                if len(log_ppl) and ppl.notna().all()
                else math.nan,
                avg_perplexity_min=ppl.min(),
                avg_perplexity_max=ppl.max(),
                removed_sets=" | ".join(" ".join(str(i) for i in sorted(s)) for s in sets),
            )
        )
    table = pd.DataFrame(rows)
    table["stable"] = table["jaccard_mean"].ge(stable_jaccard)  # NaN (one seed): not stable
    table["_order"] = table.apply(_size_order, axis=1)
    algorithms = ordered_algorithms(table["algorithm"].unique())
    table["_alg"] = table["algorithm"].map(algorithms.index)
    table = table.sort_values(["model", "calibration", "budget", "_alg", "_order"], kind="stable")
    return table.drop(columns=["_order", "_alg"]).reset_index(drop=True)


def add_bootstrap_intervals(
    table: pd.DataFrame, samples: pd.DataFrame | None, n_resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> pd.DataFrame:
    """95 % paired-bootstrap intervals (over evaluation documents) of each row's mean accuracy and
    geometric-mean perplexity over seeds, and each TLM row's accuracy difference to the perplexity
    calibration (``acc_minus_ppl``); the intervals are NaN without per-document results."""
    table = table.copy()
    for column in ("avg_accuracy_lo", "avg_accuracy_hi", "avg_perplexity_lo", "avg_perplexity_hi", *VERSUS_PPL):
        table[column] = math.nan
    table["versus_ppl_size"] = None
    if samples is None or samples.empty or table.empty or "seed" not in samples:
        return _versus_perplexity_calibration(table, {})
    # One bootstrap run per (calibration, seed): the seed joins the calibration label of the run key.
    runs = samples.assign(calibration=samples["calibration"] + "#" + samples["seed"].astype(str))
    replicates = document_replicates(runs, n_resamples, seed)
    if replicates is None:
        return _versus_perplexity_calibration(table, {})
    keys = replicates.keys
    pruned = keys["calibration"].str.split("#").str[0].map(calibration_kind).isin(["tlm", "ppl"])
    sizes = pd.DataFrame(
        [_size_columns(c.split("#")[0]) if p else {} for c, p in zip(keys["calibration"], pruned)], index=keys.index
    )
    accuracy_replicates = {}  # table index -> the mean over seeds' accuracy, per document resample
    for index, row in table.iterrows():
        columns = np.flatnonzero(
            (keys["model"] == row["model"]).to_numpy()
            & (sizes.get("calibration") == row["calibration"]).to_numpy()
            & (sizes.get("size") == row["size"]).to_numpy()
            & (keys["budget"] == row["budget"]).to_numpy()
            & (keys["algorithm"] == row["algorithm"]).to_numpy()
        )
        if not len(columns):
            continue
        accuracy = accuracy_replicates[index] = replicates.avg_accuracy[:, columns].mean(axis=1)
        source = row.get("perplexity_of", "average")
        per_run = (
            replicates.avg_perplexity
            if source == "average"
            else (replicates.per_benchmark or {}).get(source, np.full_like(replicates.avg_perplexity, np.nan))
        )
        perplexity = np.exp(np.log(per_run[:, columns]).mean(axis=1))
        table.loc[index, ["avg_accuracy_lo", "avg_accuracy_hi"]] = interval(accuracy)
        table.loc[index, ["avg_perplexity_lo", "avg_perplexity_hi"]] = interval(perplexity)
    return _versus_perplexity_calibration(table, accuracy_replicates)


# A TLM size's mean accuracy minus the perplexity calibration's at its largest size (same model, M and
# algorithm), with the paired 95 % interval: both are evaluated on the same documents, so one resample
# of the documents moves both (docs/method.md section 8).
VERSUS_PPL = ("acc_minus_ppl", "acc_minus_ppl_lo", "acc_minus_ppl_hi")


def _versus_perplexity_calibration(table: pd.DataFrame, accuracy_replicates: dict) -> pd.DataFrame:
    kinds = table["calibration"].map(calibration_kind)
    order = table.apply(_size_order, axis=1)
    for index, row in table[kinds == "tlm"].iterrows():
        same = (
            (kinds == "ppl")
            & (table["model"] == row["model"])
            & (table["budget"] == row["budget"])
            & (table["algorithm"] == row["algorithm"])
        )
        if not same.any():
            continue
        reference = order[same].idxmax()
        table.loc[index, "versus_ppl_size"] = table.loc[reference, "size"]
        table.loc[index, "acc_minus_ppl"] = row["avg_accuracy_mean"] - table.loc[reference, "avg_accuracy_mean"]
        if index in accuracy_replicates and reference in accuracy_replicates:
            difference = accuracy_replicates[index] - accuracy_replicates[reference]
            table.loc[index, ["acc_minus_ppl_lo", "acc_minus_ppl_hi"]] = interval(difference)
    return table


def _size_order(row) -> float:
    """Sizes in order of calibration tokens (documents x length; TLM: items)."""
    if row["n_samples"] is None or pd.isna(row["n_samples"]):
        return math.inf
    return float(row["n_samples"]) * (float(row["seq_len"]) if pd.notna(row["seq_len"]) else 1.0)

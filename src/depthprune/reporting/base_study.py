"""Reuse a committed study's runs: merge the rows of some of its calibrations into a new aggregate.

A study that adds a calibration or seeds to a committed one (config ``base_study``; the
cross-control study of docs/method.md §9 adds ``ppl_cs170k`` to the default study) computes only
its own runs and the dense model. Its aggregate then takes the base study's selections, metrics and
per-document scores of the named calibrations (at the named seeds, default the study's own) from
the base's aggregate folder, so every comparison stays paired over the same documents without
recomputing what is committed.

The base rows are taken only where they are comparable with the study's own, else refused with an
error naming the base folder and what differs:

- the base holds every requested (calibration, seed) for every model of the study, and the study
  computes none of them itself;
- the searches ran at the same precision (``dtype``), on the same depth and search space
  (``n_layers``, ``protected``);
- both dense models were evaluated on exactly the same documents of every benchmark (the samples'
  ``unit`` ids), and agree there: the same answer on all but ``MAX_ANSWER_CHANGES`` of the
  documents' answers (accuracy 0/1), and perplexity units within ``MAX_PERPLEXITY_REL`` (a float32 forward pass on
  another CPU kind differs in the last digits, not more).

The check's numbers (documents compared, answers that differ, the largest perplexity difference)
are returned, logged, and written as ``base_study.json`` next to the aggregate.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from depthprune.errors import InputError
from depthprune.io import atomic_write_json
from depthprune.reporting.aggregate import (
    DENSE_ALGORITHM,
    PROTECTED_COLUMN,
    RUN_KEY,
    SAMPLES,
    Aggregate,
    build_summary,
    concat_runs,
    load_aggregate,
    load_samples,
)

log = logging.getLogger(__name__)

BASE_STUDY_RECORD = "base_study.json"
BASE = "the base study"  # names the base in concat_runs' error
# The dense model is re-evaluated by the study and compared with the base's, document by document.
# Beyond these the two evaluations are not the same computation and the base rows are refused.
MAX_ANSWER_CHANGES = 0.01  # fraction of zero-shot documents whose 0/1 score differs
MAX_PERPLEXITY_REL = 1e-3  # relative difference of a perplexity unit's value (NLL sum, log-likelihood)
ANSWER_METRICS = ("acc", "acc_norm")  # a document's 0/1 score
PERPLEXITY_METRICS = ("nll_sum", "n_tokens", "perplexity")  # a window's NLL and tokens, LAMBADA's log-likelihood


@dataclass(frozen=True)
class DenseAgreement:
    """How the study's dense evaluation compares with the base's, on the same documents."""

    base: str
    calibrations: tuple[str, ...]
    seeds: tuple[int, ...]
    answered_documents: int
    answers_differ: int
    perplexity_units: int
    max_perplexity_rel_diff: float


def merge_base_study(
    agg: Aggregate,
    samples: pd.DataFrame,
    base_dir: str | Path,
    calibrations: Sequence[str],
    seeds: Sequence[int] | None = None,
) -> tuple[Aggregate, pd.DataFrame, DenseAgreement]:
    """The study's aggregate and per-document scores with the base study's runs of ``calibrations``
    at ``seeds`` (default: the study's own seeds). A study may reuse other calibrations at its own
    seeds (the cross-control study) or its own calibrations at other seeds (a multi-seed study that
    reuses the committed seed 0); never a (calibration, seed) it computes itself.

    Raises ValueError naming ``base_dir`` when the base rows are not comparable (module docstring).
    """
    base_dir = Path(base_dir)
    where = f"base_study.aggregate {base_dir}"
    calibrations = list(dict.fromkeys(calibrations))
    if not calibrations:
        raise InputError(f"{where}: base_study.calibrations is empty")
    base = load_aggregate(base_dir)
    samples_path = base_dir / f"{SAMPLES}.parquet"
    if not samples_path.is_file():
        raise FileNotFoundError(f"{samples_path}: the base study's per-document scores are missing")
    base_samples = load_samples(base_dir)

    own_seeds = sorted(int(s) for s in set(agg.selections["seed"])) or [0]
    seeds = sorted({int(s) for s in seeds}) if seeds is not None else own_seeds
    own_runs = set(zip(agg.selections["calibration"], agg.selections["seed"]))
    clash = sorted({f"{c} seed {s}" for c in calibrations for s in seeds if (c, s) in own_runs})
    if clash:
        raise InputError(f"{where}: this study computes {', '.join(clash)} itself; leave it out of base_study")
    models = sorted(set(agg.selections["model"]) | set(agg.metrics["model"]))
    picked = base.selections[base.selections["calibration"].isin(calibrations)]
    for calibration in calibrations:
        for model in models:
            have = set(picked.loc[(picked["calibration"] == calibration) & (picked["model"] == model), "seed"])
            missing = [s for s in seeds if s not in have]
            if missing:
                raise InputError(
                    f"{where}: holds no {calibration} runs of model {model} at seed(s) {', '.join(map(str, missing))}"
                )
    picked = picked[picked["model"].isin(models) & picked["seed"].isin(seeds)]
    check_same(picked, agg.selections, "dtype", where)
    check_same(picked, agg.selections, "n_layers", where)
    if PROTECTED_COLUMN in picked or PROTECTED_COLUMN in agg.selections:
        check_same(picked, agg.selections, PROTECTED_COLUMN, where)

    runs = picked[RUN_KEY].drop_duplicates()
    # The dense model is evaluated once per model and repeated per seed by the aggregate: a base seed
    # the study does not run brings the base's dense rows of that seed along.
    new_seeds = [s for s in seeds if s not in own_seeds]
    dense_runs = base.metrics[(base.metrics["algorithm"] == DENSE_ALGORITHM) & base.metrics["model"].isin(models)]
    dense_runs = dense_runs[dense_runs["seed"].isin(new_seeds)][RUN_KEY].drop_duplicates()
    runs = pd.concat([runs, dense_runs], ignore_index=True)
    base_metrics = base.metrics.merge(runs, on=RUN_KEY)
    base_runs_samples = base_samples.merge(runs, on=RUN_KEY)
    agreement = dense_agreement(samples, base_samples, models, own_seeds, seeds, base_dir, tuple(calibrations))

    selections = concat_runs(agg.selections, picked, RUN_KEY, BASE)
    metrics = concat_runs(agg.metrics, base_metrics, RUN_KEY + ["benchmark", "metric"], BASE)
    merged_samples = concat_runs(samples, base_runs_samples, RUN_KEY + ["benchmark", "unit", "metric"], BASE)
    summary = build_summary(selections, metrics)
    log.info(
        "base study %s: %d selections of %s at seed(s) %s; dense answers differ on %d of %d documents, "
        "largest perplexity difference %.2e (relative)",
        base_dir,
        len(picked),
        ", ".join(calibrations),
        ", ".join(map(str, seeds)),
        agreement.answers_differ,
        agreement.answered_documents,
        agreement.max_perplexity_rel_diff,
    )
    return Aggregate(selections=selections, metrics=metrics, summary=summary), merged_samples, agreement


def write_agreement(agreement: DenseAgreement, out_dir: str | Path) -> Path:
    path = Path(out_dir) / BASE_STUDY_RECORD
    atomic_write_json(path, asdict(agreement))
    return path


def check_same(base: pd.DataFrame, own: pd.DataFrame, column: str, where: str) -> None:
    values_base = set(base[column].astype(str)) if column in base else {"not recorded"}
    values_own = set(own[column].astype(str)) if column in own else {"not recorded"}
    if own.empty:
        return
    if values_base != values_own:
        raise InputError(
            f"{where}: its runs have {column} {sorted(values_base)}, this study's {sorted(values_own)}; "
            "their numbers are not comparable"
        )


def dense_agreement(
    own: pd.DataFrame,
    base: pd.DataFrame,
    models: list[str],
    own_seeds: list[int],
    base_seeds: list[int],
    base_dir: Path,
    calibrations,
) -> DenseAgreement:
    """Compare the two dense evaluations document by document (same units, same answers)."""
    where = f"base_study.aggregate {base_dir}"
    key = ["model", "benchmark", "unit", "metric"]

    def dense(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
        rows = frame[(frame["algorithm"] == DENSE_ALGORITHM) & frame["model"].isin(models)]
        rows = rows[rows["seed"] == seed] if "seed" in rows else rows
        return rows[key + ["value"]]

    mine, theirs = dense(own, own_seeds[0]), dense(base, base_seeds[0])
    if mine.empty:
        raise InputError(f"{where}: this study has no per-document dense results to compare with the base's")
    for (model, benchmark), group in mine.groupby(["model", "benchmark"], sort=True):
        other = theirs[(theirs["model"] == model) & (theirs["benchmark"] == benchmark)]
        if set(group["unit"]) != set(other["unit"]):
            raise InputError(
                f"{where}: the dense {model} was evaluated on other {benchmark} documents there "
                f"({other['unit'].nunique()} against {group['unit'].nunique()} here; evaluation.limit and "
                "evaluation.tasks must match the base study's)"
            )
    joined = mine.merge(theirs, on=key, suffixes=("", "_base"), how="outer", indicator=True)
    extra = joined[joined["_merge"] != "both"]
    if not extra.empty:
        row = extra.iloc[0]
        raise InputError(
            f"{where}: the dense {row['model']} has {row['benchmark']} {row['metric']} scores on one side only"
        )
    accuracy = joined[joined["metric"].isin(ANSWER_METRICS)]
    differ = int((accuracy["value"] != accuracy["value_base"]).sum())
    perplexity = joined[joined["metric"].isin(PERPLEXITY_METRICS)]
    rel = (perplexity["value"] - perplexity["value_base"]).abs() / perplexity["value_base"].abs().clip(lower=1e-12)
    max_rel = float(rel.max()) if len(rel) else 0.0
    agreement = DenseAgreement(
        base=str(base_dir),
        calibrations=calibrations,
        seeds=tuple(base_seeds),
        answered_documents=len(accuracy),
        answers_differ=differ,
        perplexity_units=len(perplexity),
        max_perplexity_rel_diff=max_rel,
    )
    if len(accuracy) and differ > MAX_ANSWER_CHANGES * len(accuracy):
        raise InputError(
            f"{where}: the dense model answers {differ} of {len(accuracy)} documents differently there "
            f"(more than {MAX_ANSWER_CHANGES:.0%}): not the same model or evaluation"
        )
    if not np.isfinite(max_rel) or max_rel > MAX_PERPLEXITY_REL:
        raise InputError(
            f"{where}: the dense model's perplexity units differ by up to {max_rel:.2e} (relative) there, "
            f"more than {MAX_PERPLEXITY_REL:g}: not the same model or evaluation"
        )
    return agreement

"""Render every figure, table and analysis from ``results/aggregate/`` into an output folder.

Layout under ``out_dir``: ``figure{1,2,3}.{pdf,png}``; ``tables/table{1..5}[_<model>].{csv,md,tex}``;
``tables/`` analyses (``jaccard_pairs.csv``, ``jaccard_summary.csv``, ``spearman.csv``,
``variance_decomposition.csv``, ``range_statistic.csv``, ``calibration_contrast.csv``: TLM- against
perplexity-pruned models and chance, ``loss_accuracy.csv``: ρ(search loss, accuracy),
``evaluation_size.csv``: the power rule of ``reporting/statistics/power.py``; ``informative_tasks.csv``,
``calibration_contrast_informative.csv`` and ``loss_accuracy_informative.csv``: the
informative-task sensitivity of reporting/statistics/informative.py; with the cross-control
``ppl_cs170k``, ``calibration_decomposition{,_sets}.csv`` and ``decomposition.{pdf,png}``:
reporting/verdicts/decomposition.py),
``tables/observations.{md,csv}`` and
``tables/paper_comparison.{md,csv}``. Intervals come from the paired document bootstrap over
``results/aggregate/samples.parquet`` (``reporting/statistics/bootstrap.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path

from depthprune.errors import InputError
from depthprune.evaluation_only import is_random_set
from depthprune.io import atomic_write_report_csv, atomic_write_text
from depthprune.reporting.aggregate import load_aggregate, load_samples
from depthprune.reporting.analysis.agreement import jaccard_summary, pairwise_jaccard
from depthprune.reporting.analysis.contrast import calibration_contrast
from depthprune.reporting.analysis.correlation import loss_accuracy_table, spearman_table
from depthprune.reporting.analysis.frames import with_intervals
from depthprune.reporting.analysis.spread import range_statistic, variance_decomposition
from depthprune.reporting.figures.figure1 import figure1
from depthprune.reporting.figures.figure2 import figure2
from depthprune.reporting.figures.figure3 import figure3
from depthprune.reporting.figures.figure_decomposition import figure_decomposition
from depthprune.reporting.figures.figure_seeds import figure_seeds
from depthprune.reporting.statistics.baselines import average_baseline, task_baselines
from depthprune.reporting.statistics.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, document_replicates
from depthprune.reporting.statistics.distinct import distinct_spearman_table
from depthprune.reporting.statistics.informative import (
    contrast_pairs,
    find_informative_tasks,
    informative_view,
    with_informative_average,
)
from depthprune.reporting.statistics.power import evaluation_size, evaluation_size_markdown
from depthprune.reporting.style import is_control
from depthprune.reporting.tables.paper_tables import TABLE_NAMES, build_tables, write_tables
from depthprune.reporting.verdicts.across_seeds import (
    across_seeds_noise,
    decision_markdown,
    decision_table,
    rho_cells,
    sets_across_seeds,
    two_stage_table,
)
from depthprune.reporting.verdicts.alignment import DEFAULT_STRONG_RHO
from depthprune.reporting.verdicts.controls import control_comparison, prior_artifact_answer
from depthprune.reporting.verdicts.decomposition import decomposition_table, has_cross_control, set_decomposition_table
from depthprune.reporting.verdicts.observations import (
    evaluate_observations,
    loss_accuracy_markdown,
    observations_frame,
    observations_markdown,
    paper_comparison,
    paper_comparison_markdown,
)
from depthprune.reporting.verdicts.seeds import for_seed, seed_spread, seeds_of, set_stability, verdicts_by_seed
from depthprune.reporting.verdicts.variance import DEFAULT_COMPARABLE_BAND

log = logging.getLogger(__name__)

FIGURE_NAMES = ("figure1", "figure2", "figure3")
ARTIFACTS = FIGURE_NAMES + TABLE_NAMES + ("analyses", "observations")


def parse_only(text: str | None) -> set[str] | None:
    """``"figure1,table3"`` -> {"figure1", "table3"}; None/"" -> everything."""
    if not text:
        return None
    names = {part.strip() for part in text.split(",") if part.strip()}
    unknown = sorted(names - set(ARTIFACTS))
    if unknown:
        raise InputError(f"--only: unknown output(s) {', '.join(unknown)}; choose from {', '.join(ARTIFACTS)}")
    return names


def seeds_markdown(primary: int, verdicts, stability) -> str:
    """The "Across seeds" section of observations.md."""
    lines = [
        "",
        "## Across seeds",
        "",
        f"Tables, figures and the rows above are seed {primary}. Verdict of each claim per seed, "
        "and whether it holds in every seed (tables/seeds_verdicts.csv):",
        "",
        "| claim | " + " | ".join(verdicts["seed"].drop_duplicates()) + " |",
        "| --- | " + " | ".join("---" for _ in verdicts["seed"].drop_duplicates()) + " |",
    ]
    for claim, group in verdicts.groupby("claim", sort=True):
        lines.append(f"| §{claim} | " + " | ".join(group["verdict"]) + " |")
    if not stability.empty:
        mean = stability["mean_jaccard_across_seeds"].mean()
        lines += [
            "",
            f"Set stability: mean Jaccard of one algorithm's sets across seeds {mean:.2f} "
            "(per algorithm: tables/seeds_set_stability.csv; spread of losses and averages: "
            "tables/seeds_spread.csv).",
        ]
    return "\n".join(lines) + "\n"


def evaluation_limit(reps) -> int | None:
    """Documents per zero-shot task in the per-document results (the study's ``evaluation.limit``)."""
    from depthprune.evaluation.benchmarks import ZERO_SHOT_BENCHMARKS

    if reps is None or not reps.units:
        return None
    counts = [reps.units[b] for b in ZERO_SHOT_BENCHMARKS if b in reps.units]
    return int(min(counts)) if counts else None


def informative_contrast(summary, reps, informative, baselines):
    """calibration_contrast on the informative-task average, per model (each model has its own
    tasks, chance and baseline); empty when no model has an informative task."""
    import pandas as pd

    frames = [
        calibration_contrast(
            summary[summary["model"] == model],
            reps,
            informative.baseline(baselines, model),
            informative.chance(model),
        )
        for model, tasks in informative.tasks.items()
        if tasks
    ]
    return pd.concat(frames, ignore_index=True) if frames else calibration_contrast(summary.iloc[:0], reps)


def paper_only(frame):
    """Rows of the paper's seven algorithms (and the dense model), without the controls (the
    random-set control's draws among them)."""
    return frame[~frame["algorithm"].map(is_control).astype(bool)]


def render(
    aggregate_dir: str | Path,
    out_dir: str | Path,
    only: Iterable[str] | None = None,
    bootstrap_resamples: int = DEFAULT_RESAMPLES,
    bootstrap_seed: int = DEFAULT_SEED,
    comparable_band: float = DEFAULT_COMPARABLE_BAND,
    strong_rho: float = DEFAULT_STRONG_RHO,
    seeds_planned: int | None = None,
) -> list[Path]:
    """Write the requested outputs (all by default); return the files written."""
    wanted = set(ARTIFACTS) if only is None else set(only)
    start = time.perf_counter()
    # The metrics table is not drawn from, but is validated with the others (a cut file is refused).
    agg = load_aggregate(aggregate_dir, tables=("selections", "summary"))
    all_samples = load_samples(aggregate_dir)
    seeds = seeds_of(agg.summary)
    # Figures and Tables 1-6 show the first seed; with several seeds, tables/seeds_*.csv and the
    # "Across seeds" section of observations.md give the spread and each seed's verdicts.
    primary = seeds[0]
    all_selections, all_base = for_seed(agg.selections, primary), for_seed(agg.summary, primary)
    # The paper's claims (Tables 5-6, Jaccard, rho, variance, observations) are about its seven
    # algorithms: the random-init controls and the exhaustive optimum get rows in Tables 1-4 and the
    # figures, and their own comparison (tables/controls.csv), but never enter those statistics.
    selections, base = paper_only(all_selections), paper_only(all_base)
    samples = for_seed(all_samples, primary) if all_samples is not None else None
    reps = document_replicates(samples, bootstrap_resamples, bootstrap_seed)
    summary = with_intervals(all_base, reps)
    out = Path(out_dir)
    tables_dir = out / "tables"
    written: list[Path] = []
    spearman = spearman_table(base, reps)
    replicates_by_seed = {primary: reps}

    def seed_replicates(seed: int):
        """The paired document replicates of one seed's runs (computed once per seed)."""
        if seed not in replicates_by_seed:
            seed_samples = for_seed(all_samples, seed) if all_samples is not None else None
            replicates_by_seed[seed] = document_replicates(seed_samples, bootstrap_resamples, bootstrap_seed)
        return replicates_by_seed[seed]

    cross_seed: dict = {}

    def across_seeds_tables():
        """The §10 statistics across seeds (computed once): the two-stage table, ρ per (M, seed) cell
        and §5.1's within − across per seed."""
        if not cross_seed:
            summaries = {s: paper_only(for_seed(agg.summary, s)) for s in seeds}
            seed_reps = {s: seed_replicates(s) for s in seeds}
            seed_samples = {s: for_seed(all_samples, s) if all_samples is not None else None for s in seeds}
            cross_seed["noise"] = across_seeds_noise(summaries, seed_reps, seed_samples, comparable_band)
            cross_seed["two_stage"] = two_stage_table(summaries, seed_reps, comparable_band, cross_seed["noise"])
            cross_seed["rho"] = rho_cells(summaries, seed_reps)
            cross_seed["sets"] = sets_across_seeds({s: paper_only(for_seed(agg.selections, s)) for s in seeds})
        return cross_seed

    if "figure1" in wanted:
        # every seed: shade = how often a layer was removed (the random sets' draws are not cuts a search chose)
        written += figure1(agg.selections[~agg.selections["algorithm"].map(is_random_set).astype(bool)], out)
    if "figure2" in wanted:
        written += figure2(summary, out)
    if "figure3" in wanted:
        written += figure3(base, spearman, out)
    table_names = wanted & set(TABLE_NAMES)
    if table_names:
        written += write_tables(build_tables(summary, selections, only=table_names), tables_dir)
    baselines = task_baselines(samples)
    # Informative-task sensitivity (docs/method.md §7): the tasks the dense model beats its baseline
    # on, and every accuracy statistic recomputed on the mean over them.
    informative = find_informative_tasks(all_base, reps, baselines)
    informative_base, informative_reps = informative_view(base, reps, informative)
    contrast = (
        calibration_contrast(base, reps, average_baseline(baselines)) if wanted & {"analyses", "observations"} else None
    )
    loss_accuracy = loss_accuracy_table(base, reps) if wanted & {"analyses", "observations"} else None
    if "analyses" in wanted:
        pairs = pairwise_jaccard(selections)
        analyses = {
            "jaccard_pairs": pairs,
            "jaccard_summary": jaccard_summary(pairs),
            "spearman": spearman,
            "spearman_distinct": distinct_spearman_table(base),
            "baselines": baselines,
            "variance_decomposition": variance_decomposition(base, reps),
            "range_statistic": range_statistic(base, reps),
            "controls": control_comparison(all_selections),
            "calibration_contrast": contrast,
            "loss_accuracy": loss_accuracy,
            "informative_tasks": informative.table,
            "calibration_contrast_informative": informative_contrast(
                informative_base, informative_reps, informative, baselines
            ),
            "loss_accuracy_informative": loss_accuracy_table(informative_base, informative_reps),
            "evaluation_size": evaluation_size(contrast, evaluation_limit(reps)),
        }
        if has_cross_control(base):
            # Objective or data (docs/method.md §9): only a study that ran the cross-control ppl_cs170k.
            decomposition = decomposition_table(*with_informative_average(base, reps, informative))
            analyses["calibration_decomposition"] = decomposition
            analyses["calibration_decomposition_sets"] = set_decomposition_table(selections)
            written += figure_decomposition(decomposition, out)
        if len(seeds) > 1:
            analyses["seeds_spread"] = seed_spread(agg.summary)
            analyses["seeds_set_stability"] = set_stability(agg.selections)
            # Across seeds (docs/method.md §10): each seed's estimate with its document interval and
            # the two-stage interval (seeds, then documents within each seed).
            analyses["seeds_two_stage"] = across_seeds_tables()["two_stage"]
            written += figure_seeds(analyses["seeds_two_stage"], out)
        for name, frame in analyses.items():
            path = tables_dir / f"{name}.csv"
            atomic_write_report_csv(path, frame)
            written.append(path)
    if "observations" in wanted:
        seed_selections = [paper_only(for_seed(agg.selections, seed)) for seed in seeds] if len(seeds) > 1 else []
        observations = evaluate_observations(
            selections,
            base,
            reps,
            comparable_band,
            strong_rho,
            seed_selections,
            samples=samples,
            informative=informative,
        )
        if "analyses" not in wanted:
            analyses_contrast = informative_contrast(informative_base, informative_reps, informative, baselines)
        else:
            analyses_contrast = analyses["calibration_contrast_informative"]
        observations.sensitivity += contrast_pairs(contrast, analyses_contrast)
        text = observations_markdown(observations)
        text += (
            "\n## Random-initialisation controls (the paper's limitation 2)\n\n"
            + prior_artifact_answer(all_selections)
            + "\n"
        )
        text += loss_accuracy_markdown(loss_accuracy)
        text += evaluation_size_markdown(evaluation_size(contrast, evaluation_limit(reps)))
        if len(seeds) > 1:
            by_seed = {primary: observations}
            for seed in seeds[1:]:
                by_seed[seed] = evaluate_observations(
                    paper_only(for_seed(agg.selections, seed)),
                    paper_only(for_seed(agg.summary, seed)),
                    seed_replicates(seed),
                    comparable_band,
                    strong_rho,
                    samples=for_seed(all_samples, seed) if all_samples is not None else None,
                )
            verdicts = verdicts_by_seed({seed: seen.verdicts for seed, seen in by_seed.items()})
            atomic_write_report_csv(tables_dir / "seeds_verdicts.csv", verdicts)
            written.append(tables_dir / "seeds_verdicts.csv")
            text += seeds_markdown(primary, verdicts, set_stability(agg.selections))
            # The cross-seed decision rule (docs/method.md §10), each seed's verdict beside it.
            tables = across_seeds_tables()
            claims = decision_table(
                tables["two_stage"],
                tables["rho"],
                tables["sets"],
                verdicts,
                strong_rho,
                noise=tables["noise"],
            )
            atomic_write_report_csv(tables_dir / "seeds_claims.csv", claims)
            written.append(tables_dir / "seeds_claims.csv")
            text += decision_markdown(claims, len(seeds), seeds_planned)
        atomic_write_text(tables_dir / "observations.md", text)
        atomic_write_report_csv(tables_dir / "observations.csv", observations_frame(observations))
        atomic_write_text(tables_dir / "paper_comparison.md", paper_comparison_markdown(observations))
        atomic_write_report_csv(tables_dir / "paper_comparison.csv", paper_comparison(observations))
        written += [
            tables_dir / f"{name}.{ext}" for name in ("observations", "paper_comparison") for ext in ("md", "csv")
        ]
    log.info("render: %d files in %s (%.1f s)", len(written), out, time.perf_counter() - start)
    return written

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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from depthprune.environment import RENDER_PACKAGES, warn_drift, write_record
from depthprune.errors import InputError
from depthprune.evaluation_only import is_random_set
from depthprune.io import atomic_write_report_csv, atomic_write_text
from depthprune.reporting.aggregate import Aggregate, evaluated_accuracy_tasks, load_aggregate, load_samples
from depthprune.reporting.analysis import random_control
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
from depthprune.reporting.statistics.baselines import average_baseline, average_chance, task_baselines
from depthprune.reporting.statistics.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED, document_replicates
from depthprune.reporting.statistics.distinct import distinct_spearman_table
from depthprune.reporting.statistics.floor import floor_markdown, floor_tests
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
    informative_across_seeds,
    rho_cells,
    sets_across_seeds,
    two_stage_table,
)
from depthprune.reporting.verdicts.across_seeds_variance import (
    draw_agreement,
    draw_stability_rows,
    variance_component_rows,
)
from depthprune.reporting.verdicts.alignment import DEFAULT_STRONG_RHO
from depthprune.reporting.verdicts.controls import control_comparison, prior_artifact_answer
from depthprune.reporting.verdicts.decomposition import decomposition_table, has_cross_control, set_decomposition_table
from depthprune.reporting.verdicts.failed_sensitivity import failed_algorithms, without_algorithms
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
    if not names:
        raise InputError(
            f"--only {text!r}: names no output; leave --only out to render everything, or name some of "
            f"{', '.join(ARTIFACTS)}"
        )
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


@dataclass
class RenderJob:
    """One render: the study loaded once, the settings, and what the steps have computed and written.

    Figures and Tables 1-6 show the first seed (``primary``); with several seeds, tables/seeds_*.csv
    and the "Across seeds" section of observations.md give the spread and each seed's verdicts. The
    paper's claims (Tables 5-6, Jaccard, rho, variance, observations) are about its seven algorithms
    (``selections``, ``base``): the random-init controls and the exhaustive optimum get rows in
    Tables 1-4 and the figures (``all_selections``, ``all_base``), and their own comparison
    (tables/controls.csv), but never enter those statistics.
    """

    agg: object
    all_samples: object
    seeds: list[int]
    wanted: set[str]
    out: Path
    bootstrap_resamples: int
    bootstrap_seed: int
    comparable_band: float
    strong_rho: float
    seeds_planned: int | None
    preface: str = ""  # observations.md's first lines (what a sensitivity render left out)
    written: list[Path] = field(default_factory=list)
    # Filled by the steps, in STEPS order.
    baselines: object = None
    informative: object = None
    informative_base: object = None
    informative_reps: object = None
    contrast: object = None
    loss_accuracy: object = None
    analyses: dict = field(default_factory=dict)
    observations: object = None
    observations_text: str = ""
    random_control_text: str = ""
    _replicates_by_seed: dict = field(default_factory=dict)
    _cross_seed: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.primary = self.seeds[0]
        self.all_selections = for_seed(self.agg.selections, self.primary)
        self.all_base = for_seed(self.agg.summary, self.primary)
        self.selections, self.base = paper_only(self.all_selections), paper_only(self.all_base)
        self.samples = self.seed_samples(self.primary)
        self.reps = self.seed_replicates(self.primary)
        self.summary = with_intervals(self.all_base, self.reps)
        self.spearman = spearman_table(self.base, self.reps)

    @property
    def tables_dir(self) -> Path:
        return self.out / "tables"

    @property
    def several_seeds(self) -> bool:
        return len(self.seeds) > 1

    def seed_samples(self, seed: int):
        """One seed's per-document samples (None when the aggregate has none)."""
        return for_seed(self.all_samples, seed) if self.all_samples is not None else None

    def seed_replicates(self, seed: int):
        """The paired document replicates of one seed's runs (computed once per seed)."""
        if seed not in self._replicates_by_seed:
            self._replicates_by_seed[seed] = document_replicates(
                self.seed_samples(seed), self.bootstrap_resamples, self.bootstrap_seed
            )
        return self._replicates_by_seed[seed]

    def across_seeds_tables(self) -> dict:
        """The §10 statistics across seeds (computed once): the two-stage table, ρ per (M, seed) cell
        and §5.1's within − across per seed."""
        if not self._cross_seed:
            agg, seeds = self.agg, self.seeds
            summaries = {s: paper_only(for_seed(agg.summary, s)) for s in seeds}
            seed_reps = {s: self.seed_replicates(s) for s in seeds}
            seed_samples = {s: self.seed_samples(s) for s in seeds}
            selections = {s: paper_only(for_seed(agg.selections, s)) for s in seeds}
            noise = across_seeds_noise(summaries, seed_reps, seed_samples, self.comparable_band, self.strong_rho)
            self._cross_seed["noise"] = noise
            self._cross_seed["two_stage"] = two_stage_table(summaries, seed_reps, self.comparable_band, noise)
            self._cross_seed["rho"] = rho_cells(summaries, seed_reps)
            self._cross_seed["sets"] = sets_across_seeds(selections)
            # The secondary analysis (docs/method.md §10): every accuracy statistic on the informative tasks.
            self._cross_seed["informative"] = informative_across_seeds(
                summaries, seed_reps, seed_samples, self.informative, self.comparable_band, self.strong_rho
            )
            # §5.2's variance components and §5.1's draw stability (docs/method.md §10, issue 57).
            self._cross_seed["extra_rows"] = variance_component_rows(
                summaries, self.comparable_band, reps=seed_reps
            ) + draw_stability_rows(draw_agreement(selections))
        return self._cross_seed

    def write_csv(self, name: str, frame) -> None:
        path = self.tables_dir / f"{name}.csv"
        atomic_write_report_csv(path, frame)
        self.written.append(path)

    def write_text(self, name: str, text: str) -> None:
        path = self.tables_dir / name
        atomic_write_text(path, text)
        self.written.append(path)


def draw_figure1(job: RenderJob) -> None:
    # every seed: shade = how often a layer was removed (the random sets' draws are not cuts a search chose)
    selections = job.agg.selections
    job.written += figure1(selections[~selections["algorithm"].map(is_random_set).astype(bool)], job.out)


def draw_figure2(job: RenderJob) -> None:
    job.written += figure2(job.summary, job.out)


def draw_figure3(job: RenderJob) -> None:
    job.written += figure3(job.base, job.spearman, job.out)


def write_paper_tables(job: RenderJob) -> None:
    """Tables 1-6 (those asked for)."""
    names = job.wanted & set(TABLE_NAMES)
    job.written += write_tables(build_tables(job.summary, job.selections, only=names), job.tables_dir)


def find_baselines(job: RenderJob) -> None:
    """Each task's baseline, and the informative-task sensitivity (docs/method.md §7): the tasks the
    dense model beats its baseline on, and every accuracy statistic recomputed on the mean over them."""
    job.baselines = task_baselines(job.samples)
    job.informative = find_informative_tasks(job.all_base, job.reps, job.baselines)
    job.informative_base, job.informative_reps = informative_view(job.base, job.reps, job.informative)


def contrast_calibrations(job: RenderJob) -> None:
    """TLM- against perplexity-pruned models and the baseline, and ρ(search loss, accuracy)."""
    tasks = evaluated_accuracy_tasks(job.base)  # all six, or an evaluation-only study's own (§11)
    baseline, chance = average_baseline(job.baselines, tasks), average_chance(tasks)
    job.contrast = calibration_contrast(job.base, job.reps, baseline, chance=chance)
    job.loss_accuracy = loss_accuracy_table(job.base, job.reps)


def paper_analyses(job: RenderJob) -> None:
    """The analyses of the paper's claims on the primary seed (tables/<name>.csv, written later)."""
    base, reps = job.base, job.reps
    pairs = pairwise_jaccard(job.selections)
    job.analyses.update(
        {
            "jaccard_pairs": pairs,
            "jaccard_summary": jaccard_summary(pairs),
            "spearman": job.spearman,
            "spearman_distinct": distinct_spearman_table(base),
            "baselines": job.baselines,
            "variance_decomposition": variance_decomposition(base, reps),
            "range_statistic": range_statistic(base, reps),
            "controls": control_comparison(job.all_selections),
            "calibration_contrast": job.contrast,
            "loss_accuracy": job.loss_accuracy,
            "informative_tasks": job.informative.table,
            "calibration_contrast_informative": informative_contrast(
                job.informative_base, job.informative_reps, job.informative, job.baselines
            ),
            "loss_accuracy_informative": loss_accuracy_table(job.informative_base, job.informative_reps),
            "evaluation_size": evaluation_size(job.contrast, evaluation_limit(reps)),
            "floor_tests": floor_tests(job.all_samples),  # every run of every seed (§7; issue 66)
        }
    )


def decompose_calibration(job: RenderJob) -> None:
    """Objective or data (docs/method.md §9): only a study that ran the cross-control ppl_cs170k."""
    if not has_cross_control(job.base):
        return
    decomposition = decomposition_table(*with_informative_average(job.base, job.reps, job.informative))
    job.analyses["calibration_decomposition"] = decomposition
    job.analyses["calibration_decomposition_sets"] = set_decomposition_table(job.selections)
    job.written += figure_decomposition(decomposition, job.out)


def spread_across_seeds(job: RenderJob) -> None:
    """Across seeds (docs/method.md §10): the spread, the set stability, and each seed's estimate with
    its document interval and the two-stage interval (seeds, then documents within each seed)."""
    if not job.several_seeds:
        return
    job.analyses["seeds_spread"] = seed_spread(job.agg.summary)
    job.analyses["seeds_set_stability"] = set_stability(job.agg.selections)
    job.analyses["seeds_two_stage"] = job.across_seeds_tables()["two_stage"]
    job.written += figure_seeds(job.analyses["seeds_two_stage"], job.out)


def compare_random_sets(job: RenderJob) -> None:
    """Searches against random sets (docs/method.md §11): only a study with the random-set control.
    Per seed each search and their mean against the random sets (random_control.csv); per (model, M,
    calibration) the mean over the seeds with its noise rates (random_control_seeds.csv)."""
    if not random_control.has_random_sets(job.all_base):
        return
    tables, per_seed, null_cells, n_searches = [], {}, {}, {}
    for seed in job.seeds:
        summary = for_seed(job.agg.summary, seed)
        table, per_seed[seed] = random_control.random_contrast(summary, job.seed_replicates(seed), seed)
        tables.append(table.assign(seed=seed))
        for key, (runs, random_runs) in random_control.cell_runs(summary).items():
            null_cells.setdefault(key, {})[seed] = random_control.null_cell(job.seed_samples(seed), runs, random_runs)
            n_searches[key] = len(runs)
    rates = {key: random_control.noise_rates(cells, n_searches[key]) for key, cells in null_cells.items()}
    across = random_control.with_noise(random_control.across_seeds(per_seed), rates)
    job.analyses["random_control"] = pd.concat(tables, ignore_index=True)
    job.analyses["random_control_seeds"] = across
    job.random_control_text = random_control.markdown(across, len(job.seeds))


def write_analyses(job: RenderJob) -> None:
    for name, frame in job.analyses.items():
        job.write_csv(name, frame)


def judge_observations(job: RenderJob) -> None:
    """The paper's three observations judged on the primary seed, with the informative-task
    sensitivity, the controls' answer, ρ(loss, accuracy) and the evaluation size (observations.md)."""
    seed_selections = (
        [paper_only(for_seed(job.agg.selections, seed)) for seed in job.seeds] if job.several_seeds else []
    )
    observations = evaluate_observations(
        job.selections,
        job.base,
        job.reps,
        job.comparable_band,
        job.strong_rho,
        seed_selections,
        samples=job.samples,
        informative=job.informative,
    )
    informative = job.analyses.get("calibration_contrast_informative")
    if informative is None:
        informative = informative_contrast(job.informative_base, job.informative_reps, job.informative, job.baselines)
    observations.sensitivity += contrast_pairs(job.contrast, informative)
    job.observations = observations
    job.observations_text = (
        observations_markdown(observations)
        + "\n## Random-initialisation controls (the paper's limitation 2)\n\n"
        + prior_artifact_answer(job.all_selections)
        + "\n"
        + loss_accuracy_markdown(job.loss_accuracy)
        + evaluation_size_markdown(evaluation_size(job.contrast, evaluation_limit(job.reps)))
        + floor_markdown(floor_tests(job.all_samples))
        + job.random_control_text
    )


def judge_across_seeds(job: RenderJob) -> None:
    """Each seed's verdicts (seeds_verdicts.csv) and the cross-seed decision rule of docs/method.md
    §10 with each seed's verdict beside it (seeds_claims.csv)."""
    if not job.several_seeds:
        return
    by_seed = {job.primary: job.observations}
    for seed in job.seeds[1:]:
        by_seed[seed] = evaluate_observations(
            paper_only(for_seed(job.agg.selections, seed)),
            paper_only(for_seed(job.agg.summary, seed)),
            job.seed_replicates(seed),
            job.comparable_band,
            job.strong_rho,
            samples=job.seed_samples(seed),
        )
    verdicts = verdicts_by_seed({seed: seen.verdicts for seed, seen in by_seed.items()})
    job.write_csv("seeds_verdicts", verdicts)
    job.observations_text += seeds_markdown(job.primary, verdicts, set_stability(job.agg.selections))
    tables = job.across_seeds_tables()
    claims = decision_table(
        tables["two_stage"],
        tables["rho"],
        tables["sets"],
        verdicts,
        job.strong_rho,
        n_resamples=job.bootstrap_resamples,  # the pooled intervals' resamples, as every other interval's
        noise=tables["noise"],
        extra_rows=tables["extra_rows"],
        informative=tables["informative"],
    )
    job.write_csv("seeds_claims", claims)
    job.observations_text += decision_markdown(claims, len(job.seeds), job.seeds_planned)


def write_observations(job: RenderJob) -> None:
    job.write_text("observations.md", job.preface + job.observations_text)
    job.write_csv("observations", observations_frame(job.observations))
    job.write_text("paper_comparison.md", paper_comparison_markdown(job.observations))
    job.write_csv("paper_comparison", paper_comparison(job.observations))


def drop_failed_algorithms(agg: Aggregate, samples):
    """The study without every algorithm that failed in one of its runs (its selections, summary and
    per-document samples), and the note that says so; unchanged, with an empty note, when none failed."""
    dropped = failed_algorithms(agg.summary)
    names = list(dropped["algorithm"])
    if not names:
        log.info("without failed searches: no search failed, nothing dropped")
        return agg, samples, ""
    listed = ", ".join(f"{r.algorithm} (failed in {r.failed_runs} of {r.runs} runs)" for r in dropped.itertuples())
    log.info("without failed searches: dropping %s", listed)
    reduced = Aggregate(
        selections=without_algorithms(agg.selections, names),
        metrics=without_algorithms(agg.metrics, names),
        summary=without_algorithms(agg.summary, names),
    )
    note = (
        f"**Sensitivity render without the failed searches**: {listed} left out of every seed, "
        'calibration and M (docs/method.md §7, "Failed searches"; verdict_changes.md pairs each '
        "verdict with the full study's).\n\n"
    )
    return reduced, without_algorithms(samples, names), note


@dataclass(frozen=True)
class RenderStep:
    """One named step of the render: it runs when any of the outputs in ``serves`` is asked for."""

    name: str
    serves: frozenset[str]
    run: Callable[[RenderJob], None]


JUDGED = frozenset({"analyses", "observations"})
# The render, in order: a later step reads what earlier ones left on the job.
STEPS = (
    RenderStep("figure1", frozenset({"figure1"}), draw_figure1),
    RenderStep("figure2", frozenset({"figure2"}), draw_figure2),
    RenderStep("figure3", frozenset({"figure3"}), draw_figure3),
    RenderStep("paper tables", frozenset(TABLE_NAMES), write_paper_tables),
    RenderStep("baselines and informative tasks", JUDGED, find_baselines),
    RenderStep("calibration contrast", JUDGED, contrast_calibrations),
    RenderStep("paper analyses", frozenset({"analyses"}), paper_analyses),
    RenderStep("objective or data", frozenset({"analyses"}), decompose_calibration),
    RenderStep("spread across seeds", frozenset({"analyses"}), spread_across_seeds),
    RenderStep("searches against random sets", frozenset({"analyses", "observations"}), compare_random_sets),
    RenderStep("write analyses", frozenset({"analyses"}), write_analyses),
    RenderStep("observations", frozenset({"observations"}), judge_observations),
    RenderStep("verdicts across seeds", frozenset({"observations"}), judge_across_seeds),
    RenderStep("write observations", frozenset({"observations"}), write_observations),
)


def render(
    aggregate_dir: str | Path,
    out_dir: str | Path,
    only: Iterable[str] | None = None,
    bootstrap_resamples: int = DEFAULT_RESAMPLES,
    bootstrap_seed: int = DEFAULT_SEED,
    comparable_band: float = DEFAULT_COMPARABLE_BAND,
    strong_rho: float = DEFAULT_STRONG_RHO,
    seeds_planned: int | None = None,
    without_failed_searches: bool = False,
) -> list[Path]:
    """Write the requested outputs (all by default) by running STEPS in order; return the files written.

    ``without_failed_searches`` renders the study without every algorithm that failed in any of its
    runs (``verdicts/failed_sensitivity.py``; observations.md says which), the sensitivity reading of
    docs/method.md §7."""
    start = time.perf_counter()
    # Said before drawing: other versions than the lock's may write the same figures as other bytes.
    warn_drift(RENDER_PACKAGES, "figures and tables")
    # The metrics table is not drawn from, but is validated with the others (a cut file is refused).
    agg = load_aggregate(aggregate_dir, tables=("selections", "summary"))
    samples, preface = load_samples(aggregate_dir), ""
    if without_failed_searches:
        agg, samples, preface = drop_failed_algorithms(agg, samples)
    job = RenderJob(
        agg=agg,
        all_samples=samples,
        seeds=seeds_of(agg.summary),
        wanted=set(ARTIFACTS) if only is None else set(only),
        out=Path(out_dir),
        bootstrap_resamples=bootstrap_resamples,
        bootstrap_seed=bootstrap_seed,
        comparable_band=comparable_band,
        strong_rho=strong_rho,
        seeds_planned=seeds_planned,
        preface=preface,
    )
    for step in STEPS:
        if step.serves & job.wanted:
            step_start = time.perf_counter()
            step.run(job)
            log.info("render step %s (%.1f s)", step.name, time.perf_counter() - step_start)
    job.out.mkdir(parents=True, exist_ok=True)
    job.written.append(write_record(job.out, RENDER_PACKAGES))
    log.info("render: %d files in %s (%.1f s)", len(job.written), job.out, time.perf_counter() - start)
    return job.written

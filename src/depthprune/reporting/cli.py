"""``depthprune aggregate`` and ``depthprune render``.

Heavy imports (pandas, matplotlib, scipy) happen inside the command functions, so building the
parser stays cheap; nothing here (or in the reporting package) imports torch or transformers.
"""

from __future__ import annotations

import argparse
import logging
import os

from depthprune.errors import InputError
from depthprune.paths import AGGREGATE_DIR, FIGURES_DIR, RESULTS_DIR
from depthprune.seeding import seed_option

log = logging.getLogger(__name__)


def register(subparsers) -> None:
    add_aggregate(subparsers)
    add_render(subparsers)
    add_failed_search_sensitivity(subparsers)
    add_calibration_size(subparsers)
    add_results_page(subparsers)


def add_aggregate(subparsers) -> None:
    agg = subparsers.add_parser(
        "aggregate",
        help="collect selection.json / metrics.csv files into results/aggregate/",
        description=(
            "Aggregate every selection.json and metrics.csv into selections, metrics and summary tables "
            "(CSV and Parquet). Files come from --results (Snakemake layout) or from explicit lists."
        ),
    )
    agg.add_argument("--results", default=RESULTS_DIR, help="results folder to search (default: %(default)s)")
    agg.add_argument("--selections", nargs="*", metavar="FILE", help="explicit selection.json files (skips the search)")
    agg.add_argument("--metrics", nargs="*", metavar="FILE", help="explicit metrics.csv files (skips the search)")
    agg.add_argument(
        "--samples", nargs="*", metavar="FILE", help="explicit samples.parquet files (per-document scores)"
    )
    add_protected_option(agg)
    agg.add_argument(
        "--base-aggregate",
        default=None,
        metavar="DIR",
        help="a committed study's aggregate folder whose runs of --base-calibrations join this aggregate "
        "(refused unless precision, search space and the dense model's evaluated documents match)",
    )
    agg.add_argument(
        "--base-calibrations",
        default=None,
        metavar="LIST",
        help="comma-separated calibrations taken from --base-aggregate",
    )
    agg.add_argument(
        "--base-seeds",
        default=None,
        metavar="LIST",
        help="comma-separated seeds of those calibrations (default: the seeds of this study's runs)",
    )
    agg.add_argument(
        "--perplexity-from",
        default=None,
        metavar="DIR",
        help="an evaluation-only study's source aggregate: carry its perplexities of the same sets "
        "(docs/method.md §11; refused unless every run but the random sets is there with the same set)",
    )
    agg.add_argument("--out", default=AGGREGATE_DIR, help="output folder (default: %(default)s)")
    agg.set_defaults(func=run_aggregate)


def add_protected_option(parser) -> None:
    """``--protected MODEL=SPEC`` (repeatable), shared by ``aggregate`` and ``add-runs``."""
    parser.add_argument(
        "--protected",
        action="append",
        default=[],
        metavar="MODEL=SPEC",
        help="blocks MODEL's searches could not remove: comma-separated indices and/or 'boundary' (first and "
        "last block); recorded as the aggregate's 'protected' column for the nulls of the agreement statistics",
    )


def parse_protected(items: list[str]) -> dict[str, str]:
    """model -> protected-block spec of the ``--protected`` options; a malformed one is an InputError."""
    protected = {}
    for item in items:
        model, sep, spec = item.partition("=")
        if not sep or not model:
            raise InputError(f"--protected {item!r}: expected MODEL=SPEC, for example smollm2-135m=boundary")
        protected[model] = spec
    return protected


def add_render(subparsers) -> None:
    ren = subparsers.add_parser(
        "render",
        help="draw Figures 1-3, Tables 1-6, the observations and the analyses from results/aggregate/",
        description="Render figures, tables, analyses and observations.md from the aggregate (no model is loaded).",
    )
    ren.add_argument("--aggregate", default=AGGREGATE_DIR, help="aggregate folder (default: %(default)s)")
    ren.add_argument("--out", default=FIGURES_DIR, help="output folder (default: %(default)s)")
    ren.add_argument(
        "--only",
        default=None,
        metavar="LIST",
        help="comma-separated subset: figure1,figure2,figure3,table1..table6,analyses,observations",
    )
    add_analysis_options(ren)
    ren.set_defaults(func=run_render)


def add_analysis_options(parser) -> None:
    """The statistics' settings, shared by ``render`` and ``failed-search-sensitivity`` (whose
    comparison is only meaningful when both renders use the same)."""
    add_bootstrap_options(parser)
    parser.add_argument(
        "--comparable-band",
        type=float,
        default=2.0,
        help="§5.2: calibration/algorithm shift ratios within [1/b, b] are comparable (default 2)",
    )
    parser.add_argument(
        "--strong-rho", type=float, default=0.5, help="§5.3: |ρ| above this is a strong correlation (default 0.5)"
    )
    parser.add_argument(
        "--seeds-planned",
        type=int,
        default=None,
        metavar="N",
        help="seeds the study plans: rendered with fewer complete, the cross-seed tables say partial (§10)",
    )


def add_bootstrap_options(parser) -> None:
    """The bootstrap's size and seed (config ``analysis``): every interval a command draws uses them."""
    from depthprune.memory import DEFAULT_RESAMPLES, resample_count

    parser.add_argument(
        "--bootstrap-resamples",
        type=resample_count,
        default=DEFAULT_RESAMPLES,
        help="paired document-bootstrap resamples for the 95%% intervals (default %(default)s: interval ends "
        "stable to the seed; verdicts within Monte-Carlo error of a boundary are inconclusive)",
    )
    parser.add_argument("--bootstrap-seed", type=seed_option, default=0, help="seed of the bootstrap (default 0)")


def add_failed_search_sensitivity(subparsers) -> None:
    sens = subparsers.add_parser(
        "failed-search-sensitivity",
        help="render a study without its failed searches and pair every verdict with the full render's",
        description=(
            "Render the study's observations and analyses without every algorithm that failed (final "
            "calibration loss above one-shot's) in any of its runs, into --out/tables/, and write "
            "--out/verdict_changes.{csv,md}: each verdict of the full render (--figures, rendered with the "
            "same analysis options) beside the reduced one's (docs/method.md §7)."
        ),
    )
    sens.add_argument("--aggregate", default=AGGREGATE_DIR, help="aggregate folder (default: %(default)s)")
    sens.add_argument("--figures", default=FIGURES_DIR, help="the full render's folder (default: %(default)s)")
    sens.add_argument("--out", required=True, help="output folder of the reduced render and the comparison")
    add_analysis_options(sens)
    sens.set_defaults(func=run_failed_search_sensitivity)


def add_calibration_size(subparsers) -> None:
    size = subparsers.add_parser(
        "calibration-size",
        help="draw the calibration-size study (figure and table) from results/aggregate/",
        description=(
            "Per calibration size: selection stability across seeds (mean pairwise Jaccard), calibration "
            "loss, and the pruned models' average accuracy and perplexity (a study run with "
            "calibration_sizes and seeds)."
        ),
    )
    size.add_argument("--aggregate", default=AGGREGATE_DIR, help="aggregate folder (default: %(default)s)")
    size.add_argument("--out", default=FIGURES_DIR, help="output folder (default: %(default)s)")
    add_bootstrap_options(size)
    size.set_defaults(func=run_calibration_size)


def add_results_page(subparsers) -> None:
    page = subparsers.add_parser(
        "results-page",
        help="write docs/results.md from the committed studies' figures and tables",
        description=(
            "Every study folder's figures, paper comparison, verdicts and Tables 1-6 on one page, from "
            "the files render wrote (run it after re-rendering a study; a test compares the committed page)."
        ),
    )
    page.add_argument("--repo", default=".", help="repository root (default: %(default)s)")
    page.add_argument(
        "--studies",
        nargs="+",
        default=None,
        help="study folders relative to --repo, each holding a rendered study (its tables/); a folder without "
        "one is an error and nothing is written (default: every committed study, results_page.STUDIES)",
    )
    page.add_argument("--out", default=None, help="output file (default: <repo>/docs/results.md)")
    page.set_defaults(func=run_results_page)


def run_aggregate(args: argparse.Namespace) -> int:
    from depthprune import environment
    from depthprune.io import atomic_files, check_inputs_outputs
    from depthprune.reporting.aggregate import (
        aggregate,
        collect_samples,
        discover_result_files,
        discover_samples,
        write_aggregate,
        write_samples,
    )

    explicit = args.selections is not None or args.metrics is not None
    check_inputs_outputs(
        {
            "--results": None if explicit else args.results,
            "--selections": args.selections,
            "--metrics": args.metrics,
            "--samples": args.samples,
            "--base-aggregate": args.base_aggregate,
            "--perplexity-from": args.perplexity_from,
        },
        {"--out": args.out},
        outputs_may_lie_inside=["--results"],  # results/aggregate, the default
    )
    if explicit:
        selection_files, metrics_files = list(args.selections or []), list(args.metrics or [])
        sample_files = list(args.samples or [])
        origin = "the --selections/--metrics lists"
    else:
        selection_files, metrics_files = discover_result_files(args.results)
        sample_files = list(args.samples) if args.samples is not None else discover_samples(args.results)
        origin = f"--results {args.results}"
    if not selection_files and not metrics_files:
        raise FileNotFoundError(f"no selection.json or metrics.csv files in {origin}")
    environment.warn_drift(environment.RENDER_PACKAGES, "the aggregate's tables")
    protected = parse_protected(args.protected)
    if (args.base_aggregate is None) != (args.base_calibrations is None):
        raise InputError("--base-aggregate and --base-calibrations go together")
    agg = aggregate(selection_files, metrics_files, protected)
    samples = collect_samples(sample_files, agg.selections)
    agreement = None
    if args.base_aggregate is not None:
        from depthprune.reporting.base_study import merge_base_study

        calibrations = [c.strip() for c in args.base_calibrations.split(",") if c.strip()]
        seeds = None if args.base_seeds is None else [parse_seed(s) for s in args.base_seeds.split(",") if s.strip()]
        agg, samples, agreement = merge_base_study(agg, samples, args.base_aggregate, calibrations, seeds)
    carried = None
    if args.perplexity_from is not None:
        from depthprune.reporting.carried_perplexity import carry_perplexity

        agg, samples, carried = carry_perplexity(agg, samples, args.perplexity_from)
    # Every file is written apart and moved in only when all are: a failure leaves the previous
    # aggregate whole, never half old and half new.
    with atomic_files(args.out) as staging:
        written = write_aggregate(agg, staging)
        # Always written (empty without per-document results): the render rule declares it as input.
        written.append(write_samples(samples, staging))
        if agreement is not None:
            from depthprune.reporting.base_study import write_agreement

            written.append(write_agreement(agreement, staging))
        if carried is not None:
            from depthprune.reporting.carried_perplexity import write_record

            written.append(write_record(carried, staging))
        # The versions that wrote these tables (a model job's own are in its selection.json, lm_eval.json).
        written.append(environment.write_record(staging, environment.RENDER_PACKAGES))
    print(
        f"aggregate: {len(selection_files)} selections, {len(metrics_files)} metrics files -> {args.out} ({len(written)} files)"
    )
    return 0


def parse_seed(text: str) -> int:
    try:
        seed = int(text)
    except ValueError:
        raise InputError(f"--base-seeds {text!r}: expected comma-separated non-negative integers") from None
    if seed < 0:
        raise InputError(f"--base-seeds {text!r}: expected comma-separated non-negative integers")
    return seed


def analysis_settings(args: argparse.Namespace) -> dict:
    """The render's keyword arguments from ``add_analysis_options``' options."""
    names = ("bootstrap_resamples", "bootstrap_seed", "comparable_band", "strong_rho", "seeds_planned")
    return {name: getattr(args, name) for name in names}


def run_render(args: argparse.Namespace) -> int:
    from depthprune.io import check_inputs_outputs
    from depthprune.reporting.render import parse_only, render

    # Figures and tables are files written beside, never over, the aggregate's: --out may be a sub-folder.
    check_inputs_outputs({"--aggregate": args.aggregate}, {"--out": args.out}, outputs_may_lie_inside=["--aggregate"])
    written = render(args.aggregate, args.out, only=parse_only(args.only), **analysis_settings(args))
    print(f"render: {len(written)} files -> {args.out}")
    return 0


def run_failed_search_sensitivity(args: argparse.Namespace) -> int:
    from pathlib import Path

    from depthprune.io import atomic_write_report_csv, atomic_write_text, check_inputs_outputs
    from depthprune.reporting.aggregate import load_aggregate
    from depthprune.reporting.render import render
    from depthprune.reporting.verdicts.failed_sensitivity import changes_markdown, failed_algorithms, verdict_changes

    check_inputs_outputs(
        {"--aggregate": args.aggregate, "--figures": args.figures},
        {"--out": args.out},
        outputs_may_lie_inside=["--aggregate", "--figures"],
    )
    out = Path(args.out)
    render(
        args.aggregate, out, only={"analyses", "observations"}, without_failed_searches=True, **analysis_settings(args)
    )
    changes = verdict_changes(Path(args.figures) / "tables", out / "tables")
    dropped = failed_algorithms(load_aggregate(args.aggregate, tables=("summary",)).summary)
    atomic_write_report_csv(out / "verdict_changes.csv", changes)
    atomic_write_text(out / "verdict_changes.md", changes_markdown(changes, dropped))
    print(f"failed-search-sensitivity: {int((changes['changed'] == 'yes').sum())} verdicts change -> {out}")
    return 0


def run_calibration_size(args: argparse.Namespace) -> int:
    from depthprune.io import check_inputs_outputs
    from depthprune.reporting.calibration_size import render_calibration_size

    # Figures and tables are files written beside, never over, the aggregate's: --out may be a sub-folder.
    check_inputs_outputs({"--aggregate": args.aggregate}, {"--out": args.out}, outputs_may_lie_inside=["--aggregate"])
    written = render_calibration_size(args.aggregate, args.out, args.bootstrap_resamples, args.bootstrap_seed)
    print(f"calibration-size: {len(written)} files -> {args.out}")
    return 0


def run_results_page(args: argparse.Namespace) -> int:
    from pathlib import Path

    from depthprune.io import check_inputs_outputs
    from depthprune.reporting.pages.results_page import DEFAULT_STUDIES, PAGE, write_results_page

    studies = tuple(args.studies or DEFAULT_STUDIES)
    named = [os.path.normpath(study) for study in studies]
    repeated = sorted({study for study in named if named.count(study) > 1})
    if repeated:
        raise InputError(f"--studies: {', '.join(repeated)} given more than once; name each study once")
    check_inputs_outputs(
        {"--repo": args.repo, "--studies": [Path(args.repo) / study for study in studies]},
        {"--out": args.out or Path(args.repo) / PAGE},
        outputs_may_lie_inside=["--repo"],  # docs/results.md, the default
    )
    path = write_results_page(args.repo, args.out, studies)
    print(f"results-page: {path}")
    return 0

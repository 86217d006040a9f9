# No CLI sub-command: paths, input functions and the plan-time checks of the stage files.
# The config -> command-line mapping, the checks and the provenance string are package functions
# (src/depthprune/workflow.py, tested without Snakemake); the functions below only bind them to
# `config`, which they read when called: after the Snakefile has typed and validated it (and
# filled in the schema's defaults).

import os
import re
import shlex
import sys

from jsonschema.exceptions import ValidationError
from snakemake.exceptions import WorkflowError

# Snakemake outside the package's environment (e.g. --sdm conda): this repository's src/.
try:
    import depthprune.workflow as wf
except ImportError:
    sys.path.insert(0, os.path.join(workflow.basedir, "src"))
    import depthprune.workflow as wf

from depthprune.config_schema import SCHEMA_FILE, load_schema, validate
from depthprune.errors import InputError
from depthprune.paths import SENSITIVITY_DIR, run_parts, search_parts

# The config schema with the registries' names filled in (calibrations, algorithms, benchmarks, ...).
SCHEMA = load_schema(os.path.join(workflow.basedir, SCHEMA_FILE))


def schema_enum(definition):
    """Allowed values of a schema definition: the package's registry (names and wildcards)."""
    return list(SCHEMA["$defs"][definition]["enum"])


def alternatives(names):
    """A wildcard regex matching exactly one of `names`."""
    return "|".join(re.escape(name) for name in names)


def yaml_typed(value):
    return wf.yaml_typed(value)


def warn_environment_drift():
    """One line before any job runs when the installed packages are not requirements/lock.txt's: the
    results and figures may then differ in bytes from the committed ones (a warning, not a refusal).
    """
    from depthprune import environment

    differ = environment.drift(environment.RENDER_PACKAGES + environment.MODEL_PACKAGES)
    if differ:
        message = environment.drift_message(differ, "results, figures and tables")
        print(f"Warning: {message}", file=sys.stderr)


def warn_if_running():
    """One line when another snakemake runs jobs in this folder (depthprune/running_study.py):
    Snakemake's own refusal advises --unlock, which lets two runs overwrite each other's jobs.
    """
    from depthprune import running_study

    other = running_study.other_run() if workflow.is_main_process else None
    if other is not None:
        print(f"Warning: {running_study.running_message(other)}", file=sys.stderr)


def record_running():
    from depthprune import running_study

    running_study.record_running()


def clear_running():
    from depthprune import running_study

    running_study.clear_running()


def check_config_keys():
    """A misspelt key: one line naming it and the allowed keys, not the whole schema."""
    errors = wf.config_key_errors(config, SCHEMA)
    if errors:
        raise WorkflowError("\n".join(errors))


def validate_config():
    """The schema's checks, its defaults filled in for the keys the config leaves out (as
    snakemake.utils.validate would, which reads a schema file only)."""
    try:
        validate(config, SCHEMA)
    except ValidationError as err:
        raise WorkflowError("Error validating config file.", err) from None


def check_study():
    """Plan-time checks (models, protected layers, budgets, the mirror's files), after validation."""
    try:
        wf.check_study(config)
    except InputError as err:
        raise WorkflowError(str(err)) from None


def model_entry(model):
    """How to load the model alias `model` (its model_table entry)."""
    return wf.model_entry(config, model)


# --------------------------------------------------------------------------- paths


def results_path(*parts):
    return os.path.join(config["results_dir"], *parts)


def figures_path(*parts):
    return os.path.join(config["figures_dir"], *parts)


def log_path(*parts):
    return os.path.join(config["logs_dir"], *parts)


def benchmark_path(*parts):
    return os.path.join(config["benchmarks_dir"], *parts)


def prepared_model(model):
    """JSON record written by `depthprune prepare-model`: the model is converted/downloaded once
    into the model cache, and every model job after it only loads."""
    return os.path.join(config["model_cache_dir"], f"{model}.prepared.json")


def memo_path(wildcards):
    """SQLite memo shared by the prior and every search of one (model, calibration): a cache, not a
    declared output, so Snakemake never deletes it and reruns start warm."""
    return wf.memo_path(config, wildcards)


def eval_cache_dir(wildcards):
    """Content-addressed evaluation cache: identical removed sets are evaluated once per model."""
    return wf.eval_cache_dir(config, wildcards)


# One run's and one search's folders (results/<model>/<calibration>/seed<k>/ and .../M<M>/<algorithm>/,
# named by the package: src/depthprune/paths.py), as wildcard patterns for the prior, search and
# evaluate_selections rules (the logs and timings of a search repeat the search's folders).
RUN_PARTS = run_parts("{model}", "{calibration}", "{seed}")
SEARCH_PARTS = search_parts(
    "{model}", "{calibration}", "{seed}", "{budget}", "{algorithm}"
)


def search_file(name):
    return results_path(*SEARCH_PARTS, name)


def search_log(stage):
    return log_path(stage, *SEARCH_PARTS[:-1], "{algorithm}.log")


def search_benchmark(stage):
    return benchmark_path(stage, *SEARCH_PARTS[:-1], "{algorithm}.tsv")


def group_outputs(name):
    """One file per algorithm of a (model, calibration, seed, M) group, in `algorithms` order."""
    return expand(search_file(name), algorithm=config["algorithms"], allow_missing=True)


def model_selections(wildcards):
    """Every selection.json of one model and seed: all calibrations, budgets and algorithms."""
    return [
        results_path(
            *search_parts(
                wildcards.model, calibration, wildcards.seed, budget, algorithm
            ),
            "selection.json",
        )
        for calibration in calibration_labels()
        for budget in model_budgets(wildcards.model)
        for algorithm in config["algorithms"]
    ] + wf.random_set_files(config, wildcards.model, wildcards.seed, "selection.json")


def one_pass_per_model():
    return wf.one_pass_per_model(config)


def evaluation_pass(model, seed):
    """The record of the one evaluation pass over a model's sets, or nothing (pass_per: cell, where
    each evaluate_selections job computes its own sets)."""
    return (
        results_path(model, f"seed{seed}", "evaluation_pass.json")
        if one_pass_per_model()
        else []
    )


def selection_args(wildcards, input):
    return wf.selection_args(input.selections)


def selection_and_outputs(wildcards, input, output):
    return wf.selection_and_outputs(
        input.selections, output.metrics, output.raw, output.samples
    )


def search_workdir(wildcards):
    """Scratch folder of one search (the BO study's SQLite): kept when a job fails, so it resumes."""
    return search_file("work").format(**dict(wildcards.items()))


# --------------------------------------------------------------------------- targets


def calibration_variants():
    """Every calibration of the study, at each of `calibration_sizes` (when given): one label per
    size (tlm_cs170k, tlm_cs170k-n16, ppl_c4-64x128; see src/depthprune/calibration/variants.py).
    Seeds are not part of the label: each seed has its own seed<k>/ folder below it.
    """
    try:
        return wf.calibration_variants(config)
    except InputError as err:
        raise WorkflowError(str(err)) from None


def calibration_labels():
    return [variant.label for variant in calibration_variants()]


def calibration_wildcard():
    """Wildcard regex of a calibration label: a calibration name and an optional size."""
    names = alternatives(schema_enum("calibration_name"))
    return f"(?:{names})(?:-n[0-9]+|-[0-9]+x[0-9]+)?"


def model_budgets(model):
    """Absolute budgets (M) of one model (fractions of depth resolved with its n_layers)."""
    try:
        return wf.model_budgets(config, model)
    except InputError as err:
        raise WorkflowError(str(err)) from None


def search_dirs():
    """results/<model>/<calibration>/seed<k>/M<M>/<algorithm> for every search the config asks for."""
    return [
        results_path(*search_parts(model, calibration, seed, budget, algorithm))
        for model in config["models"]
        for calibration in calibration_labels()
        for seed in config["seeds"]
        for budget in model_budgets(model)
        for algorithm in config["algorithms"]
    ]


def random_set_dirs():
    """The random-set control's draws (config random_sets): their selection.json, metrics.csv, ..."""
    return [
        os.path.dirname(path)
        for model in config["models"]
        for seed in config["seeds"]
        for path in wf.random_set_files(config, model, seed, "selection.json")
    ]


def random_set_outputs(name):
    """The file `name` of every draw of one (model, seed, M): a rule's outputs (evaluation_only.smk)."""
    return expand(
        results_path(
            *search_parts("{model}", "none", "{seed}", "{budget}", "{algorithm}"), name
        ),
        algorithm=wf.random_set_algorithms(config),
        allow_missing=True,
    )


def all_selections():
    return [
        os.path.join(d, "selection.json") for d in search_dirs() + random_set_dirs()
    ]


def all_metrics():
    pruned = [os.path.join(d, "metrics.csv") for d in search_dirs() + random_set_dirs()]
    dense = [results_path(model, "dense", "metrics.csv") for model in config["models"]]
    return pruned + dense


def all_samples():
    # Per-document scores next to each metrics.csv (the bootstrap's input).
    return [p.replace("metrics.csv", "samples.parquet") for p in all_metrics()]


def all_raw_evaluations():
    # The lm_eval.json next to each metrics.csv: the aggregate reads its provenance.
    return [p.replace("metrics.csv", "lm_eval.json") for p in all_metrics()]


FIGURES = ["figure1", "figure2", "figure3"]
TABLES = ["table1", "table2", "table3", "table4", "table5", "table6"]


# --------------------------------------------------------------------------- CLI arguments


def cli_options(name):
    """A `params:` function of the rules: depthprune.workflow's argument builder `name` (a function
    of config and wildcards: model_args, calibration_args, evaluator_args, prior_evaluator_args,
    search_param_args, heldout_args, evaluation_args, prepare_model_args, aggregate_protected_args)
    bound to `config`."""
    build = getattr(wf, name)
    return lambda wildcards: build(config, wildcards)


def analysis_args(wildcards):
    return wf.analysis_args(config)


def bootstrap_args(wildcards):
    return wf.bootstrap_args(config)


def provenance_param(stage):
    """What a job's results depend on beyond its command (code and package versions, dtype, the
    data's content; wf.provenance): a `params:` value, so a change of any of them reruns the job.
    """
    return lambda wildcards: wf.provenance(config, wildcards, stage)


class NotARerunTrigger:
    """A `params:` value that reaches the shell command but never makes Snakemake rerun a job.

    Snakemake reruns a job whose params changed, but it records and compares only params of builtin
    types (str, int, list, dict, ...); other objects are left out of the comparison. Wrapping a
    value in this class therefore keeps it out of the rerun decision, for options that change no
    result: where the offline mirror lies (`data_dir`: what a result depends on is the data's
    content, whose hash is in the memo and evaluation-cache keys), the memo's journal mode, and
    `--recompute` on forced rules. Formatting `{params.x}` gives the text.
    """

    def __init__(self, text):
        self.text = text

    def __format__(self, spec):
        return self.text

    def __str__(self):
        return self.text


def data_dir_param(wildcards):
    """`--data-dir DIR` (or nothing: the hub): where the mirror lies is no rerun trigger (its
    content is, through provenance_param)."""
    return NotARerunTrigger(wf.data_dir_args(config))


def jobs_run_elsewhere():
    """Whether the jobs run on other machines than this Snakemake process's: a cluster executor
    (slurm, ...), or this process is the Snakemake a cluster job started on its node. Read when a
    job's params are formatted (the executor is not known yet while the Snakefile is parsed).
    """
    if workflow.remote_exec:
        return True
    plugin = workflow.executor_plugin
    if plugin is not None and not plugin.common_settings.local_exec:
        return True
    # A dry run (-n) swaps in a pseudo-executor but validates against the intended one;
    # Snakemake then sets use_threads for an intended non-local executor (snakemake/api.py,
    # execute_workflow). --force-use-threads also sets it: the safe journal, never a wrong one.
    return bool(
        plugin is not None
        and plugin.common_settings.dryrun_exec
        and workflow.execution_settings.use_threads
    )


def memo_journal_param(wildcards):
    """The memo's SQLite journal: delete where the jobs run on a cluster or the memo lies on a
    network filesystem, else wal (wf.memo_journal). Switching executors reruns nothing.
    """
    return NotARerunTrigger(wf.memo_journal_args(config, jobs_run_elsewhere()))


def job_resources(rule):
    """`resources:` of a model rule's job, following the work: no GPU on the CPU device or for a
    job that only copies from the evaluation cache (wf.job_gpus, wf.job_mem_mb)."""
    return {
        "gpu": wf.job_gpus(config, rule),
        "mem_mb": wf.job_mem_mb(config, rule),
    }


def job_threads(rule):
    """`threads:` of a model rule's job: the CPUs a cluster job asks for, and the threads it runs
    with (OMP_NUM_THREADS), so cluster and local runs compute alike (wf.job_threads)."""
    return wf.job_threads(config, rule)


def recompute_param(name):
    """`--recompute` when Snakemake was asked to force the rule `name` (`--forcerun name`,
    `--forceall`), so a forced rerun computes again instead of reading the job's own cache (memo,
    evaluation cache, BO study), which is not a Snakemake output. Jobs a cluster executor submits
    are re-planned by a Snakemake process on the node that does not see the flag: there, also set
    DEPTHPRUNE_RECOMPUTE=1 in the environment (the CLI reads it)."""
    writes_pass_sets = name in ("evaluate_selections", "evaluate_dense")

    def param(wildcards):
        forced = forced_rule(name)
        if writes_pass_sets and one_pass_per_model():
            # Their sets are the pass's: a forced pass has just recomputed them (--forceall).
            forced = forced and not forced_rule("evaluate_pass")
        return NotARerunTrigger("--recompute" if forced else "")

    return param


def another_snakemake_locks():
    """Whether .snakemake/locks holds lock files: those of another Snakemake in this working folder
    (or of one killed with SIGKILL), since this one locks only after its DAG is built.
    """
    locks = os.path.join(".snakemake", "locks")
    return os.path.isdir(locks) and bool(os.listdir(locks))


def figures_sources(aggregate_files):
    """An input function of `figures` that adds no file. `snakemake figures` alone redraws from the
    aggregate (on a fresh clone, the committed one); without it Snakemake would plan the whole
    study, so it says instead which files are missing and how to make them, and which of the
    config's seeds the aggregate has no run of (it would redraw from fewer seeds)."""
    summary = aggregate_files.summary
    aggregate_files = list(aggregate_files)

    def check(wildcards):
        if set(getattr(workflow.dag_settings, "targets", None) or ()) != {"figures"}:
            return []
        missing = [path for path in aggregate_files if not os.path.exists(path)]
        if missing and another_snakemake_locks():
            # Advising `snakemake aggregate` here would only lead to Snakemake's lock error.
            raise WorkflowError(
                f"figures: the aggregate the figures are drawn from is missing ({', '.join(missing)}), "
                "and another Snakemake is running in this folder (its locks are in .snakemake/locks): "
                "if it runs the study, it makes the aggregate; run `snakemake figures` when it has ended"
            )
        if missing:
            raise WorkflowError(
                f"figures: the aggregate the figures are drawn from is missing ({', '.join(missing)}); "
                "make it with `snakemake aggregate` (runs the study's searches and evaluations not yet "
                "done), or run `snakemake` for the study and its figures, with the same --configfile"
            )
        absent = wf.seeds_missing_from(config, summary)
        if absent:
            raise WorkflowError(
                f"figures: config seeds {wf.study_seeds(config)} but the aggregate {summary} has no run "
                f"of seed(s) {absent}; make them with `snakemake aggregate` (same --configfile), or drop "
                "them from `seeds`. The committed multi-seed study is `snakemake figures --configfile "
                "config/seeds_default.yaml`"
            )
        return []

    return check


def forced_rule(name):
    """Whether Snakemake was asked to force the rule `name` (--forcerun name, --forceall)."""
    settings = workflow.dag_settings
    return bool(getattr(settings, "forceall", False)) or name in set(
        getattr(settings, "forcerun", None) or ()
    )


def figure_outputs():
    """Named outputs of `render` for Figures 1-3 (the PNGs go into the report)."""
    outputs = {}
    for name in FIGURES:
        outputs[f"{name}_png"] = report(
            figures_path(f"{name}.png"),
            caption=f"../report/{name}.rst",
            category="Figures",
        )
        outputs[f"{name}_pdf"] = figures_path(f"{name}.pdf")
    # Objective or data: the cross-control study's figure (docs/method.md §9).
    if wf.has_cross_control(config):
        outputs["decomposition_png"] = report(
            figures_path("decomposition.png"),
            caption="../report/decomposition.rst",
            category="Figures",
        )
        outputs["decomposition_pdf"] = figures_path("decomposition.pdf")
    return outputs


def table_outputs():
    """Named outputs of `render` for Tables 1-6 (the CSVs go into the report)."""
    outputs = {}
    for name in TABLES:
        outputs[f"{name}_csv"] = report(
            figures_path("tables", f"{name}.csv"),
            caption=f"../report/{name}.rst",
            category="Tables",
        )
        for ext in ("md", "tex"):
            outputs[f"{name}_{ext}"] = figures_path("tables", f"{name}.{ext}")
    # The paper's three observations, judged on these results (render also writes the analyses,
    # tables/jaccard_*.csv, spearman.csv, variance_decomposition.csv, and Tables 2-3 per model).
    outputs["observations_csv"] = report(
        figures_path("tables", "observations.csv"),
        caption="../report/observations.rst",
        category="Observations",
    )
    outputs["observations_md"] = figures_path("tables", "observations.md")
    # Every claim's paper value beside ours, with our bootstrap interval and the verdict.
    outputs["paper_comparison_csv"] = figures_path("tables", "paper_comparison.csv")
    outputs["paper_comparison_md"] = figures_path("tables", "paper_comparison.md")
    if wf.has_cross_control(config):
        outputs["decomposition_csv"] = figures_path(
            "tables", "calibration_decomposition.csv"
        )
        outputs["decomposition_sets_csv"] = figures_path(
            "tables", "calibration_decomposition_sets.csv"
        )
    return outputs

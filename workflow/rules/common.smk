# No CLI sub-command: helpers of the stage files (output paths, config -> CLI arguments).
# Functions only: they read `config` when called, which is after the Snakefile has typed and
# validated it (and filled in the schema's defaults). The CLI arguments come from one generic
# helper, cli_args: config keys are the CLI's flags.

import json
import os
import re
import shlex
import sys

import yaml
from snakemake.exceptions import WorkflowError

SCHEMA_PATH = os.path.join(
    workflow.basedir, "workflow", "schemas", "config.schema.yaml"
)


def schema_enum(definition):
    """Allowed values of a schema definition (one source of truth for names and wildcards)."""
    with open(SCHEMA_PATH, encoding="utf-8") as handle:
        return list(yaml.safe_load(handle)["$defs"][definition]["enum"])


def alternatives(names):
    """A wildcard regex matching exactly one of `names`."""
    return "|".join(re.escape(name) for name in names)


def yaml_typed(value):
    """Scalars spelt as strings ("7", "0.2", "null", "true") -> their YAML type; others unchanged.

    Snakemake reads nested --config values with YAML's BaseLoader, which keeps every scalar a string
    (`budgets=[7,9]` gives ["7", "9"]); the files' values are typed already, so typing the merged
    config changes only what came from the command line.
    """
    if isinstance(value, dict):
        return {key: yaml_typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [yaml_typed(item) for item in value]
    if isinstance(value, str):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        if parsed is None or isinstance(parsed, (bool, int, float)):
            return parsed
    return value


def check_models():
    """Every alias in `models` names an entry of `model_table` (the schema cannot cross-check)."""
    unknown = [m for m in config["models"] if m not in config["model_table"]]
    if unknown:
        raise WorkflowError(
            f"config: models: {', '.join(unknown)} not in model_table "
            f"(known: {', '.join(config['model_table'])})"
        )


def model_entry(model):
    """How to load the model alias `model` (its model_table entry)."""
    return config["model_table"][model]


# --------------------------------------------------------------------------- paths


def results_path(*parts):
    return os.path.join(config["results_dir"], *parts)


def figures_path(*parts):
    return os.path.join(config["figures_dir"], *parts)


def log_path(*parts):
    return os.path.join(config["logs_dir"], *parts)


def benchmark_path(*parts):
    return os.path.join(config["benchmarks_dir"], *parts)


def search_threads():
    """Threads of a prior or search job: `search_threads`, else `threads`."""
    return config.get("search_threads") or config["threads"]


def prepared_model(model):
    """JSON record written by `depthprune prepare-model`: the model is converted/downloaded once
    into the model cache, and every model job after it only loads."""
    return os.path.join(config["model_cache_dir"], f"{model}.prepared.json")


def memo_path(wildcards):
    """SQLite memo shared by the prior and every search of one (model, calibration): a cache, not a
    declared output, so Snakemake never deletes it and reruns start warm."""
    return results_path(
        wildcards.model, wildcards.calibration, f"seed{wildcards.seed}", "memo.sqlite"
    )


def eval_cache_dir(wildcards):
    """Content-addressed evaluation cache: identical removed sets are evaluated once per model."""
    return results_path(wildcards.model, "eval_cache")


# One search's files: results/<model>/<calibration>/seed<k>/M<M>/<algorithm>/ (and its log and
# timing), as wildcard patterns for the search and evaluate_selections rules.
SEARCH_PARTS = ("{model}", "{calibration}", "seed{seed}", "M{budget}", "{algorithm}")


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
            wildcards.model,
            calibration,
            f"seed{wildcards.seed}",
            f"M{budget}",
            algorithm,
            "selection.json",
        )
        for calibration in calibration_labels()
        for budget in model_budgets(wildcards.model)
        for algorithm in config["algorithms"]
    ]


def one_pass_per_model():
    """evaluation.pass_per: model (evaluate_pass scores every set of a model and seed at once)."""
    return config["evaluation"]["pass_per"] == "model"


def evaluation_pass(model, seed):
    """The record of the one evaluation pass over a model's sets, or nothing (pass_per: cell, where
    each evaluate_selections job computes its own sets)."""
    return (
        results_path(model, f"seed{seed}", "evaluation_pass.json")
        if one_pass_per_model()
        else []
    )


def selection_args(wildcards, input):
    """--selection per selection.json of the job's input (a pass: nothing written per set)."""
    return " ".join(f"--selection {shlex.quote(path)}" for path in input.selections)


def selection_and_outputs(wildcards, input, output):
    """--selection and its three --out-* per algorithm, in the same order."""
    return " ".join(
        cli_args(
            {
                "selection": selection,
                "out_metrics": metrics,
                "out_raw": raw,
                "out_samples": samples,
            }
        )
        for selection, metrics, raw, samples in zip(
            input.selections, output.metrics, output.raw, output.samples
        )
    )


def search_workdir(wildcards):
    """Scratch folder of one search (the BO study's SQLite): kept when a job fails, so it resumes."""
    return search_file("work").format(**dict(wildcards.items()))


# --------------------------------------------------------------------------- targets


def package_function(module, name):
    """A function of the depthprune package, also when Snakemake runs outside its environment
    (e.g. --sdm conda): then from this repository's src/."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        sys.path.insert(0, os.path.join(workflow.basedir, "src"))
        return getattr(importlib.import_module(module), name)


def calibration_variants():
    """Every calibration of the study, at each of `calibration_sizes` (when given): one label per
    size (tlm_cs170k, tlm_cs170k-n16, ppl_c4-64x128; see src/depthprune/calibration/variants.py).
    Seeds are not part of the label: each seed has its own seed<k>/ folder below it.
    """
    study_variants = package_function(
        "depthprune.calibration.variants", "study_variants"
    )
    try:
        return study_variants(
            config["calibrations"], config.get("calibration_sizes"), None
        )
    except ValueError as err:
        raise WorkflowError(f"config: {err}") from None


def calibration_labels():
    return [variant.label for variant in calibration_variants()]


def calibration_wildcard():
    """Wildcard regex of a calibration label: a calibration name and an optional size."""
    names = alternatives(schema_enum("calibration_name"))
    return f"(?:{names})(?:-n[0-9]+|-[0-9]+x[0-9]+)?"


def model_budgets(model):
    """Absolute budgets (M) of one model: its own `budgets`, else the top-level ones; fractions of
    depth ("7/32") resolved with its `n_layers` (rule in src/depthprune/budgets.py)."""
    resolve_budgets = package_function("depthprune.budgets", "resolve_budgets")

    entry = model_entry(model)
    budgets = entry.get("budgets") or config["budgets"]
    where = (
        f"model_table.{model}.budgets"
        if entry.get("budgets")
        else f"budgets (for model {model})"
    )
    try:
        return resolve_budgets(budgets, entry.get("n_layers"), where)
    except ValueError as err:
        raise WorkflowError(f"config: {err}") from None


def search_dirs():
    """results/<model>/<calibration>/seed<k>/M<M>/<algorithm> for every search the config asks for."""
    return [
        results_path(model, calibration, f"seed{seed}", f"M{budget}", algorithm)
        for model in config["models"]
        for calibration in calibration_labels()
        for seed in config["seeds"]
        for budget in model_budgets(model)
        for algorithm in config["algorithms"]
    ]


def all_selections():
    return [os.path.join(d, "selection.json") for d in search_dirs()]


def all_metrics():
    pruned = [os.path.join(d, "metrics.csv") for d in search_dirs()]
    dense = [results_path(model, "dense", "metrics.csv") for model in config["models"]]
    return pruned + dense


def all_samples():
    # Per-document scores next to each metrics.csv (the bootstrap's input).
    return [p.replace("metrics.csv", "samples.parquet") for p in all_metrics()]


FIGURES = ["figure1", "figure2", "figure3"]
TABLES = ["table1", "table2", "table3", "table4", "table5", "table6"]


# --------------------------------------------------------------------------- CLI arguments


def cli_args(options, flags=None):
    """Config options -> the depthprune CLI's arguments, one shell-quoted string.

    Config keys are the CLI's flags: `ppl_seq_len` -> `--ppl-seq-len` (`flags` maps the few that
    differ). None drops the option; a list is comma-joined (`--tasks a,b`); a mapping gives one
    `--flag key=value` per entry, in key order (`--param beam_width=3`); values are written as the
    YAML scalars the CLI parses back (`true`, not Python's `True`).
    """
    parts = []
    for key, value in options.items():
        flag = (flags or {}).get(key) or f"--{key.replace('_', '-')}"
        if value is None:
            continue
        if isinstance(value, dict):
            parts += [
                f"{flag} {shlex.quote(f'{k}={yaml_scalar(v)}')}"
                for k, v in sorted(value.items())
            ]
        elif isinstance(value, list):
            parts.append(f"{flag} {shlex.quote(','.join(map(str, value)))}")
        else:
            parts.append(f"{flag} {shlex.quote(yaml_scalar(value))}")
    return " ".join(parts)


def yaml_scalar(value):
    return value if isinstance(value, str) else json.dumps(value)


def model_args(wildcards):
    """Shared model options (cli_common.add_model_args) for the model alias in `wildcards`."""
    entry = model_entry(wildcards.model)
    return cli_args(
        {
            "model": entry["spec"],
            "name": wildcards.model,
            "dtype": entry["dtype"],
            "device": config["device"],
            "model_cache_dir": config["model_cache_dir"],
        }
    )


def prepare_model_args(wildcards):
    """Options of `depthprune prepare-model` (which always works on the CPU in float32)."""
    return cli_args(
        {
            "model": model_entry(wildcards.model)["spec"],
            "model_cache_dir": config["model_cache_dir"],
        }
    )


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
    """`--data-dir DIR` (or nothing: the hub): running with another data_dir plans nothing new."""
    return NotARerunTrigger(cli_args({"data_dir": config["data_dir"]}))


def memo_journal_param(wildcards):
    """The memo's SQLite journal (wal on one machine; delete on a network filesystem written from
    several nodes, selected by the SLURM profile): switching profiles reruns nothing."""
    return NotARerunTrigger(
        cli_args({"memo_journal": config["evaluator"].get("memo_journal", "wal")})
    )


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


def forced_rule(name):
    """Whether Snakemake was asked to force the rule `name` (--forcerun name, --forceall)."""
    settings = workflow.dag_settings
    return bool(getattr(settings, "forceall", False)) or name in set(
        getattr(settings, "forcerun", None) or ()
    )


def calibration_args(wildcards):
    """Calibration options: identical for the prior and every search of a (model, calibration), so
    they share the memo. Only the options of this calibration's objective (its registry entry says
    which) are passed, so changing the TLM settings does not rerun the perplexity-calibrated jobs.
    """
    parse_label = package_function("depthprune.calibration.variants", "parse_label")
    calibration_spec = package_function(
        "depthprune.calibration.specs", "calibration_spec"
    )
    variant = parse_label(wildcards.calibration)  # size of a calibration-size study
    objective = calibration_spec(variant.base).objective
    sizes = config["calibration"][objective]
    return cli_args(
        {
            "calibration": variant.base,
            "n_samples": variant.n_samples or sizes["n_samples"],
            "seq_len": variant.seq_len or sizes["seq_len"],
            "seed": wildcards.seed,
            "calibration_label": (
                wildcards.calibration if wildcards.calibration != variant.base else None
            ),
            "format": sizes.get("format"),  # TLM only
        },
        flags={"format": "--tlm-format"},
    )  # --data-dir comes through data_dir_param


def evaluator_args(wildcards):
    protected = model_entry(wildcards.model)["protected_layers"]
    options = {k: v for k, v in config["evaluator"].items() if k != "memo_journal"}
    return cli_args(
        {
            "memo": memo_path(wildcards),
            "protected": " ".join(str(i) for i in sorted(protected)) or None,
            **options,  # token_budget, state_device, state_cache_gib
        }
    )  # memo_journal comes through memo_journal_param


def search_param_args(wildcards):
    """`--param key=value` for this algorithm's hyper-parameters only: a params change of one
    algorithm then reruns only its searches."""
    return cli_args({"param": config["search_params"].get(wildcards.algorithm) or {}})


def evaluation_args(wildcards):
    options = dict(config["evaluation"])
    headline = options.pop("headline_metrics")
    options.pop("pass_per")  # which jobs run a pass, not how a set is scored
    return cli_args(
        {
            **options,
            "cache_dir": eval_cache_dir(wildcards),
            "headline_metrics": headline,
        },
        flags={"headline_metrics": "--headline-metric"},
    )  # + data_dir_param


def analysis_args(wildcards):
    """The statistics options of `depthprune render` (config section `analysis`)."""
    return cli_args(config["analysis"])


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
    return outputs

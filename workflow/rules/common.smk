# Helpers shared by the stage files (config layering, output paths, the command-line arguments of
# the depthprune CLI built from the config). Functions only: they read `config` when called, which is
# after the Snakefile has validated it (and filled in the schema's defaults).

import json
import os
import re
import shlex
import sys

import yaml
from snakemake.common.configfile import load_configfile
from snakemake.exceptions import WorkflowError
from snakemake.utils import update_config

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


def resolve_config_layers(config):
    """Apply two corrections to Snakemake's layering of config.yaml, --configfile and --config.

    - A profile's `models:` replaces the default model set: Snakemake merges mappings key by key,
      which would add config/paper.yaml's three models to config.yaml's SmolLM2. The model set is
      the one of the last layer (--configfile files in order, then --config) that names one.
    - --config values get YAML types: Snakemake reads nested values with YAML's BaseLoader, which
      keeps every scalar a string (`budgets=[7,9]` would give ["7", "9"]).
    """
    command_line = _yaml_typed(workflow.config_settings.config or {})
    update_config(config, command_line)
    layers = [load_configfile(path) for path in workflow.overwrite_configfiles]
    layers.append(command_line)
    for layer in reversed(layers):
        if isinstance(layer, dict) and layer.get("models") is not None:
            config["models"] = layer["models"]
            break


def _yaml_typed(value):
    """Scalars spelt as strings ("7", "0.2", "null", "true") -> their YAML type; others unchanged."""
    if isinstance(value, dict):
        return {key: _yaml_typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_yaml_typed(item) for item in value]
    if isinstance(value, str):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        if parsed is None or isinstance(parsed, (bool, int, float)):
            return parsed
    return value


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
    return results_path(
        wildcards.model, wildcards.calibration, f"seed{wildcards.seed}", "memo.sqlite"
    )


def eval_cache_dir(wildcards):
    """Content-addressed evaluation cache: identical removed sets are evaluated once per model."""
    return results_path(wildcards.model, "eval_cache")


def search_workdir(wildcards):
    """Scratch folder of one search (the BO study's SQLite): kept when a job fails, so it resumes."""
    return results_path(
        wildcards.model,
        wildcards.calibration,
        f"seed{wildcards.seed}",
        f"M{wildcards.budget}",
        wildcards.algorithm,
        "work",
    )


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

    entry = config["models"][model]
    budgets = entry.get("budgets") or config["budgets"]
    where = (
        f"models.{model}.budgets"
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


AGGREGATE_TABLES = ["selections", "metrics", "summary"]
FIGURES = ["figure1", "figure2", "figure3"]
TABLES = ["table1", "table2", "table3", "table4", "table5", "table6"]


# --------------------------------------------------------------------------- CLI arguments


def join_args(pairs):
    """`--flag value` pairs -> one shell-quoted string; a None value drops its flag."""
    return " ".join(
        f"{flag} {shlex.quote(str(value))}"
        for flag, value in pairs
        if value is not None
    )


def model_args(wildcards):
    """Shared model options (cli_common.add_model_args) for the model alias in `wildcards`."""
    model = config["models"][wildcards.model]
    return join_args(
        [
            ("--model", model["spec"]),
            ("--name", wildcards.model),
            ("--dtype", model["dtype"]),
            ("--device", config["device"]),
            ("--model-cache-dir", config["model_cache_dir"]),
        ]
    )


def prepare_model_args(wildcards):
    """Options of `depthprune prepare-model` (which always works on the CPU in float32)."""
    return join_args(
        [
            ("--model", config["models"][wildcards.model]["spec"]),
            ("--model-cache-dir", config["model_cache_dir"]),
        ]
    )


def data_args():
    return join_args([("--data-dir", config["data_dir"])])


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
    return NotARerunTrigger(data_args())


def memo_journal_param(wildcards):
    """The memo's SQLite journal (wal on one machine; delete on a network filesystem written from
    several nodes, selected by the SLURM profile): switching profiles reruns nothing."""
    return NotARerunTrigger(
        join_args([("--memo-journal", config["evaluator"].get("memo_journal", "wal"))])
    )


def recompute_param(rule):
    """`--recompute` when Snakemake was asked to force this rule (`--forcerun rule`, `--forceall`),
    so a forced rerun computes again instead of reading the job's own cache (memo, evaluation cache,
    BO study), which is not a Snakemake output. Jobs a cluster executor submits are re-planned by a
    Snakemake process on the node that does not see the flag: there, also set DEPTHPRUNE_RECOMPUTE=1
    in the environment (the CLI reads it)."""

    def param(wildcards):
        settings = workflow.dag_settings
        forced = bool(getattr(settings, "forceall", False)) or rule in set(
            getattr(settings, "forcerun", None) or ()
        )
        return NotARerunTrigger("--recompute" if forced else "")

    return param


def calibration_args(wildcards):
    """Calibration options: identical for the prior and every search of a (model, calibration), so
    they share the memo. Only the options of this calibration's objective are passed, so changing
    the TLM settings does not rerun the perplexity-calibrated jobs."""
    parse_label = package_function("depthprune.calibration.variants", "parse_label")
    variant = parse_label(
        wildcards.calibration
    )  # size and seed of a calibration-size study
    calibration = variant.base
    kind = "tlm" if calibration.startswith("tlm") else "perplexity"
    sizes = config["calibration"][kind]
    pairs = [
        ("--calibration", calibration),
        ("--n-samples", variant.n_samples or sizes["n_samples"]),
        ("--seq-len", variant.seq_len or sizes["seq_len"]),
        ("--seed", wildcards.seed),
    ]
    if wildcards.calibration != calibration:
        pairs.append(("--calibration-label", wildcards.calibration))
    if kind == "tlm":
        pairs.append(("--tlm-format", sizes["format"]))
    return join_args(pairs)  # --data-dir comes through data_dir_param


def evaluator_args(wildcards):
    options = config["evaluator"]
    protected = config["models"][wildcards.model]["protected_layers"]
    return join_args(
        [
            ("--memo", memo_path(wildcards)),
            ("--protected", " ".join(str(i) for i in sorted(protected)) or None),
            ("--token-budget", options["token_budget"]),
            ("--state-device", options["state_device"]),
            ("--state-cache-gib", options["state_cache_gib"]),
        ]
    )


def search_param_args(wildcards):
    """`--param key=value` for this algorithm's hyper-parameters only: a params change of one
    algorithm then reruns only its searches."""
    params = config["search_params"].get(wildcards.algorithm) or {}
    return " ".join(
        f"--param {shlex.quote(f'{key}={yaml_scalar(value)}')}"
        for key, value in sorted(params.items())
    )


def yaml_scalar(value):
    """A config value as the YAML scalar the CLI parses back (`true`, not Python's `True`)."""
    return value if isinstance(value, str) else json.dumps(value)


def evaluation_args(wildcards):
    options = config["evaluation"]
    pairs = [
        ("--tasks", ",".join(options["tasks"])),
        ("--limit", options["limit"]),
        ("--ppl-seq-len", options["ppl_seq_len"]),
        ("--ppl-max-tokens", options["ppl_max_tokens"]),
        ("--batch-size", options["batch_size"]),
        ("--cache-dir", eval_cache_dir(wildcards)),
    ]
    headline = " ".join(
        f"--headline-metric {shlex.quote(f'{benchmark}={metric}')}"
        for benchmark, metric in sorted(options["headline_metrics"].items())
    )
    return " ".join(
        part for part in (join_args(pairs), headline) if part
    )  # + data_dir_param


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

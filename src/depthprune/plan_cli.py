"""`depthprune plan` (science: plan.py) and `depthprune plan --write-profile` (slurm_profile.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from depthprune.errors import InputError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="a study's jobs, forward FLOPs, peak memory and projected hours, before it runs",
        description="Per rule and in total: jobs, forward FLOPs, peak memory per job and wall time at "
        "--throughput; last line `plan: jobs=N gpu_hours=H peak_gpu_gib=G`. Reads config.json files "
        "only (hub cache, converted models or the bundled paper models), never weights.",
    )
    parser.add_argument(
        "--configfile", nargs="*", default=[], help="presets layered over --base, as snakemake --configfile"
    )
    parser.add_argument(
        "--base",
        default="config.yaml",
        help="the repository's config.yaml, which the presets are layered over and beside which the "
        "workflow's schema is read (default: config.yaml in the current folder: run plan from the "
        "repository root)",
    )
    parser.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE", help="overrides (YAML values)")
    parser.add_argument(
        "--throughput",
        type=float,
        required=True,
        help="sustained TFLOP/s of one job's device (scripts/gpu_check.sh prints it)",
    )
    parser.add_argument(
        "--gpu-gib", type=float, default=80.0, help="device memory for the state cache's cap (default 80)"
    )
    parser.add_argument("--load-gbps", type=float, default=2.0, help="GB/s at which weights load (default 2)")
    parser.add_argument("--model-cache-dir", help="converted models (default: the config's model_cache_dir)")
    parser.add_argument(
        "--selections", default="results/aggregate/selections.csv", help="measured blocks per evaluation (aggregate)"
    )
    parser.add_argument(
        "--data-dir",
        default=None,
        help="data the token counts are read from (default: the config's data_dir, else ../shared/data if present)",
    )
    parser.add_argument("--write-profile", help="write the SLURM profile with runtimes from this plan to this file")
    parser.set_defaults(func=run)


def overrides(items: list[str]) -> dict:
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"--config {item!r}: expected KEY=VALUE")
        try:
            out[key] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise InputError(f"--config {item!r}: the value is not valid YAML ({problem})") from None
    return out


def validated(config: dict, base: str) -> dict:
    """The workflow's checks on the merged config (the Snakefile's): unknown keys, the schema (its
    defaults filled in as Snakemake does), then the plan-time study checks; ConfigError names the key."""
    from depthprune import workflow
    from depthprune.config_schema import SCHEMA_FILE, load_schema, validate

    schema_path = Path(base).resolve().parent / SCHEMA_FILE
    if not schema_path.is_file():
        raise FileNotFoundError(f"{schema_path}: the workflow's config schema (run plan from the repository root)")
    schema = load_schema(schema_path)  # the registries' names filled in, as the Snakefile loads it
    workflow.validate_config(config, schema)
    validate(config, schema)  # fills the schema's defaults, as the Snakefile does
    workflow.check_study(config)
    return config


def run(args: argparse.Namespace) -> int:
    from depthprune import plan as planning
    from depthprune.calibration.sources import DATA_SOURCES
    from depthprune.io import check_inputs_outputs

    check_inputs_outputs(
        {
            "--base": args.base,
            "--configfile": args.configfile,
            "--selections": args.selections,
            "--data-dir": args.data_dir,
            "--model-cache-dir": args.model_cache_dir,
        },
        {"--write-profile": args.write_profile},
    )
    config = planning.merge(planning.load_config(args.configfile, args.base), overrides(args.config))
    config = validated(config, args.base)
    data_dir = args.data_dir or config.get("data_dir")
    mirror = Path("../shared/data")  # the offline mirror: the hub's documents (the planner reads no hub)
    if data_dir is None and all((mirror / source.mirror_file).is_file() for source in DATA_SOURCES.values()):
        data_dir = str(mirror)

    def plan_of(study: dict):
        return planning.build_plan(
            study,
            args.throughput,
            model_cache_dir=args.model_cache_dir,
            gpu_gib=args.gpu_gib,
            load_gbps=args.load_gbps,
            selections_csv=args.selections,
            data_dir=data_dir,
        )

    plan = plan_of(config)
    if args.write_profile:
        from depthprune.io import atomic_write_text
        from depthprune.slurm_profile import render_profile

        # evaluate_pass's runtime: the one-pass-per-model layout of the same study
        per_model = plan_of(planning.merge(config, {"evaluation": {"pass_per": "model"}}))
        text = render_profile(plan, args.configfile, args.throughput, per_model)
        atomic_write_text(args.write_profile, text)
    from depthprune import workflow

    if workflow.evaluation_only(config):
        print(workflow.source_study_text(config))  # the sets' source: no prior or search is priced
    print(planning.format_plan(plan))
    return 0

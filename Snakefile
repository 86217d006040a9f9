# depthprune: the paper's study as a Snakemake workflow.
#   prepare_model -> prior -> search -> evaluate -> aggregate -> render (Figures 1-3, Tables 1-6, observations)
# Every rule calls the `depthprune` CLI; the science lives in src/depthprune, the design in config.yaml
# (presets: config/paper.yaml, config/smoke.yaml, config/extended.yaml, config/seeds.yaml, ...).

from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "workflow/rules/common.smk"


# --config values get their YAML types; a preset's `models:` list replaces the default one (lists
# are replaced, mappings such as `model_table` merged, by Snakemake's own layering).
config.update(yaml_typed(config))
check_config_keys()  # a misspelt key: one line naming it and the allowed keys
validate_config()  # the schema, with the registries' names and its defaults filled in
# Plan-time checks (depthprune.workflow.check_study): model aliases, protected layers and budgets
# against a model's n_layers, every mirror file in data_dir; one error naming the key or file.
check_study()
warn_environment_drift()  # installed versions other than requirements/lock.txt's: said in one line
warn_if_running()  # another snakemake running jobs here: who, and what to do instead of --unlock


# The running study's record (depthprune/running_study.py): written when jobs start, removed at the end.
onstart:
    record_running()


onsuccess:
    clear_running()


onerror:
    clear_running()


wildcard_constraints:
    model="[A-Za-z0-9][A-Za-z0-9._-]*",
    calibration=calibration_wildcard(),
    algorithm=alternatives(schema_enum("algorithm_name")),
    budget="[0-9]+",
    seed="[0-9]+",


include: "workflow/rules/prepare_model.smk"


# An evaluation-only study (config source_study) copies each run's set from its source study instead
# of searching: no prior or search rule exists to plan (docs/method.md §11).
if wf.evaluation_only(config):
    print(wf.source_study_text(config), file=sys.stderr)
else:

    include: "workflow/rules/prior.smk"
    include: "workflow/rules/search.smk"


include: "workflow/rules/evaluate.smk"
include: "workflow/rules/evaluation_only.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/render.smk"


# Light jobs that write settings, read results and draw: on a cluster executor they run on the submit host instead
# of queueing as cluster jobs (seconds of work against a job's Snakemake start-up).
localrules:
    evaluation_settings,
    aggregate_tables,
    aggregate,
    render,
    failed_search_sensitivity,
    calibration_size,
    figures,


# The whole study: every search and every evaluation, then the figures. On a fresh clone the
# committed results/aggregate/ and figures/ exist already, but the per-job results do not, so the
# study runs and aggregate/render redraw from the user's own results. `snakemake figures` asks only
# for the rendered files: with the committed aggregate present it plans `render` alone (issue #16).
rule all:
    default_target: True
    input:
        rules.render.output,
        rules.aggregate_tables.input,
        rules.aggregate_tables.output,
        # the calibration-size study's figure and table, when the config asks for one
        rules.calibration_size.output if config.get("calibration_sizes") else [],

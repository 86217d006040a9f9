# `depthprune render`, `depthprune calibration-size` -> depthprune/reporting/cli.py (science: reporting/render.py, calibration_size.py).
# Stage 5: Figures 1-3, Tables 1-6 and the observations from results/aggregate alone (no model is loaded; seconds).
# `snakemake figures --forcerun render` redraws them all after a change to the plotting code.


rule render:
    input:
        summary=rules.aggregate_tables.output.summary,
        selections=rules.aggregate_tables.output.selections,
        metrics=rules.aggregate_tables.output.metrics,
        samples=rules.aggregate_tables.output.samples_parquet,
    output:
        **figure_outputs(),
        **table_outputs(),
    log:
        log_path("render.log"),
    conda:
        "../../envs/depthprune.yaml"
    params:
        aggregate_dir=lambda wildcards, input: os.path.dirname(input.summary),
        out_dir=lambda wildcards, output: os.path.dirname(output.figure1_png),
        analysis=analysis_args,
    shell:
        "depthprune --log-file {log:q} render"
        " --aggregate {params.aggregate_dir:q} --out {params.out_dir:q} {params.analysis}"


# Calibration-size study (config keys calibration_sizes and seeds): selection stability across seeds,
# calibration loss and the pruned models' accuracy and perplexity per size, from the aggregate.
rule calibration_size:
    input:
        summary=rules.aggregate_tables.output.summary,
    output:
        png=figures_path("calibration_size.png"),
        pdf=figures_path("calibration_size.pdf"),
        csv=figures_path("tables", "calibration_size.csv"),
        md=figures_path("tables", "calibration_size.md"),
        tex=figures_path("tables", "calibration_size.tex"),
    log:
        log_path("calibration_size.log"),
    conda:
        "../../envs/depthprune.yaml"
    params:
        aggregate_dir=lambda wildcards, input: os.path.dirname(input.summary),
        out_dir=lambda wildcards, output: os.path.dirname(output.png),
        bootstrap=bootstrap_args,
    shell:
        "depthprune --log-file {log:q} calibration-size"
        " --aggregate {params.aggregate_dir:q} --out {params.out_dir:q} {params.bootstrap}"


# Which verdicts hinge on a failed search (docs/method.md §7, "Failed searches"): the study rendered again
# without every algorithm that failed in one of its runs, each verdict beside the full render's
# (verdict_changes.{csv,md}). Its own target, not part of `figures`: `snakemake failed_search_sensitivity`.
rule failed_search_sensitivity:
    input:
        summary=rules.aggregate_tables.output.summary,
        samples=rules.aggregate_tables.output.samples_parquet,
        observations=rules.render.output.observations_csv,
        paper_comparison=rules.render.output.paper_comparison_csv,
    output:
        csv=figures_path(SENSITIVITY_DIR, "verdict_changes.csv"),
        md=figures_path(SENSITIVITY_DIR, "verdict_changes.md"),
        observations=figures_path(SENSITIVITY_DIR, "tables", "observations.md"),
    log:
        log_path("failed_search_sensitivity.log"),
    conda:
        "../../envs/depthprune.yaml"
    params:
        aggregate_dir=lambda wildcards, input: os.path.dirname(input.summary),
        figures_dir=lambda wildcards, input: os.path.dirname(
            os.path.dirname(input.observations)
        ),
        out_dir=lambda wildcards, output: os.path.dirname(output.csv),
        analysis=analysis_args,
    shell:
        "depthprune --log-file {log:q} failed-search-sensitivity --aggregate {params.aggregate_dir:q}"
        " --figures {params.figures_dir:q} --out {params.out_dir:q} {params.analysis}"


rule figures:
    # Target: every figure and table, from results/aggregate alone (re-rendered by `--forcerun render`;
    # a calibration-size study also `--forcerun calibration_size`).
    input:
        rules.render.output,
        rules.calibration_size.output if config.get("calibration_sizes") else [],
        # no file: with `figures` the only target, a missing aggregate is an error saying how to make it
        figures_sources(rules.aggregate_tables.output),

# `depthprune aggregate` -> depthprune/reporting/cli.py (science: reporting/aggregate.py).
# Stage 4: collect every selection.json and metrics.csv into the tidy tables under
# results/aggregate/, the only input of the figures and tables.


rule aggregate:
    input:
        selections=all_selections(),
        metrics=all_metrics(),
        samples=all_samples(),
        base_study=wf.base_study_inputs(config),  # a committed study's runs reused (config base_study)
    output:
        selections=results_path("aggregate", "selections.csv"),
        metrics=results_path("aggregate", "metrics.csv"),
        summary=results_path("aggregate", "summary.csv"),
        selections_parquet=results_path("aggregate", "selections.parquet"),
        metrics_parquet=results_path("aggregate", "metrics.parquet"),
        summary_parquet=results_path("aggregate", "summary.parquet"),
        samples_parquet=results_path("aggregate", "samples.parquet"),
    log:
        log_path("aggregate.log"),
    conda:
        "../../envs/depthprune.yaml"
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.summary),
        protected=cli_options("aggregate_protected_args"),  # each model's search space, for the nulls
        base_study=cli_options("base_study_args"),
    shell:
        "depthprune --log-file {log:q} aggregate"
        " --selections {input.selections:q} --metrics {input.metrics:q}"
        " --samples {input.samples:q} {params.protected} {params.base_study}"
        " --out {params.out_dir:q}"

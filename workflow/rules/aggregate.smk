# `depthprune aggregate` -> depthprune/reporting/cli.py (science: reporting/aggregate.py).
# Stage 4: collect every selection.json and metrics.csv into the tidy tables under
# results/aggregate/, the only input of the figures and tables.


rule aggregate_tables:
    input:
        selections=all_selections(),
        metrics=all_metrics(),
        samples=all_samples(),
        # each metrics.csv's lm_eval.json: the provenance the aggregate checks (dtype, scoring, torch)
        raw=all_raw_evaluations(),
        base_study=wf.base_study_inputs(config),  # a committed study's runs reused (config base_study)
        # config source_study.perplexity (§11); ancient, as source_selection's inputs
        source_perplexity=[ancient(f) for f in wf.source_perplexity_inputs(config)],
    output:
        # update: Snakemake neither deletes the previous aggregate before the job nor keeps a failed
        # job's files; the CLI builds the new files apart and moves them in only when all are written.
        selections=update(results_path("aggregate", "selections.csv")),
        metrics=update(results_path("aggregate", "metrics.csv")),
        summary=update(results_path("aggregate", "summary.csv")),
        selections_parquet=update(results_path("aggregate", "selections.parquet")),
        metrics_parquet=update(results_path("aggregate", "metrics.parquet")),
        summary_parquet=update(results_path("aggregate", "summary.parquet")),
        samples_parquet=update(results_path("aggregate", "samples.parquet")),
    log:
        log_path("aggregate.log"),
    conda:
        "../../envs/depthprune.yaml"
    params:
        out_dir=lambda wildcards, output: os.path.dirname(output.summary),
        protected=cli_options("aggregate_protected_args"),  # each model's search space, for the nulls
        base_study=cli_options("base_study_args"),
        source_perplexity=cli_options("source_perplexity_args"),
    shell:
        "depthprune --log-file {log:q} aggregate"
        " --selections {input.selections:q} --metrics {input.metrics:q}"
        " --samples {input.samples:q} {params.protected} {params.base_study} {params.source_perplexity}"
        " --out {params.out_dir:q}"


# Target `snakemake aggregate`: the aggregate and every run file it is made of. Snakemake replans a
# job whose output is missing only when a target needs that file, so naming the runs' files here
# (as rule `all` does) makes a deleted selection.json or metrics.csv rerun its search or evaluation
# and then the aggregate; asking for the aggregate's files alone would find them present and stop.
rule aggregate:
    input:
        rules.aggregate_tables.input,
        rules.aggregate_tables.output,

# `depthprune evaluate` -> depthprune/evaluation/cli.py (science: evaluation/run.py, engine/set_group.py).
# Stage 3: evaluate every pruned model and the dense model (perplexities and zero-shot accuracy).
# Removed sets are scored in passes: the blocks the sets of a pass share below their first
# difference run once for all of them. Every set gets its own entry in the content-addressed cache
# results/<model>/eval_cache (not a declared output), so identical sets are computed once per model
# and a rerun (one more algorithm, say) computes only the sets not cached yet.
#
# evaluation.pass_per: model (default): evaluate_pass scores every set of a model and seed (all
# calibrations and budgets, and the dense model) in one pass; evaluate_selections and evaluate_dense
# then write each set's metrics.csv, lm_eval.json and samples.parquet from the cache, loading no
# model. pass_per: cell: no evaluate_pass; each evaluate_selections job scores the sets of its
# (model, calibration, seed, M) in a pass of its own, and evaluate_dense the dense model.


# What every evaluation of a model depends on beyond its sets: the evaluation options and their
# provenance (code and package versions, SCORING_VERSION, dtype, the benchmark data's content). Its
# params change when any of them does, and the file is an ordinary (not ancient) input of every
# evaluation job, so one run reruns the pass, every job writing metrics.csv files from it, the
# aggregate and the figures. The pass's own output cannot carry this: it is an ancient input of the
# writers (a pass rerun for another budget must not rewrite every group), and Snakemake does not
# check the params of a job below one that reruns when the edge between them is ancient.
rule evaluation_settings:
    output:
        results_path("{model}", "evaluation_settings.txt"),
    log:
        log_path("evaluate", "{model}", "settings.log"),
    conda:
        "../../envs/depthprune.yaml"
    params:
        evaluation=cli_options("evaluation_args"),
        provenance=provenance_param("evaluation"),
    shell:
        "printf '%s\\n' {params.evaluation:q} {params.provenance:q} > {output:q} 2> {log:q}"


rule evaluate_pass:
    input:
        model=prepared_model("{model}"),
        selections=model_selections,
        settings=rules.evaluation_settings.output[0],
    output:
        results_path("{model}", "seed{seed}", "evaluation_pass.json"),
    log:
        log_path("evaluate", "{model}", "seed{seed}", "pass.log"),
    benchmark:
        benchmark_path("evaluate", "{model}", "seed{seed}", "pass.tsv")
    conda:
        "../../envs/depthprune.yaml"
    threads: job_threads("evaluate_pass")
    resources:
        **job_resources("evaluate_pass"),
    params:
        model=cli_options("model_args"),
        evaluation=cli_options("evaluation_args"),
        # Code and package versions, dtype, the benchmark data's content: a change reruns the job.
        provenance=provenance_param("evaluation"),
        sets=selection_args,
        # Not rerun triggers (see NotARerunTrigger in common.smk):
        data_dir=data_dir_param,
        recompute=recompute_param("evaluate_pass"),
    shell:
        "depthprune --log-file {log:q} evaluate {params.recompute} {params.model}"
        " {params.evaluation} {params.data_dir} {params.sets} --dense --out-pass {output:q}"


rule evaluate_selections:
    input:
        model=prepared_model("{model}"),
        selections=group_outputs("selection.json"),
        # ancient: the pass orders the jobs; a pass rerun for other sets (another budget, say)
        # does not rerun this one, whose sets and their cache entries are unchanged
        evaluation_pass=lambda wildcards: ancient(
            evaluation_pass(wildcards.model, wildcards.seed)
        ),
        settings=rules.evaluation_settings.output[0],  # a changed setting reruns this job
    output:
        metrics=group_outputs("metrics.csv"),
        raw=group_outputs("lm_eval.json"),
        samples=group_outputs("samples.parquet"),
    log:
        log_path("evaluate", "{model}", "{calibration}", "seed{seed}", "M{budget}.log"),
    benchmark:
        benchmark_path(
            "evaluate", "{model}", "{calibration}", "seed{seed}", "M{budget}.tsv"
        )
    conda:
        "../../envs/depthprune.yaml"
    threads: job_threads("evaluate_selections")
    resources:
        **job_resources("evaluate_selections"),
    params:
        model=cli_options("model_args"),
        evaluation=cli_options("evaluation_args"),
        # Code and package versions, dtype, the benchmark data's content: a change reruns the job.
        provenance=provenance_param("evaluation"),
        sets=selection_and_outputs,
        # Not rerun triggers (see NotARerunTrigger in common.smk):
        data_dir=data_dir_param,
        recompute=recompute_param("evaluate_selections"),
    shell:
        "depthprune --log-file {log:q} evaluate {params.recompute} {params.model}"
        " {params.evaluation} {params.data_dir} {params.sets}"


# The dense model: no --selection and no --removed (labels: calibration none, algorithm dense).
rule evaluate_dense:
    input:
        model=prepared_model("{model}"),
        evaluation_pass=lambda wildcards: ancient(
            evaluation_pass(wildcards.model, config["seeds"][0])
        ),
        settings=rules.evaluation_settings.output[0],  # a changed setting reruns this job
    output:
        metrics=results_path("{model}", "dense", "metrics.csv"),
        raw=results_path("{model}", "dense", "lm_eval.json"),
        samples=results_path("{model}", "dense", "samples.parquet"),
    log:
        log_path("evaluate", "{model}", "dense.log"),
    benchmark:
        benchmark_path("evaluate", "{model}", "dense.tsv")
    conda:
        "../../envs/depthprune.yaml"
    threads: job_threads("evaluate_dense")
    resources:
        **job_resources("evaluate_dense"),
    params:
        model=cli_options("model_args"),
        evaluation=cli_options("evaluation_args"),
        # Code and package versions, dtype, the benchmark data's content: a change reruns the job.
        provenance=provenance_param("evaluation"),
        # Not rerun triggers (see NotARerunTrigger in common.smk):
        data_dir=data_dir_param,
        recompute=recompute_param("evaluate_dense"),
    shell:
        "depthprune --log-file {log:q} evaluate {params.recompute} {params.model}"
        " {params.evaluation} {params.data_dir}"
        " --out-metrics {output.metrics:q} --out-raw {output.raw:q}"
        " --out-samples {output.samples:q}"

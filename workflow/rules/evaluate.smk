# `depthprune evaluate` -> depthprune/evaluation/cli.py (science: evaluation/run.py, engine/set_group.py).
# Stage 3: evaluate every pruned model and the dense model (perplexities and zero-shot accuracy).
# One job per (model, calibration, seed, M) evaluates the removed sets of all its algorithms in one
# pass: the blocks the sets share below their first difference run once for all of them. Each set
# still gets its own metrics.csv, lm_eval.json and samples.parquet, and its own entry in the
# content-addressed cache results/<model>/eval_cache (not a declared output): identical sets are
# computed once per model, and a rerun of the group (one more algorithm, say) computes only the
# sets not cached yet.


rule evaluate_selections:
    input:
        model=prepared_model("{model}"),
        selections=group_outputs("selection.json"),
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
    threads: config["threads"]
    resources:
        gpu=config["resources"]["gpu"],
        mem_mb=config["resources"]["mem_mb"],
    params:
        model=model_args,
        evaluation=evaluation_args,
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
    threads: config["threads"]
    resources:
        gpu=config["resources"]["gpu"],
        mem_mb=config["resources"]["mem_mb"],
    params:
        model=model_args,
        evaluation=evaluation_args,
        # Not rerun triggers (see NotARerunTrigger in common.smk):
        data_dir=data_dir_param,
        recompute=recompute_param("evaluate_dense"),
    shell:
        "depthprune --log-file {log:q} evaluate {params.recompute} {params.model}"
        " {params.evaluation} {params.data_dir}"
        " --out-metrics {output.metrics:q} --out-raw {output.raw:q}"
        " --out-samples {output.samples:q}"

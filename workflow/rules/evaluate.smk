# `depthprune evaluate` -> depthprune/evaluation/cli.py (science: evaluation/run.py).
# Stage 3: evaluate every pruned model and the dense model (perplexities and zero-shot accuracy).
# Identical removed sets (several algorithms often agree) are computed once per model through the
# content-addressed cache results/<model>/eval_cache, which is not a declared output.


rule evaluate_selection:
    input:
        model=prepared_model("{model}"),
        selection=rules.search.output.selection,
    output:
        metrics=search_file("metrics.csv"),
        raw=search_file("lm_eval.json"),
        samples=search_file("samples.parquet"),
    log:
        search_log("evaluate"),
    benchmark:
        search_benchmark("evaluate")
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
        recompute=recompute_param("evaluate_selection"),
    shell:
        "depthprune --log-file {log:q} evaluate {params.recompute} {params.model}"
        " --selection {input.selection:q} {params.evaluation} {params.data_dir}"
        " --out-metrics {output.metrics:q} --out-raw {output.raw:q}"
        " --out-samples {output.samples:q}"


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

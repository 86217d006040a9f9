# `depthprune prepare-model` -> depthprune/models/cli.py (science: models/loading.py).
# Stage 0: make every model loadable once (convert the embedded GGUF to safetensors, build tiny
# models, download hub checkpoints), so the many model jobs after it only load. What it prints
# (spec, folder, family, number of blocks) is the JSON record Snakemake tracks.


rule prepare_model:
    output:
        prepared_model("{model}"),
    log:
        log_path("prepare_model", "{model}.log"),
    benchmark:
        benchmark_path("prepare_model", "{model}.tsv")
    conda:
        "../../envs/depthprune.yaml"
    threads: job_threads("prepare_model")
    resources:
        **job_resources("prepare_model"),
    params:
        model=cli_options("prepare_model_args"),
    shell:
        "depthprune --log-file {log:q} prepare-model {params.model} --out {output:q}"

# `depthprune prior` -> depthprune/prior_cli.py (science: prior.py, the subset evaluator).
# Stage 1: the single-layer ablation prior s_i = L({i}) per (model, calibration), shared by every
# budget and algorithm. It also fills the memo the searches start from.


rule prior:
    input:
        model=prepared_model("{model}"),
        # calibration_sizes.nested_tlm_priors: a smaller TLM size's prior is derived from the largest's
        items_from=lambda wildcards: wf.nested_prior_source(config, wildcards) or [],
    output:
        results_path(*RUN_PARTS, "prior.json"),
    log:
        log_path("prior", "{model}", "{calibration}", "seed{seed}.log"),
    benchmark:
        benchmark_path("prior", "{model}", "{calibration}", "seed{seed}.tsv")
    conda:
        "../../envs/depthprune.yaml"
    threads: job_threads("prior")
    resources:
        **job_resources("prior"),
    params:
        model=cli_options("model_args"),
        calibration=cli_options("calibration_args"),
        # with calibration_sizes.nested_tlm_priors, also --keep-items / --items-from (nested_prior_args)
        evaluator=cli_options("prior_evaluator_args"),
        # Code and package versions, dtype, the calibration data's content: a change reruns the job.
        provenance=provenance_param("calibration"),
        # Not rerun triggers (see NotARerunTrigger in common.smk):
        data_dir=data_dir_param,
        memo_journal=memo_journal_param,
        recompute=recompute_param("prior"),
    shell:
        "depthprune --log-file {log:q} prior {params.recompute}"
        " {params.model} {params.calibration} {params.data_dir} {params.evaluator} {params.memo_journal}"
        " --out {output:q}"

# `depthprune search` -> depthprune/search/cli.py (science: search/runner.py, search/<algorithm>.py).
# Stage 2: one search per (model, calibration, M, algorithm). Searches of one (model, calibration)
# share the memo (results/<model>/<calibration>/memo.sqlite); each keeps its scratch state (the BO
# study) in a work/ folder that is not a declared output, so a failed or killed job resumes from it.


rule search:
    input:
        model=prepared_model("{model}"),
        prior=rules.prior.output[0],
    output:
        selection=search_file("selection.json"),
        trace=search_file("trace.csv"),
    log:
        search_log("search"),
    benchmark:
        search_benchmark("search")
    conda:
        "../../envs/depthprune.yaml"
    threads: job_threads("search")
    resources:
        **job_resources("search"),
    params:
        # Only this algorithm's hyper-parameters: editing one reruns only its searches.
        hyperparameters=cli_options("search_param_args"),
        workdir=search_workdir,
        model=cli_options("model_args"),
        calibration=cli_options("calibration_args"),
        evaluator=cli_options("evaluator_args"),
        heldout=cli_options("heldout_args"),  # the selected set's held-out loss (calibration.<objective>.heldout_samples)
        # Code and package versions, dtype, the calibration data's content: a change reruns the job.
        provenance=provenance_param("calibration"),
        # Not rerun triggers (see NotARerunTrigger in common.smk):
        data_dir=data_dir_param,
        memo_journal=memo_journal_param,
        recompute=recompute_param("search"),
    shell:
        "depthprune --log-file {log:q} search {params.recompute}"
        " --algorithm {wildcards.algorithm} --budget {wildcards.budget}"
        " --prior {input.prior:q} --workdir {params.workdir:q} {params.hyperparameters}"
        " {params.model} {params.calibration} {params.data_dir} {params.evaluator} {params.memo_journal}"
        " {params.heldout} --out-selection {output.selection:q} --out-trace {output.trace:q}"

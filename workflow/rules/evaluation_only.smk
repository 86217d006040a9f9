# `depthprune source-selection`, `depthprune random-sets` -> depthprune/evaluation_only.py (docs/method.md §11).
# Evaluation-only studies (config source_study): each run's removed set is copied from the source
# study (its selection.json, or a row of its aggregate) instead of searched; the source files are
# inputs only. The random-set control (config random_sets): per model, seed and M, `count` distinct
# uniform M-sets of the allowed blocks, written like selection.json files (calibration none,
# algorithm random_set_<i>) and evaluated by evaluate_random_sets like a search group.


if wf.evaluation_only(config):

    rule source_selection:
        input:
            # ancient: the source study's files are committed inputs, and a clone's checkout order (not
            # an edit) makes them newer than this study's committed aggregate; `--forcerun
            # source_selection` re-copies after a source search is rerun.
            lambda wildcards: ancient(wf.source_selection_input(config, wildcards)),
        output:
            search_file("selection.json"),
        log:
            search_log("source"),
        localrule: True  # a file copy: on a cluster it runs on the submit host
        conda:
            "../../envs/depthprune.yaml"
        params:
            labels=cli_options("source_selection_args"),
        shell:
            "depthprune --log-file {log:q} source-selection --from {input:q} {params.labels}"
            " --out {output:q}"


if config.get("random_sets"):

    rule random_sets:
        output:
            random_set_outputs("selection.json"),
        log:
            log_path("random_sets", "{model}", "seed{seed}", "M{budget}.log"),
        localrule: True  # draws and writes a few JSON files
        conda:
            "../../envs/depthprune.yaml"
        params:
            draw=cli_options("random_sets_args"),
            outputs=lambda wildcards, output: " ".join(
                f"--out {shlex.quote(path)}" for path in output
            ),
        shell:
            "depthprune --log-file {log:q} random-sets {params.draw} {params.outputs}"

    rule evaluate_random_sets:
        input:
            model=prepared_model("{model}"),
            selections=random_set_outputs("selection.json"),
            evaluation_pass=lambda wildcards: ancient(
                evaluation_pass(wildcards.model, wildcards.seed)
            ),
            settings=rules.evaluation_settings.output[0],  # a changed setting reruns this job
        output:
            metrics=random_set_outputs("metrics.csv"),
            raw=random_set_outputs("lm_eval.json"),
            samples=random_set_outputs("samples.parquet"),
        log:
            log_path("evaluate", "{model}", "none", "seed{seed}", "M{budget}.log"),
        benchmark:
            benchmark_path("evaluate", "{model}", "none", "seed{seed}", "M{budget}.tsv")
        conda:
            "../../envs/depthprune.yaml"
        threads: job_threads("evaluate_selections")
        resources:
            **job_resources("evaluate_selections"),
        params:
            model=cli_options("model_args"),
            evaluation=cli_options("evaluation_args"),
            provenance=provenance_param("evaluation"),
            sets=selection_and_outputs,
            data_dir=data_dir_param,
            recompute=recompute_param("evaluate_selections"),
        shell:
            "depthprune --log-file {log:q} evaluate {params.recompute} {params.model}"
            " {params.evaluation} {params.data_dir} {params.sets}"

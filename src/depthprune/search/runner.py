"""Run one search on an evaluator and turn it into selection.json and trace.csv.

Kept apart from the command line so the benchmark and the tests drive exactly the same code.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from depthprune import locking
from depthprune.io import (
    OwnedFolder,
    atomic_write_csv,
    atomic_write_json,
    format_layers,
    package_versions,
    parse_layers,
)
from depthprune.progress import Progress
from depthprune.search import get_algorithm
from depthprune.search.base import (
    SearchProblem,
    TraceEntry,
    TracingEvaluator,
    validate_budget,
    validate_prior,
)
from depthprune.seeding import seed_everything
from depthprune.versions import SCORING_VERSION

log = logging.getLogger(__name__)

TRACE_COLUMNS = ["order", "removed", "loss", "accuracy", "seconds", "memo_hit"]
WORKDIR_LOCK = "search.lock"  # in the workdir: one search process per workdir (locking.py)


def workdir_lock(workdir: str | Path):
    """Hold the search workdir for this process (a context manager; ``locking.LockHeld`` if taken)."""
    return locking.exclusive(Path(workdir) / WORKDIR_LOCK, f"search workdir {workdir}")


# Written into a workdir the search created (or found empty): it marks the folder as the search's own.
WORKDIR_MARKER = "depthprune-workdir"
# What a search writes into its workdir, under names it reserves (the lock, the BO study, SQLite's
# side files). --recompute deletes only these, and refuses a folder holding anything else: a marked
# workdir the user has since put a file in, or `--workdir .`. A folder holding nothing else but no
# marker is a workdir of a search from before the marker existed.
WORKDIR = OwnedFolder(
    marker=WORKDIR_MARKER,
    command="`depthprune search`",
    reserved=re.compile(rf"{re.escape(WORKDIR_LOCK)}|bo_study\.sqlite3(\.lock|-journal|-wal|-shm)?"),
)


def claim_workdir(workdir: str | Path) -> None:
    """Mark ``workdir`` as the search's own if nothing else is in it (new, empty or only the
    search's files); a folder with other files stays unmarked, so --recompute will refuse it."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if WORKDIR.is_marked(workdir):
        return
    if not WORKDIR.foreign_entries(workdir):
        (workdir / WORKDIR_MARKER).write_text(
            "scratch folder of `depthprune search`; --recompute deletes the search's files in it, and "
            "refuses to run while it holds any other file\n",
            encoding="utf-8",
        )


def clear_workdir(workdir: str | Path) -> None:
    """Delete a search's scratch state (``--recompute``), keeping the lock file this process holds:
    deleted, the next process would create and lock a new file under the same name beside us.

    Only the search's own files are deleted; a folder holding any other file is refused with
    ValueError naming them, before anything is deleted (``io.OwnedFolder``).
    """
    WORKDIR.empty(
        workdir,
        "--workdir",
        "--recompute would empty this folder",
        keep=(WORKDIR_LOCK,),
    )


@dataclass
class SearchResult:
    algorithm: str
    budget: int
    seed: int
    n_layers: int
    objective_kind: str
    removed: tuple[int, ...]
    loss: float
    accuracy: float | None
    hyperparameters: dict[str, Any]
    distinct_evaluations: int
    memo_hits: int
    blocks_run: int
    naive_blocks: int
    search_seconds: float
    trace: list[TraceEntry] = field(repr=False)
    prior_seconds: float = 0.0  # the prior's cost included in search_seconds (0 if it reads no prior)
    diagnostics: dict[str, Any] = field(default_factory=dict)  # SearchProblem.diagnostics
    dtype: str | None = None  # the model's resolved precision (None for evaluators without a model)
    calibration_tokens: int | None = None  # real tokens of the calibration rows (None without a model)
    # The selected set scored on the held-out draw (search --heldout-samples): loss, accuracy, n_samples, ...
    heldout: dict[str, Any] | None = None


def run_search(
    evaluator: Any,
    algorithm: str,
    budget: int,
    prior: Sequence[float | None] | np.ndarray,
    seed: int,
    workdir: str | Path,
    params: dict[str, Any] | None = None,
    prior_seconds: float = 0.0,
) -> SearchResult:
    """Run ``algorithm`` for removing ``budget`` layers; the evaluator may be shared with other searches.

    ``prior_seconds`` is what computing ``prior`` cost (prior.json's ``cost.seconds``); a search
    that reads the prior is charged it, as one-shot's cost is the prior's in the paper's Table 4.
    """
    search = get_algorithm(algorithm)
    hyperparameters = search.resolve_params(params)
    protected = frozenset(int(i) for i in evaluator.protected)
    validate_budget(budget, evaluator.n_layers, protected)
    tracer = TracingEvaluator(evaluator)
    charged_prior = float(prior_seconds) if search.uses_prior(hyperparameters) else 0.0
    if charged_prior:
        # The prior's own sets (the dense model and every single layer) are paid for by the charge.
        tracer.prepaid = frozenset({()} | {(i,) for i in range(evaluator.n_layers)})
    problem = SearchProblem(
        evaluator=tracer,
        budget=budget,
        prior=validate_prior(list(prior), evaluator.n_layers, protected),
        seed=seed,
        protected=protected,
        workdir=Path(workdir),
    )
    seed_everything(seed)
    # Progress of the requests the search makes, logged by the evaluator as sets are answered.
    previous_progress = getattr(evaluator, "progress", None)
    if hasattr(evaluator, "progress"):
        expected = search.expected_requests(len(problem.allowed), budget, hyperparameters)
        evaluator.progress = Progress(f"search {algorithm} M={budget}", total=expected, unit="set requests")
    log.info(
        "search %s: M=%d, N=%d, protected=%s, params=%s",
        algorithm,
        budget,
        problem.n_layers,
        sorted(protected),
        hyperparameters,
    )
    start = time.perf_counter()
    try:
        with workdir_lock(workdir):  # already held when called by `depthprune search`
            removed = parse_layers(search.run(problem, hyperparameters))
    finally:
        if hasattr(evaluator, "progress"):
            evaluator.progress = previous_progress
    if len(removed) != budget or not protected.isdisjoint(removed):
        raise RuntimeError(f"search {algorithm} returned an invalid set {removed} for M={budget}")
    # The chosen set's loss: normally already in the trace; one-shot evaluates it here.
    record = tracer.lookup(removed) or tracer.evaluate([removed])[0]
    # A diagnostic that is not part of the search (CBO's energy-loss check on random sets) is not charged.
    wall_seconds = time.perf_counter() - start - float(problem.diagnostics.get("diagnostic_seconds", 0.0))
    seconds = wall_seconds + tracer.resumed_seconds + tracer.shared_memo_seconds + charged_prior
    log.info(
        "search %s: removed %s, loss %.6g, %d distinct evaluations, %.1f s",
        algorithm,
        removed,
        record.loss,
        tracer.distinct_evaluations,
        seconds,
    )
    return SearchResult(
        algorithm=algorithm,
        budget=budget,
        seed=seed,
        n_layers=problem.n_layers,
        objective_kind=tracer.objective_kind,
        removed=removed,
        loss=float(record.loss),
        accuracy=None if record.accuracy is None else float(record.accuracy),
        hyperparameters=hyperparameters,
        distinct_evaluations=tracer.distinct_evaluations,
        memo_hits=tracer.memo_hits,
        blocks_run=tracer.blocks_run,
        naive_blocks=tracer.naive_blocks,
        search_seconds=seconds,
        trace=list(tracer.entries),
        prior_seconds=charged_prior,
        diagnostics=dict(problem.diagnostics),
        dtype=evaluator.describe().get("dtype") if hasattr(evaluator, "describe") else None,
        calibration_tokens=evaluator.describe().get("calibration_tokens") if hasattr(evaluator, "describe") else None,
    )


def selection_document(result: SearchResult, model: str, calibration: str) -> dict[str, Any]:
    """selection.json, field for field as docs/architecture.md fixes it."""
    perplexity = result.objective_kind == "perplexity"
    return {
        "model": model,
        "calibration": calibration,
        "budget": result.budget,
        "algorithm": result.algorithm,
        "removed": list(result.removed),
        "n_layers": result.n_layers,
        "loss": result.loss,
        "calibration_perplexity": math.exp(result.loss) if perplexity else None,
        "calibration_accuracy": None if perplexity else result.accuracy,
        "distinct_evaluations": result.distinct_evaluations,
        "memo_hits": result.memo_hits,
        "blocks_run": result.blocks_run,
        "search_seconds": result.search_seconds,
        "prior_seconds": result.prior_seconds,
        "seed": result.seed,
        "dtype": result.dtype,
        "calibration_tokens": result.calibration_tokens,
        "hyperparameters": result.hyperparameters,
        "diagnostics": result.diagnostics,
        **({"heldout": result.heldout} if result.heldout is not None else {}),
        "scoring_version": SCORING_VERSION,  # with dtype and versions: the aggregate's provenance check
        "versions": package_versions(),
    }


def trace_frame(trace: Sequence[TraceEntry]) -> pd.DataFrame:
    """trace.csv: every evaluation request in order (repeats flagged memo_hit)."""
    rows = [
        {
            "order": e.order,
            "removed": format_layers(e.removed),
            "loss": e.loss,
            "accuracy": e.accuracy,
            "seconds": e.seconds,
            "memo_hit": e.memo_hit,
        }
        for e in trace
    ]
    return pd.DataFrame(rows, columns=TRACE_COLUMNS)


def write_outputs(
    result: SearchResult, model: str, calibration: str, selection_path: str | Path, trace_path: str | Path
) -> None:
    # Trace first: selection.json is the file that marks the search as done.
    atomic_write_csv(trace_path, trace_frame(result.trace))
    atomic_write_json(selection_path, selection_document(result, model, calibration))

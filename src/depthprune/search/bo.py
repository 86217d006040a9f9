"""Prior-guided Bayesian optimisation with Optuna's TPE sampler (spec §4.5).

Random-key encoding: one float key k_i in [0, 1] per removable layer; the M largest keys (ties by
the lower index) are removed. The prior's top-M set is enqueued as the first trial (k_i = 1 for its
layers, 0 otherwise) and counts among the random start-up trials.

Resumable: the study lives in SQLite under the problem's workdir. ``n_trials`` is the total, so a
run killed at any point and started again finishes the remaining trials only. To end with the same
result as an uninterrupted run, the sampler's randomness must not depend on the process: every trial
gets a fresh TPE sampler seeded from (seed, number of completed trials), so the k-th trial is a
function of the seed and the k − 1 completed trials only. A trial the kill interrupted is marked
failed (TPE ignores failed trials) and its draw is simply repeated. Each completed trial stores its
subset, accuracy, seconds, blocks run and compute seconds in a user attribute ("evaluation"); a
resumed run replays them into the trace, so the counts cover all processes. The study's user
attribute "compute_seconds" accumulates the compute time of every process (updated after each
trial), so the search time excludes the downtime between a kill and the restart.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import sqlite3
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import optuna
from optuna.samplers import BaseSampler, TPESampler
from optuna.trial import TrialState
from tqdm.auto import tqdm

from depthprune.search.base import SearchAlgorithm, SearchProblem, normalise_set

log = logging.getLogger(__name__)

STUDY_FILE = "bo_study.sqlite3"
_DONE = (TrialState.COMPLETE,)


class BayesianOptimisation(SearchAlgorithm):
    name = "bo"
    defaults = {
        "n_trials": 200,
        "n_startup_trials": 10,
        "prior_seeded": True,
        "multivariate": True,
        "n_ei_candidates": 24,
    }

    def expected_requests(self, n_allowed: int, budget: int, params: dict) -> int:
        return int(params["n_trials"])

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        if params["n_trials"] < 1:
            raise ValueError(f"search algorithm 'bo': n_trials must be at least 1, got {params['n_trials']}")
        process_start = time.perf_counter()
        allowed = problem.allowed
        names = [f"k{i:03d}" for i in allowed]
        with _quiet_optuna():
            study = _open_study(problem, params)
            _fail_interrupted_trials(study)
            done = study.get_trials(deepcopy=False, states=_DONE)
            for trial in done:
                _replay(problem, trial)
            # Compute spent by earlier (killed) processes on this study; the downtime is not in it.
            earlier_seconds = float(study.user_attrs.get("compute_seconds", 0.0))
            problem.evaluator.resumed_seconds = earlier_seconds
            if done:
                log.info("bo: resuming study with %d of %d trials done", len(done), params["n_trials"])
            waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
            if params["prior_seeded"] and not done and not waiting:
                top = set(problem.prior_top())
                study.enqueue_trial({name: float(i in top) for name, i in zip(names, allowed)})

            remaining = max(0, params["n_trials"] - len(done))
            for _ in tqdm(range(remaining), desc="bo trials", leave=False, disable=None if remaining > 1 else True):
                start = time.perf_counter()
                trial = study.ask()
                keys = np.array([trial.suggest_float(name, 0.0, 1.0) for name in names])
                removed = decode_keys(keys, allowed, problem.budget)
                blocks_before = problem.evaluator.blocks_run
                record = problem.evaluator.evaluate([removed])[0]
                evaluation = {
                    "removed": list(removed),
                    "accuracy": record.accuracy,
                    "seconds": record.seconds,
                    "blocks_run": problem.evaluator.blocks_run - blocks_before,
                    "compute_seconds": time.perf_counter() - start,
                }
                trial.set_user_attr("evaluation", evaluation)  # one write: SQLite commits are the cost
                # Optuna rejects NaN (a diverged pruned model); infinity ranks it last all the same.
                study.tell(trial, record.loss if math.isfinite(record.loss) else math.inf)
                study.set_user_attr("compute_seconds", earlier_seconds + time.perf_counter() - process_start)
        best = problem.evaluator.best(size=problem.budget)
        return normalise_set(best.removed)


def decode_keys(keys: np.ndarray, allowed: tuple[int, ...], budget: int) -> tuple[int, ...]:
    """Random-key decoding: the layers with the M largest keys; ties go to the lower index."""
    order = np.lexsort((np.asarray(allowed), -np.asarray(keys)))
    return normalise_set(np.asarray(allowed)[order[:budget]])


class TrialSeededTPESampler(BaseSampler):
    """TPE whose random state is rebuilt for every trial from (seed, completed trials).

    Optuna keeps a sampler's random state in memory only, so a resumed study would otherwise draw
    differently from an uninterrupted one. Rebuilding the sampler in ``before_trial`` makes each
    draw a function of the seed and the study's completed trials, which are in SQLite.
    """

    def __init__(self, seed: int, **tpe_kwargs: Any):
        self._seed = int(seed)
        self._tpe_kwargs = tpe_kwargs
        self._current = self._make(0)

    def _make(self, n_completed: int) -> TPESampler:
        trial_seed = int(np.random.SeedSequence([self._seed, n_completed]).generate_state(1)[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # constant_liar off: this study is sequential, and a trial left RUNNING by a kill must
            # not influence later draws.
            return TPESampler(seed=trial_seed, constant_liar=False, **self._tpe_kwargs)

    def before_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        n_completed = len(study.get_trials(deepcopy=False, states=_DONE))
        self._current = self._make(n_completed)
        self._current.before_trial(study, trial)

    def infer_relative_search_space(self, study, trial):
        return self._current.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return self._current.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self._current.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study, trial, state, values) -> None:
        self._current.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self._current.reseed_rng()


def study_name(problem: SearchProblem, params: dict) -> str:
    """Identifies the search, so that a workdir reused for another search starts a new study.

    ``n_trials`` is left out on purpose: raising it continues the same study.
    """
    fingerprint = {
        "budget": problem.budget,
        "seed": problem.seed,
        "n_layers": problem.n_layers,
        "protected": sorted(problem.protected),
        "prior": [round(float(s), 10) for s in np.nan_to_num(problem.prior, nan=-1.0)],
        "params": {k: v for k, v in sorted(params.items()) if k != "n_trials"},
    }
    digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:16]
    return f"bo-M{problem.budget}-seed{problem.seed}-{digest}"


def _open_study(problem: SearchProblem, params: dict) -> optuna.Study:
    workdir = Path(problem.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    sampler = TrialSeededTPESampler(
        problem.seed,
        n_startup_trials=params["n_startup_trials"],
        n_ei_candidates=params["n_ei_candidates"],
        multivariate=params["multivariate"],
    )
    path = (workdir / STUDY_FILE).resolve()
    storage = optuna.storages.RDBStorage(
        f"sqlite:///{path}", engine_kwargs={"creator": lambda: _connect_sqlite(path)}
    )
    return optuna.create_study(
        study_name=study_name(problem, params),
        storage=storage,
        sampler=sampler,
        direction="minimize",
        load_if_exists=True,
    )


def _connect_sqlite(path: Path) -> sqlite3.Connection:
    """SQLite in WAL mode with synchronous=NORMAL: a killed process never corrupts the study or
    loses a committed trial, but a commit no longer waits for an fsync (Optuna commits ~20 times
    per trial; with fsync that costs more than a trial on a small model)."""
    connection = sqlite3.connect(str(path), timeout=60)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    return connection


def _fail_interrupted_trials(study: optuna.Study) -> None:
    """A RUNNING trial in a study nobody else uses was cut short by a kill: mark it failed."""
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        log.info("bo: trial %d was interrupted; it is marked failed and redrawn", trial.number)
        study.tell(trial.number, state=TrialState.FAIL)
        fixed = trial.system_attrs.get("fixed_params")
        if fixed is not None:  # the enqueued prior trial: enqueue it again
            study.enqueue_trial(fixed)


def _replay(problem: SearchProblem, trial: optuna.trial.FrozenTrial) -> None:
    evaluation = trial.user_attrs["evaluation"]
    problem.evaluator.replay(
        removed=evaluation["removed"],
        loss=trial.value,
        accuracy=evaluation["accuracy"],
        seconds=evaluation["seconds"],
        blocks_run=evaluation["blocks_run"],
    )


@contextmanager
def _quiet_optuna() -> Iterator[None]:
    """Optuna logs one INFO line per trial; keep our own log readable."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)

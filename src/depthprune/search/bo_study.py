"""The Optuna side of BO (docs/method.md §4.5): the study in SQLite and its trial-seeded TPE sampler.

Kept apart from ``bo.py`` so that Optuna is imported only when a BO search runs (``depthprune --help``
and ``render`` start without it); ``bo.py`` explains the resumable design.
"""

from __future__ import annotations

import logging
import sqlite3
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.samplers import BaseSampler, TPESampler
from optuna.trial import TrialState

from depthprune.errors import InputError

log = logging.getLogger(__name__)

# Finished trials: every trial evaluates a new set and is COMPLETE (repaired proposals included).
DONE = (TrialState.COMPLETE,)
WAITING = (TrialState.WAITING,)


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
        n_completed = len(study.get_trials(deepcopy=False, states=DONE))
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


def open_study(path: Path, name: str, seed: int, params: dict) -> optuna.Study:
    """The study ``name`` in the SQLite file ``path`` (created, or loaded to resume)."""
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    sampler = TrialSeededTPESampler(
        seed,
        n_startup_trials=params["n_startup_trials"],
        n_ei_candidates=params["n_ei_candidates"],
        multivariate=params["multivariate"],
    )
    try:
        storage = optuna.storages.RDBStorage(
            f"sqlite:///{path}", engine_kwargs={"creator": lambda: _connect_sqlite(path)}
        )
        return optuna.create_study(
            study_name=name,
            storage=storage,
            sampler=sampler,
            direction="minimize",
            load_if_exists=True,
        )
    except Exception as err:  # SQLAlchemy wraps SQLite's error (its .orig)
        cause = getattr(err, "orig", None)
        if not isinstance(cause, sqlite3.Error):
            raise
        raise study_error(path, cause) from err


def study_error(path: Path, err: sqlite3.Error) -> InputError:
    """A corrupt study is the search's own scratch state (--recompute starts a new one); an I/O
    error (disk full, ulimit -f, permissions) is said as such, since the study may be intact."""
    name = getattr(err, "sqlite_errorname", "") or ""
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")) or "not a database" in str(err) or "malformed" in str(err):
        return InputError(
            f"{path}: not a readable BO study ({err}); it is this search's scratch state: rerun the search "
            "with --recompute to start a new study"
        )
    return InputError(
        f"{path}: I/O error on the BO study SQLite file ({err}{', ' + name if name else ''}): check free disk "
        "space, the file size limit (ulimit -f) and permissions; the study itself may be intact, keep it"
    )


def _connect_sqlite(path: Path) -> sqlite3.Connection:
    """SQLite in WAL mode with synchronous=NORMAL: a killed process never corrupts the study or
    loses a committed trial, but a commit no longer waits for an fsync (Optuna commits ~20 times
    per trial; with fsync that costs more than a trial on a small model)."""
    connection = sqlite3.connect(str(path), timeout=60)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    return connection


def fail_interrupted_trials(study: optuna.Study) -> None:
    """A RUNNING trial in a study nobody else uses was cut short by a kill: mark it failed."""
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        log.info("bo: trial %d was interrupted; it is marked failed and redrawn", trial.number)
        study.tell(trial.number, state=TrialState.FAIL)
        fixed = trial.system_attrs.get("fixed_params")
        if fixed is not None:  # the enqueued prior trial: enqueue it again
            study.enqueue_trial(fixed)


def replay(problem, trial: optuna.trial.FrozenTrial) -> None:
    evaluation = trial.user_attrs["evaluation"]
    problem.evaluator.replay(
        removed=evaluation["removed"],
        loss=trial.value,
        accuracy=evaluation["accuracy"],
        seconds=evaluation.get("seconds", 0.0),
        blocks_run=evaluation.get("blocks_run", 0),
    )


@contextmanager
def quiet_optuna() -> Iterator[None]:
    """Optuna logs one INFO line per trial; keep our own log readable."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)

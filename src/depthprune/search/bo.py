"""Prior-guided Bayesian optimisation with Optuna's TPE sampler (spec §4.5).

Random-key encoding: one float key k_i in [0, 1] per removable layer; the M largest keys (ties by
the lower index) are removed. With ``prior_guided`` the prior's top-M set is enqueued as the first
trial and counts among the random start-up trials; its keys are ``prior_key`` (0.75) for its layers
and 1 − ``prior_key`` for the others, inside the interval rather than at its bounds: TPE's Parzen
estimators centre a kernel on every observed key, and a best trial sitting exactly on the bounds
pulled the "good" density onto the bounds, so TPE kept proposing the prior's set again (the
measured distinct counts are in docs/method.md §4.5). ``prior_guided: false`` (the ``bo_random``
control) enqueues nothing.

Budget = distinct sets (docs/method.md §4.5): ``n_trials`` counts distinct subsets evaluated. When
TPE proposes a set this search already evaluated, the trial is told the stored loss (so TPE's
model stays consistent), flagged as a repeat, not counted, and TPE is asked again. At most
``max_asks`` trials are asked in all; if that cap stops the search first, the log and
``selection.json`` (``diagnostics``) say so, with the number of repeats. When ``n_trials`` is at
least the number of M-subsets, every subset is evaluated directly (the search is exhaustive).

Resumable: the study lives in SQLite under the problem's workdir. ``n_trials`` is the total, so a
run killed at any point and started again finishes the remaining trials only. To end with the same
result as an uninterrupted run, the sampler's randomness must not depend on the process: every trial
gets a fresh TPE sampler seeded from (seed, number of completed trials, repeats included), so the
k-th trial is a function of the seed and the k − 1 completed trials only. A trial the kill interrupted is marked
failed (TPE ignores failed trials) and its draw is simply repeated. Each completed trial stores its
subset, accuracy, seconds, blocks run and compute seconds in a user attribute ("evaluation"); a
resumed run replays them into the trace, so the counts cover all processes. The study's user
attribute "compute_seconds" accumulates the compute time of every process (updated after each
trial), so the search time excludes the downtime between a kill and the restart.
"""

from __future__ import annotations

import hashlib
import itertools
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

from depthprune.search.base import POSITIVE, SearchAlgorithm, SearchProblem, normalise_set

log = logging.getLogger(__name__)

STUDY_FILE = "bo_study.sqlite3"
# Finished trials: distinct sets are COMPLETE, repeats PRUNED (see BayesianOptimisation.run).
_DONE = (TrialState.COMPLETE, TrialState.PRUNED)


class BayesianOptimisation(SearchAlgorithm):
    name = "bo"
    defaults = {
        "n_trials": 200,
        "n_startup_trials": 10,
        "prior_guided": True,
        "prior_key": 0.75,
        "max_asks": 2000,
        "multivariate": True,
        "n_ei_candidates": 24,
    }
    ranges = {"n_trials": POSITIVE, "n_startup_trials": POSITIVE, "n_ei_candidates": POSITIVE}

    def uses_prior(self, params: dict) -> bool:
        return bool(params["prior_guided"])

    def expected_requests(self, n_allowed: int, budget: int, params: dict) -> int:
        return int(params["n_trials"])

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        if params["n_trials"] < 1:
            raise ValueError(f"search algorithm {self.name!r}: n_trials must be at least 1, got {params['n_trials']}")
        if not 0.5 < params["prior_key"] <= 1.0:
            raise ValueError(f"search algorithm {self.name!r}: prior_key must be in (0.5, 1], got {params['prior_key']}")
        if params["max_asks"] < params["n_trials"]:
            raise ValueError(
                f"search algorithm {self.name!r}: max_asks ({params['max_asks']}) must be at least n_trials ({params['n_trials']})"
            )
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
            asks = len(done)
            repeats = sum(bool(t.user_attrs["evaluation"].get("repeat")) for t in done)
            distinct = asks - repeats
            # A space smaller than n_trials cannot give n_trials distinct sets.
            target = min(params["n_trials"], math.comb(len(allowed), problem.budget))
            if done:
                log.info("%s: resuming study with %d of %d distinct sets done (%d asks)", self.name, distinct, target, asks)
            if target == math.comb(len(allowed), problem.budget) and not done:
                # n_trials covers the whole space: evaluate it (one batch) instead of waiting for
                # TPE to stumble on the last unseen sets.
                subsets = [normalise_set(c) for c in itertools.combinations(allowed, problem.budget)]
                problem.evaluator.evaluate(subsets)
                problem.diagnostics.update({"asks": 0, "repeats": 0, "distinct": len(subsets), "stopped": "every subset evaluated"})
                return normalise_set(problem.evaluator.best(size=problem.budget).removed)

            waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
            if params["prior_guided"] and not done and not waiting:
                top = set(problem.prior_top())
                high = float(params["prior_key"])
                study.enqueue_trial({name: high if i in top else 1.0 - high for name, i in zip(names, allowed)})

            progress = tqdm(total=target, initial=distinct, desc=f"{self.name} distinct sets", leave=False,
                            disable=None if target - distinct > 1 else True)
            while distinct < target and asks < params["max_asks"]:
                start = time.perf_counter()
                trial = study.ask()
                keys = np.array([trial.suggest_float(name, 0.0, 1.0) for name in names])
                removed = decode_keys(keys, allowed, problem.budget)
                known = problem.evaluator.lookup(removed)
                if known is not None:
                    # A repeat: it gets the stored value (reported as the trial's intermediate value)
                    # and is closed as PRUNED, not COMPLETE. Told as a COMPLETE duplicate, every
                    # repeat of the best set added weight to TPE's "good" density at that very point
                    # and TPE collapsed onto it (measured: 12 distinct sets in 2000 asks on a
                    # 20-set space); TPE ranks pruned trials below completed ones, which pushes the
                    # next proposals away from sets already known. Not counted; the trace flags it.
                    trial.set_user_attr("evaluation", {"removed": list(removed), "accuracy": known.accuracy,
                                                       "repeat": True, "loss": known.loss})
                    problem.evaluator.replay(removed, known.loss, known.accuracy, seconds=0.0, blocks_run=0)
                    if math.isfinite(known.loss):
                        trial.report(known.loss, step=0)
                    study.tell(trial, state=TrialState.PRUNED)
                    repeats += 1
                    asks += 1
                    study.set_user_attr("compute_seconds", earlier_seconds + time.perf_counter() - process_start)
                    continue
                else:
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
                    loss = record.loss
                    distinct += 1
                    progress.update(1)
                asks += 1
                # Optuna rejects NaN (a diverged pruned model); infinity ranks it last all the same.
                study.tell(trial, loss if math.isfinite(loss) else math.inf)
                study.set_user_attr("compute_seconds", earlier_seconds + time.perf_counter() - process_start)
            progress.close()
        stopped = "n_trials reached" if distinct >= params["n_trials"] else (
            "every subset evaluated" if distinct >= target else "max_asks reached")
        if stopped == "max_asks reached":
            log.warning("%s: stopped at max_asks=%d asks with %d of %d distinct sets (%d repeats)",
                        self.name, asks, distinct, params["n_trials"], repeats)
        log.info("%s: %d distinct sets in %d asks (%d repeats; %s)", self.name, distinct, asks, repeats, stopped)
        problem.diagnostics.update({"asks": asks, "repeats": repeats, "distinct": distinct, "stopped": stopped})
        best = problem.evaluator.best(size=problem.budget)
        return normalise_set(best.removed)


def decode_keys(keys: np.ndarray, allowed: tuple[int, ...], budget: int) -> tuple[int, ...]:
    """Random-key decoding: the layers with the M largest keys; ties go to the lower index."""
    order = np.lexsort((np.asarray(allowed), -np.asarray(keys)))
    return normalise_set(np.asarray(allowed)[order[:budget]])


class RandomInitBayesianOptimisation(BayesianOptimisation):
    """The random-initialisation control (paper's limitation 2): no prior set enqueued."""

    name = "bo_random"
    defaults = {**BayesianOptimisation.defaults, "prior_guided": False}


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
        n_completed = len(study.get_trials(deepcopy=False, states=_DONE))  # repeats (PRUNED) included
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

    Every setting the result depends on is in it: the evaluator's key (model content fingerprint,
    resolved dtype, calibration data and settings, scoring-code version), the budget, seed, protected
    layers, prior, ``n_trials`` and the sampler settings. A changed ``n_trials`` therefore starts a
    fresh study instead of reusing trials a fresh run with that ``n_trials`` would not have made.
    """
    describe = getattr(problem.evaluator, "describe", None)
    evaluator = describe() if callable(describe) else {}
    fingerprint = {
        "evaluator": {k: v for k, v in evaluator.items() if k not in ("model", "model_path")},
        "budget": problem.budget,
        "seed": problem.seed,
        "n_layers": problem.n_layers,
        "protected": sorted(problem.protected),
        "prior": [round(float(s), 10) for s in np.nan_to_num(problem.prior, nan=-1.0)],
        "params": dict(sorted(params.items())),
    }
    digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:16]
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
        seconds=evaluation.get("seconds", 0.0),  # repeats cost nothing
        blocks_run=evaluation.get("blocks_run", 0),
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

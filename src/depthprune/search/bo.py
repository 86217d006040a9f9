"""Prior-guided Bayesian optimisation with Optuna's TPE sampler (docs/method.md §4.5).

Random-key encoding: one float key k_i in [0, 1] per removable layer; the M largest keys (ties by
the lower index) are removed. With ``prior_guided`` the prior's top-M set is enqueued as the first
trial and counts among the random start-up trials; its keys are ``prior_key`` (0.75) for its layers
and 1 − ``prior_key`` for the others, inside the interval rather than at its bounds: TPE's Parzen
estimators centre a kernel on every observed key, and a best trial sitting exactly on the bounds
pulled the "good" density onto the bounds, so TPE kept proposing the prior's set again (the
measured distinct counts are in docs/method.md §4.5). ``prior_guided: false`` (the ``bo_random``
control) enqueues nothing.

Budget = distinct sets (docs/method.md §4.5): ``n_trials`` counts distinct subsets evaluated, and
every trial evaluates one subset this search has not evaluated before. TPE, even with repeats told
as PRUNED trials and asked again, keeps returning to the sets it likes: measured on a synthetic
12-layer objective (M = 5, 40 trials), prior-guided BO needed 448 asks for 40 distinct sets and
``bo_random`` stopped at 2000 asks with 34. So a proposal whose decoded set was already evaluated
is *repaired* (Baldwinian repair, as in random-key genetic algorithms): the trial keeps TPE's keys
and evaluates the nearest unevaluated set in key order instead, i.e. the single swap (a removed
layer out, a kept layer in) that lowers the keys' ranking least; if every single swap is known, a
seeded random unevaluated set. The trial is told that set's loss, and its "evaluation" attribute
records both sets. ``selection.json`` (``diagnostics``) gives the number of repaired trials. When
``n_trials`` is at least the number of M-subsets, every subset is evaluated directly.

Resumable: the study lives in SQLite under the problem's workdir. ``n_trials`` is the total, so a
run killed at any point and started again finishes the remaining trials only. To end with the same
result as an uninterrupted run, the sampler's randomness must not depend on the process: every trial
gets a fresh TPE sampler seeded from (seed, number of completed trials), and so does the repair's
random fallback, so the k-th trial is a function of the seed and the k − 1 completed trials only
(never of trial.number, which a failed trial advances). A trial the kill interrupted is marked
failed (TPE ignores failed trials) and its draw is simply repeated. Each completed trial stores its
subset, accuracy, seconds, blocks run and compute seconds in a user attribute ("evaluation"); a
resumed run replays them into the trace, so the counts cover all processes. The study's user
attribute "compute_seconds" accumulates the compute time of every process (updated after each
trial), so the search time excludes the downtime between a kill and the restart. One process at
a time: the study file is locked (``bo_study.sqlite3.lock``, locking.py), so a second process on
it, such as a rerun beside a still running orphan of a killed Snakemake, fails at once.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from depthprune import locking
from depthprune.errors import InputError
from depthprune.io import parse_layers
from depthprune.search.base import POSITIVE, Range, SearchAlgorithm, SearchProblem

log = logging.getLogger(__name__)

STUDY_FILE = "bo_study.sqlite3"


class BayesianOptimisation(SearchAlgorithm):
    name = "bo"
    display_name = "BO"
    marker = "v"  # matplotlib marker in the figures
    defaults = {
        "n_trials": 200,
        "n_startup_trials": 10,
        "prior_guided": True,
        "prior_key": 0.75,
        "multivariate": True,
        "n_ei_candidates": 24,
    }
    ranges = {
        "n_trials": POSITIVE,
        "n_startup_trials": POSITIVE,
        "n_ei_candidates": POSITIVE,
        # keys of the prior's set: removed layers at prior_key, kept ones at 1 - prior_key (docs/method.md §4.5)
        "prior_key": Range(minimum=0.5, maximum=1, exclusive_minimum=True),
    }

    def uses_prior(self, params: dict) -> bool:
        return bool(params["prior_guided"])

    def expected_requests(self, n_allowed: int, budget: int, params: dict) -> int:
        # One distinct set per trial (a repeated proposal is repaired); a smaller space is enumerated.
        return min(int(params["n_trials"]), math.comb(n_allowed, budget))

    def run(self, problem: SearchProblem, params: dict) -> tuple[int, ...]:
        if params["n_trials"] < 1:
            raise InputError(f"search algorithm {self.name!r}: n_trials must be at least 1, got {params['n_trials']}")
        if not 0.5 < params["prior_key"] <= 1.0:
            raise InputError(
                f"search algorithm {self.name!r}: prior_key must be in (0.5, 1], got {params['prior_key']}"
            )
        # Optuna is imported here, not at the top: `depthprune --help` and `render` never load it.
        from depthprune.search import bo_study

        process_start = time.perf_counter()
        allowed = problem.allowed
        names = [f"k{i:03d}" for i in allowed]
        study_path = Path(problem.workdir) / STUDY_FILE
        # One process per study: two would each fill it up to n_trials (locking.py).
        with bo_study.quiet_optuna(), locking.exclusive(Path(f"{study_path}.lock"), f"BO study {study_path}"):
            study = bo_study.open_study(study_path, study_name(problem, params), problem.seed, params)
            bo_study.fail_interrupted_trials(study)
            done = study.get_trials(deepcopy=False, states=bo_study.DONE)
            for trial in done:
                bo_study.replay(problem, trial)
            # Compute spent by earlier (killed) processes on this study; the downtime is not in it.
            earlier_seconds = float(study.user_attrs.get("compute_seconds", 0.0))
            problem.evaluator.resumed_seconds = earlier_seconds
            distinct = len(done)
            repaired = sum(bool(t.user_attrs["evaluation"].get("repaired_from")) for t in done)
            # A space smaller than n_trials cannot give n_trials distinct sets.
            space = math.comb(len(allowed), problem.budget)
            target = min(params["n_trials"], space)
            if done:
                log.info("%s: resuming study with %d of %d distinct sets done", self.name, distinct, target)
            if target == space and not done:
                return _evaluate_every_subset(problem)

            waiting = study.get_trials(deepcopy=False, states=bo_study.WAITING)
            if params["prior_guided"] and not done and not waiting:
                top = set(problem.prior_top())
                high = float(params["prior_key"])
                study.enqueue_trial({name: high if i in top else 1.0 - high for name, i in zip(names, allowed)})

            progress = tqdm(
                total=target,
                initial=distinct,
                desc=f"{self.name} distinct sets",
                leave=False,
                disable=None if target - distinct > 1 else True,
            )
            while distinct < target:
                start = time.perf_counter()
                trial = study.ask()
                keys = np.array([trial.suggest_float(name, 0.0, 1.0) for name in names])
                proposed = decode_keys(keys, allowed, problem.budget)
                removed = proposed
                if problem.evaluator.lookup(proposed) is not None:
                    # Seeded by the completed trials, not trial.number: a trial cut short by a kill
                    # keeps its number, so after a resume the numbers run one ahead. Uninterrupted,
                    # the two are equal, so a study that was never killed repairs as before.
                    seed = (problem.seed, distinct)
                    removed = repair_keys(keys, allowed, problem.budget, problem.evaluator.lookup, seed)
                    repaired += 1
                blocks_before = problem.evaluator.blocks_run
                record = problem.evaluator.evaluate([removed])[0]
                evaluation = {
                    "removed": list(removed),
                    "repaired_from": list(proposed) if removed != proposed else None,
                    "accuracy": record.accuracy,
                    "seconds": record.seconds,
                    "blocks_run": problem.evaluator.blocks_run - blocks_before,
                    "compute_seconds": time.perf_counter() - start,
                }
                trial.set_user_attr("evaluation", evaluation)  # one write: SQLite commits are the cost
                distinct += 1
                progress.update(1)
                # Optuna rejects NaN (a diverged pruned model); infinity ranks it last all the same.
                study.tell(trial, record.loss if math.isfinite(record.loss) else math.inf)
                study.set_user_attr("compute_seconds", earlier_seconds + time.perf_counter() - process_start)
            progress.close()
        stopped = "n_trials reached" if distinct >= params["n_trials"] else "every subset evaluated"
        log.info(
            "%s: %d distinct sets in %d trials (%d repaired proposals; %s)",
            self.name,
            distinct,
            distinct,
            repaired,
            stopped,
        )
        problem.diagnostics.update({"trials": distinct, "repaired": repaired, "distinct": distinct, "stopped": stopped})
        best = problem.evaluator.best(size=problem.budget)
        return parse_layers(best.removed)


def _evaluate_every_subset(problem: SearchProblem) -> tuple[int, ...]:
    """n_trials covers the whole space: evaluate it (one batch) instead of waiting for TPE to
    stumble on the last unseen sets."""
    subsets = [parse_layers(c) for c in itertools.combinations(problem.allowed, problem.budget)]
    problem.evaluator.evaluate(subsets)
    problem.diagnostics.update(
        {"trials": 0, "repaired": 0, "distinct": len(subsets), "stopped": "every subset evaluated"}
    )
    return parse_layers(problem.evaluator.best(size=problem.budget).removed)


def decode_keys(keys: np.ndarray, allowed: tuple[int, ...], budget: int) -> tuple[int, ...]:
    """Random-key decoding: the layers with the M largest keys; ties go to the lower index."""
    order = np.lexsort((np.asarray(allowed), -np.asarray(keys)))
    return parse_layers(np.asarray(allowed)[order[:budget]])


def repair_keys(keys: np.ndarray, allowed: tuple[int, ...], budget: int, known, seed) -> tuple[int, ...]:
    """The unevaluated set nearest to the keys' decoded set (``known(set)`` is None for unevaluated).

    Single swaps are tried in order of the key ranking they give up, k_out − k_in (smallest first;
    ties by layer index); if all are known, a seeded uniformly random unevaluated set. The caller
    guarantees that an unevaluated set exists (fewer distinct sets than the space holds).
    """
    by_layer = dict(zip(allowed, (float(k) for k in keys)))
    current = set(decode_keys(keys, allowed, budget))
    swaps = sorted(
        (by_layer[out] - by_layer[into], out, into) for out in current for into in allowed if into not in current
    )
    for _, out, into in swaps:
        candidate = parse_layers((current - {out}) | {into})
        if known(candidate) is None:
            return candidate
    rng = np.random.default_rng([int(part) for part in seed])
    while True:
        candidate = parse_layers(rng.choice(np.asarray(allowed), size=budget, replace=False))
        if known(candidate) is None:
            return candidate


class RandomInitBayesianOptimisation(BayesianOptimisation):
    """The random-initialisation control (paper's limitation 2): no prior set enqueued."""

    name = "bo_random"
    display_name = "BO (random init)"
    marker = ">"  # matplotlib marker in the figures
    in_paper = False  # a control: kept out of the statistics behind the paper's claims
    defaults = {**BayesianOptimisation.defaults, "prior_guided": False}


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

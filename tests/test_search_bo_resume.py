"""BO survives SIGKILL: the resumed study skips finished trials and ends exactly like an uninterrupted one."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from depthprune.search.bo import STUDY_FILE

N_TRIALS = 30
TESTS_DIR = str(Path(__file__).parent)  # tests/synthetic.py, for the scripts run in their own process

# A synthetic BO search in its own process; `delay` slows every evaluation request so the parent
# can kill it mid-search. Prints the result and how many requests this process made.
SCRIPT = f"""
import json, sys, time
sys.path.insert(0, {TESTS_DIR!r})
from depthprune.search.runner import run_search
from synthetic import random_objective

workdir, delay = sys.argv[1], float(sys.argv[2])
ev = random_objective(12, seed=3, interaction=0.3)
evaluate = ev.evaluate
ev.evaluate = lambda sets: (time.sleep(delay), evaluate(sets))[1]
result = run_search(ev, "bo", 4, ev.prior(), seed=7, workdir=workdir, params={{"n_trials": {N_TRIALS}}})
print(json.dumps({{
    "removed": result.removed,
    "loss": result.loss,
    "trace": [[list(e.removed), e.loss, e.memo_hit] for e in result.trace],
    "distinct": result.distinct_evaluations,
    "memo_hits": result.memo_hits,
    "search_seconds": result.search_seconds,
    "requests_this_process": ev.stats.distinct_evaluations + ev.stats.memo_hits,
}}))
"""


def run_script(workdir, delay: float) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(workdir), str(delay)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def completed_trials(workdir) -> int:
    """Finished trials in the child's study, read without touching its schema: an Optuna storage
    opened here while the child is still creating the tables races it (the child then failed)."""
    import sqlite3

    path = workdir / STUDY_FILE
    if not path.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)) as db:
            return int(db.execute("SELECT COUNT(*) FROM trials WHERE state = 'COMPLETE'").fetchone()[0])
    except sqlite3.Error:  # no trials table yet, or the child holds a write lock
        return 0


@pytest.mark.slow
def test_bo_killed_and_resumed_matches_uninterrupted(tmp_path):
    """Marked ``slow``: three BO searches in child processes, one killed (about 14 s under AVX2)."""
    reference = run_script(tmp_path / "uninterrupted", delay=0.0)
    assert reference["distinct"] == N_TRIALS  # distinct sets; repeats (memo hits in the trace) are extra

    workdir = tmp_path / "killed"
    delay = 0.1
    started = time.perf_counter()
    errors = open(tmp_path / "child.err", "w")  # noqa: SIM115 (closed below)
    child = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(workdir), str(delay)], stdout=subprocess.DEVNULL, stderr=errors
    )
    try:
        deadline = time.monotonic() + 240
        while completed_trials(workdir) < 12:  # past the 10 random start-up trials
            assert child.poll() is None, (
                "the search ended before it could be killed: " + (tmp_path / "child.err").read_text()[-2000:]
            )
            assert time.monotonic() < deadline, "the search made no progress"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
        errors.close()
    first_run_seconds = time.perf_counter() - started
    done_before_resume = completed_trials(workdir)
    assert 12 <= done_before_resume < N_TRIALS

    downtime = 2.0
    time.sleep(downtime)
    started = time.perf_counter()
    resumed = run_script(workdir, delay=0.0)
    second_run_seconds = time.perf_counter() - started

    # Finished trials are not redone: this process asked only for the remaining ones (the trial
    # cut short by the kill, if any, is redrawn and counts among them).
    assert resumed["requests_this_process"] == N_TRIALS - done_before_resume
    # Same answer, same trace, same counts as the uninterrupted run.
    for key in ("removed", "loss", "trace", "distinct", "memo_hits"):
        assert resumed[key] == reference[key], key
    # Search time counts compute across both processes, not the downtime between them.
    assert resumed["search_seconds"] >= delay * done_before_resume
    assert resumed["search_seconds"] <= first_run_seconds + second_run_seconds
    assert completed_trials(workdir) == N_TRIALS


# A small space (8 layers, M = 3: 56 sets, 30 trials): most proposals are repeats and many repairs
# fall back to the seeded random set, which is where a seed from trial.number went wrong.
SMALL_SPACE = (
    f"import sys; sys.path.insert(0, {TESTS_DIR!r})\n"
    + """
import json, os, signal, sys
from depthprune.search.runner import run_search
from synthetic import random_objective

workdir, kill_at = sys.argv[1], int(sys.argv[2])
ev = random_objective(8, seed=3, interaction=0.3)
evaluate, calls = ev.evaluate, []
def evaluate_or_die(sets):
    calls.append(sets)
    if len(calls) == kill_at:  # killed in the middle of this trial, its evaluation unfinished
        os.kill(os.getpid(), signal.SIGKILL)
    return evaluate(sets)
ev.evaluate = evaluate_or_die
result = run_search(ev, "bo", 3, ev.prior(), seed=7, workdir=workdir, params={"n_trials": 30, "n_startup_trials": 4})
print(json.dumps({
    "removed": result.removed,
    "trace": [[list(e.removed), e.loss, e.memo_hit] for e in result.trace],
    "diagnostics": result.diagnostics,
    "requests_this_process": len(calls),
}))
"""
)


def run_small_space(workdir, kill_at: int = 0) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SMALL_SPACE, str(workdir), str(kill_at)], capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_bo_killed_at_a_fixed_trial_resumes_to_the_uninterrupted_trace(tmp_path):
    """Marked ``slow``: BO searches in child processes, one killed (about 11 s under AVX2)."""
    reference = run_small_space(tmp_path / "uninterrupted")
    assert reference.returncode == 0, reference.stderr[-2000:]
    reference = json.loads(reference.stdout.splitlines()[-1])
    assert reference["diagnostics"]["repaired"] >= 15  # the repair path is what this test is about

    killed = run_small_space(tmp_path / "killed", kill_at=15)  # SIGKILL in trial 15 (0-based: 14)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert completed_trials(tmp_path / "killed") == 14
    resumed = run_small_space(tmp_path / "killed")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    resumed = json.loads(resumed.stdout.splitlines()[-1])

    # The interrupted trial keeps its number (failed), so the resumed trials' numbers run one ahead
    # of an uninterrupted run's; seeded by the completed trials, every draw and repair is the same.
    assert resumed["requests_this_process"] == 30 - 14
    assert resumed["trace"] == reference["trace"]
    assert resumed["removed"] == reference["removed"]
    assert resumed["diagnostics"] == reference["diagnostics"]


def test_bo_interrupted_by_an_error_resumes_to_the_uninterrupted_result(tmp_path):
    """The same in one process: an exception at a fixed trial (the study is left with a RUNNING trial)."""
    import pytest

    from depthprune.search.runner import run_search
    from synthetic import random_objective

    class Interrupted(Exception):
        pass

    def search(workdir, fail_at=None):
        ev = random_objective(7, seed=3, interaction=0.3)
        evaluate, calls = ev.evaluate, []

        def evaluate_or_fail(sets):
            calls.append(sets)
            if len(calls) == fail_at:
                raise Interrupted
            return evaluate(sets)

        ev.evaluate = evaluate_or_fail
        params = {"n_trials": 20, "n_startup_trials": 4}
        return run_search(ev, "bo", 3, ev.prior(), seed=7, workdir=workdir, params=params)

    reference = search(tmp_path / "uninterrupted")
    with pytest.raises(Interrupted):
        search(tmp_path / "interrupted", fail_at=10)
    resumed = search(tmp_path / "interrupted")
    assert [(e.removed, e.loss, e.memo_hit) for e in resumed.trace] == [
        (e.removed, e.loss, e.memo_hit) for e in reference.trace
    ]
    assert resumed.removed == reference.removed and resumed.diagnostics == reference.diagnostics


def test_bo_rerun_of_a_finished_study_does_no_work(tmp_path):
    first = run_script(tmp_path, delay=0.0)
    again = run_script(tmp_path, delay=0.0)
    assert again["requests_this_process"] == 0
    assert again["removed"] == first["removed"] and again["trace"] == first["trace"]
    # The stored compute time is reused, plus the little this process spent re-opening the study.
    assert first["search_seconds"] <= again["search_seconds"] < first["search_seconds"] + 5.0

"""One process per search workdir and per BO study (locking.py); jobs end with their Snakemake (parent_exit.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from depthprune import locking
from depthprune.cli import main
from depthprune.search.bo import STUDY_FILE
from depthprune.search.runner import WORKDIR_LOCK, run_search
from synthetic import random_objective
from test_search_bo_resume import completed_trials

N_TRIALS = 20
PARAMS = {"n_trials": N_TRIALS, "n_startup_trials": 4}

# A slow synthetic BO search in its own process (every evaluation request sleeps).
SLOW_BO = f"""
import sys, time
sys.path.insert(0, {str(Path(__file__).parent)!r})  # tests/synthetic.py
from depthprune.search.runner import run_search
from synthetic import random_objective

ev = random_objective(10, seed=3, interaction=0.3)
evaluate = ev.evaluate
ev.evaluate = lambda sets: (time.sleep(0.3), evaluate(sets))[1]
run_search(ev, "bo", 3, ev.prior(), seed=7, workdir=sys.argv[1], params={PARAMS!r})
"""

# Holds one lock file until killed.
HOLDER = """
import sys, time
from depthprune import locking

with locking.exclusive(sys.argv[1], "test"):
    print("held", flush=True)
    time.sleep(300)
"""


def synthetic_bo(workdir):
    ev = random_objective(10, seed=3, interaction=0.3)
    return run_search(ev, "bo", 3, ev.prior(), seed=7, workdir=workdir, params=PARAMS)


def wait_for(condition, child, what: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert child.poll() is None, f"the child ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_second_search_on_a_workdir_fails_at_once_and_a_killed_holder_leaves_no_lock(tmp_path, capsys):
    workdir = tmp_path / "work"
    first = subprocess.Popen([sys.executable, "-c", SLOW_BO, str(workdir)], stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: completed_trials(workdir) >= 2, first, "two trials")
        # A second search on the same workdir: refused at once, naming the lock file and the holder.
        started = time.perf_counter()
        with pytest.raises(locking.LockHeld) as refused:
            synthetic_bo(workdir)
        assert time.perf_counter() - started < 5
        message = str(refused.value)
        assert str(workdir / WORKDIR_LOCK) in message and f"PID {first.pid}" in message
        # The command line: exit 2 and one line, before anything else is read (the prior does not exist).
        out = tmp_path / "out"
        argv = ["search", "--model", "tiny:llama-8", "--calibration", "ppl_c4", "--algorithm", "bo"]
        argv += ["--budget", "2", "--prior", str(tmp_path / "missing.json"), "--workdir", str(workdir)]
        argv += ["--out-selection", str(out / "selection.json"), "--out-trace", str(out / "trace.csv")]
        assert main(argv) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
        assert len(errors) == 1 and f"PID {first.pid}" in errors[0] and WORKDIR_LOCK in errors[0], errors
        assert not out.exists()
        done_before_kill = completed_trials(workdir)
        assert done_before_kill < N_TRIALS
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    finally:
        if first.poll() is None:
            first.kill()
    # kill -9 left no stale lock: the next search takes the workdir and finishes the study, not past it.
    result = synthetic_bo(workdir)
    assert result.diagnostics["trials"] == N_TRIALS
    assert completed_trials(workdir) == N_TRIALS


def test_bo_study_has_its_own_lock(tmp_path):
    """The study is locked apart from the workdir: a BO search by any caller (timing, tests) is covered."""
    lock = tmp_path / f"{STUDY_FILE}.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(locking.LockHeld, match=f"BO study .*{STUDY_FILE}.*PID {holder.pid}"):
            synthetic_bo(tmp_path)
        assert completed_trials(tmp_path) == 0
    finally:
        holder.kill()
        holder.wait()


def test_lock_is_reentrant_in_one_process_and_released_after_the_block(tmp_path):
    path = tmp_path / "x.lock"
    with locking.exclusive(path, "x"), locking.exclusive(path, "x"):
        pass
    # Released: another process can take it now.
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(locking.LockHeld, match=f"PID {holder.pid}"), locking.exclusive(path, "x"):
            pass
    finally:
        holder.kill()
        holder.wait()


# --------------------------------------------------------------------------- parent_exit

# Stands in for Snakemake (its file is named snakemake): starts a depthprune command, records the
# child's PID, and dies with SIGKILL while the child still runs.
FAKE_SNAKEMAKE = """
import os, signal, subprocess, sys, time

child = subprocess.Popen([sys.executable, "-m", "depthprune", *sys.argv[2:]],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(4)  # the child is past its start-up, still computing
os.kill(os.getpid(), signal.SIGKILL)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
@pytest.mark.parametrize("setting", ["auto", "0"])
def test_a_job_ends_when_its_snakemake_is_killed(tmp_path, tiny_model_dir, data_dir, setting):
    script = tmp_path / "snakemake"
    script.write_text(FAKE_SNAKEMAKE)
    pid_file, prior = tmp_path / "child.pid", tmp_path / "prior.json"
    # The prior on the tiny model with 48 samples of C4: busy for longer than the parent lives.
    command = ["prior", "--model", str(tiny_model_dir), "--calibration", "ppl_c4", "--data-dir", str(data_dir)]
    command += ["--n-samples", "48", "--seq-len", "256", "--no-cache", "--out", str(prior)]
    env = {**os.environ, "DEPTHPRUNE_EXIT_WITH_PARENT": setting}
    parent = subprocess.run([sys.executable, str(script), str(pid_file), *command], env=env, timeout=120)
    assert parent.returncode == -signal.SIGKILL
    child = int(pid_file.read_text())
    try:
        if setting == "auto":  # its parent is Snakemake: the job ends with it, its output unwritten
            deadline = time.monotonic() + 5
            while alive(child) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not alive(child) and not prior.exists()
        else:  # DEPTHPRUNE_EXIT_WITH_PARENT=0: the orphan runs on (as every job did before)
            time.sleep(1)
            assert alive(child)
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)

"""How the suite is shared between pytest-xdist's workers (tests/conftest.py, pyproject's addopts): a
test file runs on one worker unless conftest.ANY_WORKER_FILES lists it, and files with slow tests are
handed out first. Checked on a small suite in a temporary folder with this repository's conftest.py and
pytest options."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ANY_WORKER_FILES

REPO = Path(__file__).resolve().parents[1]

# Each test sleeps a little and appends "<file> <worker>" to a log; one file's tests are marked slow.
TEST_FILE = """
import os, time
import pytest

{marks}
@pytest.mark.parametrize("i", range(4))
def test_one(i):
    time.sleep(0.3)
    with open(os.environ["SCHEDULE_LOG"], "a") as log:
        log.write(f"{{__name__}} {{os.environ.get('PYTEST_XDIST_WORKER', 'main')}}\\n")
"""


def small_suite(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "conftest.py", root / "tests" / "conftest.py")
    addopts = re.search(r'^addopts = "(.*)"$', (REPO / "pyproject.toml").read_text(), flags=re.M).group(1)
    (root / "pytest.ini").write_text(f"[pytest]\naddopts = {addopts}\nmarkers =\n    slow: slow\n")
    spread = sorted(ANY_WORKER_FILES)[0]  # e.g. tests/test_committed_figures.py
    for name, marks in (
        ("tests/test_a_fast.py", ""),
        ("tests/test_b_slow.py", "pytestmark = pytest.mark.slow"),
        (spread, "pytestmark = pytest.mark.slow"),
    ):
        (root / name).write_text(TEST_FILE.format(marks=marks))
    return root


def run(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "SCHEDULE_LOG": str(root / "schedule.log"), "HOME": str(root)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_file_stays_on_one_worker_unless_listed_as_any_worker(tmp_path):
    root = small_suite(tmp_path)
    proc = run(root, "-n", "2", "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    workers: dict[str, set[str]] = {}
    for line in (root / "schedule.log").read_text().splitlines():
        module, worker = line.split()
        workers.setdefault(module, set()).add(worker)
    spread = Path(sorted(ANY_WORKER_FILES)[0]).stem
    assert workers["test_a_fast"] < {"gw0", "gw1"} and workers["test_b_slow"] < {"gw0", "gw1"}, workers
    # the listed file's four tests are handed out one by one: both workers take some
    assert workers[spread] == {"gw0", "gw1"}, workers


def test_files_with_slow_tests_are_handed_out_first(tmp_path):
    root = small_suite(tmp_path)
    proc = run(root, "-n", "0", "-q", "--collect-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = list(dict.fromkeys(line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line))
    assert files[-1] == "tests/test_a_fast.py", files

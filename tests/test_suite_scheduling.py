"""How the suite is shared between pytest-xdist's workers (tests/conftest.py, pyproject's addopts): a
test file runs on one worker unless conftest.ANY_WORKER_FILES lists it; conftest.FIRST_FILES, then the
files with slow tests, are handed out first. Checked on small suites in a temporary folder with this
repository's conftest.py and pytest options."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ANY_WORKER_FILES, FIRST_FILES

REPO = Path(__file__).resolve().parents[1]

# A test file of four tests: each sleeps a little and appends "<module> <worker>" to a log.
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


def small_suite(root: Path, files: dict[str, str]) -> Path:
    """``files``: test file -> its marks line."""
    (root / "tests").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "conftest.py", root / "tests" / "conftest.py")
    addopts = re.search(r'^addopts = "(.*)"$', (REPO / "pyproject.toml").read_text(), flags=re.M).group(1)
    (root / "pytest.ini").write_text(f"[pytest]\naddopts = {addopts}\nmarkers =\n    slow: slow\n")
    for name, marks in files.items():
        (root / name).write_text(TEST_FILE.format(marks=marks))
    return root


SLOW = "pytestmark = pytest.mark.slow"
SPREAD = sorted(ANY_WORKER_FILES)[0]  # e.g. tests/test_committed_figures.py


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
    """The listed file's four slow tests are handed out first, one by one: each worker starts with
    one of them (as a single work unit the file would run on one worker); the other file's four tests
    run on one worker."""
    root = small_suite(tmp_path, {"tests/test_a_fast.py": "", SPREAD: SLOW})
    proc = run(root, "-n", "2", "-q")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    workers: dict[str, list[str]] = {}
    for line in (root / "schedule.log").read_text().splitlines():
        module, worker = line.split()
        workers.setdefault(module, []).append(worker)
    assert len(workers["test_a_fast"]) == 4 and len(set(workers["test_a_fast"])) == 1, workers
    assert set(workers[Path(SPREAD).stem]) == {"gw0", "gw1"}, workers


def test_files_with_slow_tests_are_handed_out_first(tmp_path):
    files = {"tests/test_a_fast.py": "", "tests/test_b_slow.py": SLOW, SPREAD: SLOW, FIRST_FILES[-1]: ""}
    root = small_suite(tmp_path, files)
    proc = run(root, "-n", "0", "-q", "--collect-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    order = list(dict.fromkeys(line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line))
    # FIRST_FILES (here: one, collected last by name), then the slow files by name, then the rest
    assert order == [FIRST_FILES[-1], "tests/test_b_slow.py", SPREAD, "tests/test_a_fast.py"], order


def test_suite_durations_sums_each_files_tests(tmp_path, capsys):
    """scripts/suite_durations.py: per test file, its tests and their summed seconds, longest first."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("suite_durations", REPO / "scripts" / "suite_durations.py")
    suite_durations = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite_durations)
    junit = tmp_path / "suite.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_a" name="test_1" time="1.5"/>'
        '<testcase classname="tests.test_a" name="test_2" time="2.0"/>'
        '<testcase classname="tests.test_b.TestB" name="test_3" time="4.3"/>'
        "</testsuite></testsuites>"
    )
    assert suite_durations.file_totals(str(junit)) == {"tests/test_b.py": (1, 4.3), "tests/test_a.py": (2, 3.5)}
    suite_durations.main([str(junit), "--top", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["4.3", "1", "tests/test_b.py"]
    assert lines[-2].split()[:2] == ["3.5", "2"] and lines[-1].split()[:2] == ["7.8", "3"]

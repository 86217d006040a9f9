"""The code passes ruff's lint and format checks with the configuration in pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["src", "tests", "scripts"]


def _ruff() -> list[str]:
    exe = shutil.which("ruff")
    if exe is None:
        pytest.fail("ruff is not installed: pip install -e '.[test]'")
    return [exe]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff(command):
    done = subprocess.run(_ruff() + command + PATHS, cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"ruff {' '.join(command)} failed:\n{done.stdout}{done.stderr}"

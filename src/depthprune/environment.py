"""The locked environment (requirements/lock.txt): which installed versions differ from it, and the
record of the versions a render or an aggregate was made with, written beside its files.

The lock decides the bytes of the committed files: a newer fontTools, for one, subsets the font a PDF
embeds differently, so the same figure is written as other bytes (docs/architecture.md, "The locked
environment"). A run on other versions is allowed; it is said, in one line, before anything is drawn.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from depthprune.io import atomic_write_json

log = logging.getLogger(__name__)

# The lock of a source checkout (an editable install); a wheel install has none, and nothing to compare.
LOCK_FILE = Path(__file__).resolve().parents[2] / "requirements" / "lock.txt"
# What shapes a rendered or aggregated file's bytes: the drawing, its embedded fonts, the table
# arithmetic and formatting, the parquet writer.
RENDER_PACKAGES = ("matplotlib", "fonttools", "seaborn", "pandas", "numpy", "scipy", "pyarrow")
# What shapes a model job's numbers besides (selection.json and lm_eval.json record them: io.package_versions).
MODEL_PACKAGES = ("torch", "transformers", "lm-eval")
RECORD_FILE = "environment.json"
NOT_INSTALLED = "not installed"

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def canonical_name(name: str) -> str:
    """A distribution name as PEP 503 compares them: lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: str | Path = LOCK_FILE) -> dict[str, str]:
    """name -> exact version of every ``name==version`` line of a pip-compile lock file."""
    pins = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        match = _PIN.match(line.strip())
        if match:
            pins[canonical_name(match.group(1))] = match.group(2)
    return pins


def installed_version(name: str) -> str:
    """The installed version without a local build tag (torch's ``+cpu``: the lock names the release)."""
    try:
        return importlib.metadata.version(name).split("+", 1)[0]
    except importlib.metadata.PackageNotFoundError:
        return NOT_INSTALLED


def installed_versions(names: Iterable[str]) -> dict[str, str]:
    return {canonical_name(name): installed_version(name) for name in names}


def drift(names: Iterable[str], lock: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """name -> (installed, locked) for each of ``names`` whose installed version is not the lock's.
    Empty without a lock file (an installed wheel: nothing to compare with)."""
    if lock is None:
        if not LOCK_FILE.is_file():
            return {}
        lock = read_lock(LOCK_FILE)
    differ = {}
    for name, version in installed_versions(names).items():
        locked = lock.get(name)
        if locked is not None and version != locked:
            differ[name] = (version, locked)
    return differ


def drift_message(differ: Mapping[str, tuple[str, str]], what: str) -> str:
    """One line: which installed versions differ from the lock, and what that means for ``what``."""
    listed = ", ".join(f"{name} {installed} (lock {locked})" for name, (installed, locked) in sorted(differ.items()))
    return (
        f"installed versions differ from requirements/lock.txt: {listed}; {what} may differ in bytes from "
        "the committed files (bash scripts/install.sh installs the lock)"
    )


def warn_drift(names: Iterable[str], what: str) -> dict[str, tuple[str, str]]:
    """Log the drift of ``names`` as one warning line (nothing when they match the lock); return it."""
    differ = drift(names)
    if differ:
        log.warning("%s", drift_message(differ, what))
    return differ


def write_record(folder: str | Path, names: Iterable[str]) -> Path:
    """Write ``folder/environment.json``: the exact versions of ``names`` the folder's files were made
    with (a render and a calibration-size figure in one folder write the same record)."""
    path = Path(folder) / RECORD_FILE
    atomic_write_json(path, {"packages": dict(sorted(installed_versions(names).items()))})
    return path

"""The locked environment (issue 65): requirements/lock.txt agrees with pyproject.toml, the install
script and the rules' conda environment install it, and a render or an aggregate records the versions
it was made with and says, in one line, which differ from the lock."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from depthprune import environment
from depthprune.environment import canonical_name, read_lock

tomllib = pytest.importorskip("tomllib")  # Python 3.11+, the Python the lock is compiled for

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements" / "lock.txt"


def project_requirements() -> list[Requirement]:
    """pyproject.toml's dependencies and its test extra."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"] + project["optional-dependencies"]["test"]]


def test_every_dependency_is_locked_within_its_range():
    lock = read_lock(LOCK)
    unlocked, outside = [], []
    for requirement in project_requirements():
        version = lock.get(canonical_name(requirement.name))
        if version is None:
            unlocked.append(requirement.name)
        elif not requirement.specifier.contains(version, prereleases=True):
            outside.append(f"{requirement.name}=={version} (pyproject: {requirement.specifier})")
    assert not unlocked, f"not in requirements/lock.txt: {unlocked} (run bash scripts/lock.sh)"
    assert not outside, f"locked outside pyproject.toml's ranges: {outside} (run bash scripts/lock.sh)"


def test_the_lock_is_exact_portable_and_says_how_it_is_made():
    text = LOCK.read_text()
    assert "bash scripts/lock.sh" in "\n".join(text.splitlines()[:8]), "the regenerating command at the top"
    pins = [line for line in text.splitlines() if line and not line.startswith(("#", " "))]
    # Every line an exact pin: no machine's find-links or index URL, no local build tag (+cpu is not on PyPI).
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[0-9][A-Za-z0-9.]*", line) for line in pins), [
        line for line in pins if not re.fullmatch(r"[A-Za-z0-9._-]+==[0-9][A-Za-z0-9.]*", line)
    ]
    lock = read_lock(LOCK)
    # The holds of requirements/lock.in: torch (installed first) and the fontTools of the committed PDFs.
    for line in (REPO / "requirements" / "lock.in").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            assert lock[canonical_name(name)] == version.strip(), line
    # Every package whose version shapes a rendered or aggregated file is pinned.
    assert set(environment.RENDER_PACKAGES + environment.MODEL_PACKAGES) <= set(lock)
    assert {"snakemake", "pytest", "ruff"} <= set(lock)


def test_snakemake_has_an_upper_bound():
    """The workflow reads Snakemake internals (workflow/rules/common.smk), which a major release may change."""
    (snakemake,) = [r for r in project_requirements() if canonical_name(r.name) == "snakemake"]
    assert not snakemake.specifier.contains("10.0") and snakemake.specifier.contains("9.99")


def test_install_script_and_conda_environment_install_the_lock():
    install = (REPO / "scripts" / "install.sh").read_text()
    assert "requirements/lock.txt" in install and "--unlocked" in install
    env = yaml.safe_load((REPO / "envs" / "depthprune.yaml").read_text())
    (pip,) = [entry["pip"] for entry in env["dependencies"] if isinstance(entry, dict)]
    # The same pins, listed (Snakemake builds the environment from a copy of the file elsewhere).
    assert {canonical_name(name): version for name, version in (entry.split("==") for entry in pip)} == read_lock(LOCK)
    python = [entry for entry in env["dependencies"] if isinstance(entry, str) and entry.startswith("python=")]
    assert python == ["python=3.11"], "the Python the lock is compiled for"


def test_ci_installs_into_a_new_venv_without_system_packages():
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"python3\.11 -m venv --clear \.venv\n", ci) and "system-site-packages" not in ci
    assert ci.index("source .venv/bin/activate") < ci.index("bash scripts/install.sh") < ci.index("python -m pytest -q")


def write_lock(path: Path, **pins: str) -> Path:
    path.write_text("".join(f"{name}=={version}\n" for name, version in pins.items()))
    return path


def test_drift_names_each_differing_package_with_both_versions(tmp_path, monkeypatch):
    installed = environment.installed_versions(["numpy", "pandas"])
    lock = read_lock(write_lock(tmp_path / "lock.txt", numpy="0.0.1", pandas=installed["pandas"]))
    assert environment.drift(["numpy", "pandas", "not-a-package-here"], lock) == {
        "numpy": (installed["numpy"], "0.0.1")
    }
    message = environment.drift_message({"numpy": (installed["numpy"], "0.0.1")}, "figures")
    assert "\n" not in message and f"numpy {installed['numpy']} (lock 0.0.1)" in message
    # No lock file (an installed wheel): nothing to compare with, no warning.
    monkeypatch.setattr(environment, "LOCK_FILE", tmp_path / "absent.txt")
    assert environment.drift(["numpy"]) == {}


def test_installed_torch_matches_its_pin_without_the_local_build_tag():
    torch_version = environment.installed_version("torch")
    assert "+" not in torch_version and torch_version != environment.NOT_INSTALLED


@pytest.fixture(scope="module")
def small_aggregate():
    return REPO / "results" / "aggregate"


def test_render_records_its_versions_and_warns_once_on_drift(tmp_path, monkeypatch, caplog, small_aggregate):
    from depthprune.reporting.render import render

    installed = environment.installed_versions(environment.RENDER_PACKAGES)
    monkeypatch.setattr(
        environment, "LOCK_FILE", write_lock(tmp_path / "lock.txt", **{**installed, "fonttools": "1.0"})
    )
    with caplog.at_level(logging.WARNING, logger="depthprune.environment"):
        written = render(small_aggregate, tmp_path / "figures", only=["table5"])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [environment.drift_message({"fonttools": (installed["fonttools"], "1.0")}, "figures and tables")]
    record = tmp_path / "figures" / environment.RECORD_FILE
    assert record in written
    assert yaml.safe_load(record.read_text()) == {"packages": dict(sorted(installed.items()))}
    caplog.clear()
    monkeypatch.setattr(environment, "LOCK_FILE", write_lock(tmp_path / "lock.txt", **installed))
    with caplog.at_level(logging.WARNING, logger="depthprune.environment"):
        render(small_aggregate, tmp_path / "figures", only=["table5"])
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_aggregate_records_its_versions(tmp_path):
    from depthprune.cli import main
    from test_cross_control import ALGORITHMS, write_run

    for algorithm in ALGORITHMS:
        write_run(tmp_path / "results", "ppl_c4", algorithm)
    write_run(tmp_path / "results", "none", "dense")
    assert main(["aggregate", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "aggregate")]) == 0
    record = yaml.safe_load((tmp_path / "aggregate" / environment.RECORD_FILE).read_text())
    assert record == {"packages": dict(sorted(environment.installed_versions(environment.RENDER_PACKAGES).items()))}


def test_committed_studies_record_the_versions_they_were_rendered_with():
    """Each committed study's figures folder holds environment.json, and under the lock it names the
    lock's versions (the committed files re-render byte for byte with them: test_committed_figures)."""
    from test_committed_figures import STUDIES

    lock = read_lock(LOCK)
    for study, (_, _, figures) in STUDIES.items():
        record = REPO / figures / environment.RECORD_FILE
        assert record.is_file(), f"{study}: {record.relative_to(REPO)} is not committed"
        packages = yaml.safe_load(record.read_text())["packages"]
        assert packages == {name: lock[name] for name in sorted(environment.RENDER_PACKAGES)}, study

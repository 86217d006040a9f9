"""A ``depthprune`` job ends when the Snakemake that started it dies (Linux).

``kill -9`` of Snakemake leaves its jobs running, reparented to init: a search then goes on filling
its BO study while a rerun starts another one on it (issue 37; the workdir lock, ``locking.py``,
refuses that second process). With ``PR_SET_PDEATHSIG`` the kernel sends this process SIGTERM when
its parent dies, so an orphaned job stops instead of computing results nobody collects. SIGTERM
ends Python at once; the file locks go with the process, and the temporaries of ``io.atomic_*``
are removed by the next run (``io.remove_stale_temporaries``).

Snakemake starts a ``shell:`` job as ``bash -c "set -euo pipefail; depthprune ..."``, and bash
replaces itself with the last command, so the job's parent is Snakemake itself. Only then is the
signal asked for (by default): a user's ``nohup depthprune ... &`` must outlive the shell it was
started from. ``DEPTHPRUNE_EXIT_WITH_PARENT=1`` asks for it under any parent, ``0`` never.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

ENV = "DEPTHPRUNE_EXIT_WITH_PARENT"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def exit_with_parent() -> bool:
    """Ask the kernel for SIGTERM when the parent process dies; True if asked."""
    if not sys.platform.startswith("linux"):
        return False
    from depthprune.io import env_flag

    setting = env_flag(ENV, default="auto", others=("auto",))  # ValueError on a value it does not know
    if setting is False:
        return False
    parent = os.getppid()
    if setting is not True and not is_snakemake(parent):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):  # no prctl in this C library
        return False
    if os.getppid() != parent:  # the parent died before the request: the signal will never come
        os.kill(os.getpid(), signal.SIGTERM)
    return True


def is_snakemake(pid: int) -> bool:
    """Whether process ``pid`` runs Snakemake (``snakemake ...``, ``python .../snakemake ...`` or
    ``python -m snakemake ...``), from its command line in /proc."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    return any(Path(arg).name == "snakemake" for arg in argv[:3])

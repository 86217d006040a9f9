"""Which Snakemake run is working in this folder, so that a second one is told why it cannot.

Snakemake refuses a second run that would write the same files with "Directory cannot be locked ...
It can be removed with the --unlock argument": advice that, while the first run still works, lets the
two overwrite each other's jobs. The Snakefile records the running study here when it starts jobs
(``onstart``: the process id, the start time and the command) and removes the record when it ends;
a later invocation (a dry run included) that finds the record of a live Snakemake process says so in
one line, with what to do instead. A record left by a killed run names a dead process: it is ignored.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from depthprune.io import atomic_write_json

RECORD = Path(".snakemake") / "depthprune-running.json"


def record_running(folder: str | os.PathLike = ".") -> None:
    """Record this process as the run working in ``folder`` (called when it starts jobs)."""
    atomic_write_json(
        Path(folder) / RECORD,
        {"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv)},
    )


def clear_running(folder: str | os.PathLike = ".") -> None:
    """Remove this process's record (called when its run ends); another process's is left."""
    path = Path(folder) / RECORD
    if (read_record(path) or {}).get("pid") == os.getpid():
        path.unlink(missing_ok=True)


def read_record(path: Path) -> dict | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("pid"), int) else None


def other_run(folder: str | os.PathLike = ".") -> dict | None:
    """The record of another live Snakemake process running in ``folder``, else None."""
    record = read_record(Path(folder) / RECORD)
    if record is None or record["pid"] == os.getpid():
        return None
    try:
        command = Path(f"/proc/{record['pid']}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None  # the process is gone (a killed run's record)
    return record if "snakemake" in command else None  # the id reused by another program


def running_message(record: dict, folder: str | os.PathLike = ".") -> str:
    """One line: who runs, and what to do instead of --unlock."""
    return (
        f"another snakemake (PID {record['pid']}, started {record.get('started', '?')}: "
        f"{record.get('command', '?')}) is running this study in {Path(folder).resolve()}; a run that starts "
        f"jobs beside it stops with 'Directory cannot be locked': wait for it or stop it (kill {record['pid']}), "
        "and do not pass --unlock while it runs (that is for a lock left by a killed run)"
    )

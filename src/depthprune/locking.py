"""One process at a time per search workdir and per BO study (an advisory file lock).

Two processes on one BO study each add trials until they see ``n_trials`` done, so together they
overshoot the budget (issue 37: 74 trials for ``n_trials=50``). That happens after ``kill -9`` of
Snakemake: its ``depthprune search`` children keep running, and a rerun starts a second process on
the same study. The lock makes the second process fail at once, naming the lock file and the
holder's PID.

``fcntl.flock`` locks belong to the open file, so the kernel releases them when the holder dies,
however it dies: a ``kill -9`` never leaves a stale lock, and nothing has to be cleaned up. The
lock file itself stays (unlinking it while another process has it open would let two processes
lock two different files under one name); it holds the last holder's PID and host, read only to
name the holder in the error. On Linux, NFS (v4, or v3 with lockd) carries flock locks between
machines.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator
from pathlib import Path

# Locks this process holds: path -> nesting depth. Taking a lock again in the same process (the
# search command locks its workdir before the model load, run_search locks it again) is a no-op:
# flock would otherwise refuse the second open file of the same process.
_HELD: dict[Path, int] = {}


class LockHeld(Exception):
    """Another process holds the lock (the command line reports it in one line, exit 2)."""


@contextlib.contextmanager
def exclusive(path: str | os.PathLike, what: str) -> Iterator[Path]:
    """Hold an exclusive lock on the file ``path`` (created if missing) for the block.

    Raises ``LockHeld`` at once, without waiting, if another process holds it; ``what`` names the
    locked thing in that message (e.g. "BO study work/bo_study.sqlite3").
    """
    path = Path(path).absolute()
    if path in _HELD:
        _HELD[path] += 1
        try:
            yield path
        finally:
            _HELD[path] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockHeld(
                f"{what} is in use by another process ({holder(fd)}; lock file {path}): wait for it to end "
                "or stop it; the lock goes with the process, so no file needs deleting"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        _HELD[path] = 1
        try:
            yield path
        finally:
            del _HELD[path]
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def holder(fd: int) -> str:
    """'PID 123 on host' from the lock file (the holder writes it right after locking)."""
    text = os.pread(fd, 200, 0).decode(errors="replace").split()
    if not text:
        return "PID not yet recorded"
    return f"PID {text[0]}" + (f" on {text[1]}" if len(text) > 1 else "")

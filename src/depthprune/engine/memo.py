"""The memo: each set's loss is computed once (docs/method.md §5).

``Memo`` keeps losses in memory, over an optional ``SqliteMemo`` shared by every job of one (model,
calibration) pair; ``NullMemo`` (``--no-cache``) remembers nothing, so every request runs from
scratch. Entries are keyed by ``memo_key`` of the evaluator's description.

The memo also keeps CBO's gate derivatives (g, H), which depend on the model and calibration but
not on M: the budgets' CBO jobs compute them once between them.

The SQLite memo: several Snakemake jobs may read and write the same file at once, and each new
loss is committed as soon as it is known, so a killed job loses at most the evaluation in flight.
Rows are keyed by a hash of everything that changes a loss (the model's content fingerprint,
calibration config, data hash, seed, dtype, device type, scoring-code version).

Two journal modes (``journal``):

- ``wal`` (default): concurrent readers never wait for a writer. WAL needs shared memory between
  the processes, so every process must run on the same machine: right for local runs.
- ``delete``: the classic rollback journal with file locks, for memos on a network filesystem
  written from several nodes (the SLURM profile selects it). Every statement retries on "database
  is locked" (the busy timeout, plus an outer retry loop for filesystems whose locks report busy
  without waiting).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import sqlite3
import time
from pathlib import Path

import numpy as np

from depthprune.engine.records import GateDerivatives, MemoEntry, RemovedSet
from depthprune.errors import InputError
from depthprune.io import format_layers

JOURNAL_MODES = ("wal", "delete")
_RETRIES = 30

# Recorded in describe() for people and for search's prior check, but no part of the memo key: a
# loss depends on the model's content (model_fingerprint), not on its spec or path, and protecting a
# layer changes which sets are allowed, not their losses. calibration_tokens follows from the data
# (data_hash): recorded for people, kept out so that memos written before it was recorded stay warm.
_NOT_IN_KEY = ("model", "model_path", "protected", "calibration_tokens")


def memo_key(description: dict) -> str:
    """The memo key: SHA-256 of the description without the fields in ``_NOT_IN_KEY``."""
    keyed = {k: v for k, v in description.items() if k not in _NOT_IN_KEY}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:20]


class Memo:
    """Losses in memory, read from and written through to ``sqlite`` (if any).

    ``read_sqlite=False`` (``--recompute``): the file is not read, and every loss computed again
    replaces the stored one.
    """

    def __init__(self, sqlite: SqliteMemo | None = None, read_sqlite: bool = True):
        self.sqlite = sqlite
        self.read_sqlite = read_sqlite
        self._entries: dict[RemovedSet, MemoEntry] = {}
        self._derivatives: GateDerivatives | None = None

    def get(self, key: RemovedSet) -> MemoEntry | None:
        found = self._entries.get(key)
        if found is None and self.sqlite is not None and self.read_sqlite:
            found = self.sqlite.get(key)
            if found is not None:
                self._entries[key] = found
        return found

    def put(self, key: RemovedSet, entry: MemoEntry) -> None:
        self._entries[key] = entry
        if self.sqlite is not None:
            self.sqlite.put(key, *entry, replace=not self.read_sqlite)

    def __contains__(self, key: RemovedSet) -> bool:
        return self.get(key) is not None

    def get_derivatives(self) -> GateDerivatives | None:
        if self._derivatives is None and self.sqlite is not None and self.read_sqlite:
            self._derivatives = self.sqlite.get_derivatives()
        return self._derivatives

    def put_derivatives(self, derivatives: GateDerivatives) -> None:
        self._derivatives = derivatives
        if self.sqlite is not None:
            self.sqlite.put_derivatives(derivatives, replace=not self.read_sqlite)


class NullMemo:
    """The memo of ``--no-cache``: knows nothing, keeps nothing."""

    sqlite = None

    def get(self, key: RemovedSet) -> None:
        return None

    def put(self, key: RemovedSet, entry: MemoEntry) -> None:
        pass

    def __contains__(self, key: RemovedSet) -> bool:
        return False

    def get_derivatives(self) -> None:
        return None

    def put_derivatives(self, derivatives: GateDerivatives) -> None:
        pass


# SQLite's verdicts on the file's content; every other error (SQLITE_IOERR, SQLITE_FULL,
# SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_PERM, ...) is about the disk, the limits or the path.
_CORRUPT_FILE = ("SQLITE_NOTADB", "SQLITE_CORRUPT")


def memo_error(path: str | Path, err: sqlite3.Error) -> InputError:
    """The error to report for ``err`` on the memo ``path``: deleting the file is advised only when
    SQLite says its content is not a memo; an I/O error (disk full, ``ulimit -f``, permissions, a
    folder given as --memo) says so, because the file itself may be a good cache."""
    name = getattr(err, "sqlite_errorname", "") or ""
    if Path(path).is_dir():
        return InputError(f"{path}: the memo (option --memo) is a folder; name an SQLite file instead")
    if name.startswith(_CORRUPT_FILE) and not is_sqlite_file(path):
        return not_a_memo(path)
    if name.startswith(_CORRUPT_FILE):
        return InputError(
            f"{path}: not a readable memo SQLite file ({err}); if depthprune wrote it, delete it to start a "
            "new memo, else pass another path as --memo"
        )
    return InputError(
        f"{path}: I/O error on the memo SQLite file ({err}{', ' + name if name else ''}): check free disk "
        "space, the file size limit (ulimit -f) and permissions; the file itself may be intact, keep it"
    )


# The first 16 bytes of every SQLite database file (https://www.sqlite.org/fileformat.html).
_SQLITE_HEADER = b"SQLite format 3\x00"


def is_sqlite_file(path: str | Path) -> bool:
    """Whether ``path`` begins as an SQLite database does (an empty file counts: SQLite makes it one)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_SQLITE_HEADER))
    except OSError:
        return False
    return head in (b"", _SQLITE_HEADER)


def not_a_memo(path: str | Path) -> InputError:
    """A --memo that is some other file (a user's notes.txt): it is no cache, so nothing suggests deleting it."""
    return InputError(
        f"{path}: not a depthprune memo (not an SQLite file); --memo names a memo SQLite file that depthprune "
        "creates and fills: pass another path"
    )


def check_memo_file(path: str | Path | None) -> None:
    """Raise ValueError naming ``path`` if it exists and is not a readable SQLite memo: checked before
    the model loads (``cli_common.check_calibration_inputs``). A missing file is fine (created)."""
    if path is None or not Path(path).exists():
        return
    if Path(path).is_file() and not is_sqlite_file(path):
        raise not_a_memo(path)
    try:
        with contextlib.closing(sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, timeout=60)) as db:
            verdict = db.execute("PRAGMA quick_check").fetchone()[0]
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as err:
        if "locked" in str(err) or "busy" in str(err):
            return  # a job writing it right now: SqliteMemo waits and retries
        raise memo_error(path, err) from err
    if verdict != "ok":
        raise InputError(
            f"{path}: corrupt memo SQLite file ({verdict}); if depthprune wrote it, delete it to start a new memo, "
            "else pass another path as --memo"
        )
    if tables and "losses" not in tables:
        raise InputError(f"{path}: an SQLite file without the memo's tables (option --memo names another file?)")


class SqliteMemo:
    """Persistent memo of subset losses in one SQLite file (module doc)."""

    def __init__(self, path: str | Path, config_key: str, description: dict, journal: str = "wal"):
        if journal not in JOURNAL_MODES:
            raise InputError(
                f"memo journal mode {journal!r} (option memo_journal): expected one of {', '.join(JOURNAL_MODES)}"
            )
        try:
            self._open(path, config_key, description, journal)
        except sqlite3.DatabaseError as err:  # "file is not a database", "database disk image is malformed"
            if "locked" in str(err) or "busy" in str(err):
                raise
            raise memo_error(path, err) from err

    def _open(self, path: str | Path, config_key: str, description: dict, journal: str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.config_key = config_key
        self.journal = journal
        self._db = sqlite3.connect(self.path, timeout=120, isolation_level=None)
        self._db.execute("PRAGMA busy_timeout=120000")
        # Switching away from WAL needs the only connection; a busy file keeps its mode, and the
        # mode actually in force is what matters for correctness on this filesystem.
        self._run(f"PRAGMA journal_mode={journal.upper()}")
        self._run("CREATE TABLE IF NOT EXISTS configs (config TEXT PRIMARY KEY, description TEXT NOT NULL)")
        self._run(
            "CREATE TABLE IF NOT EXISTS losses (config TEXT NOT NULL, removed TEXT NOT NULL, loss REAL NOT NULL,"
            " accuracy REAL, seconds REAL NOT NULL DEFAULT 0, PRIMARY KEY (config, removed))"
        )
        self._run(
            "CREATE TABLE IF NOT EXISTS gate_derivatives (config TEXT PRIMARY KEY, n INTEGER NOT NULL,"
            " grad BLOB NOT NULL, hess BLOB NOT NULL, dtype TEXT NOT NULL, seconds REAL NOT NULL)"
        )
        self._run("INSERT OR IGNORE INTO configs VALUES (?, ?)", (config_key, json.dumps(description, sort_keys=True)))

    def _run(self, sql: str, args: tuple = ()):
        """Execute with retries on a locked database (network filesystems may not wait on their own)."""
        delay = 0.05
        for attempt in range(_RETRIES):
            try:
                return self._db.execute(sql, args).fetchall()
            except sqlite3.OperationalError as err:
                if ("locked" not in str(err) and "busy" not in str(err)) or attempt == _RETRIES - 1:
                    raise
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 2.0)
        raise AssertionError("unreachable")

    @property
    def journal_mode(self) -> str:
        return str(self._run("PRAGMA journal_mode")[0][0]).lower()

    def get(self, removed: RemovedSet) -> MemoEntry | None:
        """(loss, accuracy, compute seconds when first computed), or None."""
        rows = self._run(
            "SELECT loss, accuracy, seconds FROM losses WHERE config = ? AND removed = ?",
            (self.config_key, format_layers(removed)),
        )
        if not rows:
            return None
        row = rows[0]
        return MemoEntry(float(row[0]), None if row[1] is None else float(row[1]), float(row[2]))

    def put(
        self, removed: RemovedSet, loss: float, accuracy: float | None, seconds: float, replace: bool = False
    ) -> None:
        # IGNORE keeps the first computation (its seconds are the set's cost); a recomputed loss
        # (--recompute, replace=True) supersedes the stored one.
        verb = "REPLACE" if replace else "IGNORE"
        self._run(
            f"INSERT OR {verb} INTO losses VALUES (?, ?, ?, ?, ?)",
            (self.config_key, format_layers(removed), loss, accuracy, seconds),
        )

    def get_derivatives(self) -> GateDerivatives | None:
        """CBO's (g, H) for this configuration, as first computed, or None."""
        rows = self._run(
            "SELECT n, grad, hess, dtype, seconds FROM gate_derivatives WHERE config = ?", (self.config_key,)
        )
        if not rows:
            return None
        n, grad, hess, dtype, seconds = rows[0]
        return GateDerivatives(
            np.frombuffer(grad, dtype=np.float64).copy(),
            np.frombuffer(hess, dtype=np.float64).reshape(n, n).copy(),
            str(dtype),
            float(seconds),
        )

    def put_derivatives(self, derivatives: GateDerivatives, replace: bool = False) -> None:
        grad = np.ascontiguousarray(derivatives.grad, dtype=np.float64)
        hess = np.ascontiguousarray(derivatives.hess, dtype=np.float64)
        verb = "REPLACE" if replace else "IGNORE"
        self._run(
            f"INSERT OR {verb} INTO gate_derivatives VALUES (?, ?, ?, ?, ?, ?)",
            (self.config_key, len(grad), grad.tobytes(), hess.tobytes(), derivatives.dtype, derivatives.cost_seconds),
        )

    def __len__(self) -> int:
        return self._run("SELECT COUNT(*) FROM losses WHERE config = ?", (self.config_key,))[0][0]

    def close(self) -> None:
        self._db.close()

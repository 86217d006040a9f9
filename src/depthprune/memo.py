"""Persistent memo of subset losses, shared by every search of one (model, calibration) pair.

Several Snakemake jobs may read and write the same file at once: SQLite in WAL mode with a busy
timeout handles that, and each new loss is committed as soon as it is known, so a killed job loses
at most the evaluation in flight. Rows are keyed by a hash of everything that changes a loss
(model weights path, calibration config, data hash, seed, dtype, device type).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from depthprune.io import format_layers


class SqliteMemo:
    def __init__(self, path: str | Path, config_key: str, description: dict):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.config_key = config_key
        self._db = sqlite3.connect(self.path, timeout=120, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=120000")
        self._db.execute("CREATE TABLE IF NOT EXISTS configs (config TEXT PRIMARY KEY, description TEXT NOT NULL)")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS losses (config TEXT NOT NULL, removed TEXT NOT NULL, loss REAL NOT NULL,"
            " accuracy REAL, seconds REAL NOT NULL DEFAULT 0, PRIMARY KEY (config, removed))"
        )
        self._db.execute(
            "INSERT OR IGNORE INTO configs VALUES (?, ?)", (config_key, json.dumps(description, sort_keys=True))
        )

    def get(self, removed: tuple[int, ...]) -> tuple[float, float | None, float] | None:
        """(loss, accuracy, compute seconds when first computed), or None."""
        row = self._db.execute(
            "SELECT loss, accuracy, seconds FROM losses WHERE config = ? AND removed = ?", (self.config_key, format_layers(removed))
        ).fetchone()
        return None if row is None else (float(row[0]), None if row[1] is None else float(row[1]), float(row[2]))

    def put(self, removed: tuple[int, ...], loss: float, accuracy: float | None, seconds: float) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO losses VALUES (?, ?, ?, ?, ?)",
            (self.config_key, format_layers(removed), loss, accuracy, seconds),
        )

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM losses WHERE config = ?", (self.config_key,)).fetchone()[0]

    def close(self) -> None:
        self._db.close()

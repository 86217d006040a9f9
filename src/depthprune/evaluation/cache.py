"""Content-addressed evaluation cache: identical removed sets are evaluated once per model.

Different search algorithms (or calibrations) often choose the same removed set. The cache key is
the SHA-256 of a canonical JSON payload holding everything that can change a figure (model spec,
removed set, evaluation settings, data identity, dtype/device, package versions), so a hit can be
reused as is, relabelled with the caller's calibration/budget/algorithm.

Layout: ``<root>/<sha>/lm_eval.json`` (raw lm-eval results), ``<root>/<sha>/samples.parquet``
(per-document scores and per-window NLLs, for the bootstrap) and ``<root>/<sha>/entry.json`` (key
payload, metrics, seconds), each written atomically, ``entry.json`` last: an entry exists only once
it is complete. ``<root>/<sha>.lock`` (``fcntl.flock``) serialises jobs that want the same entry,
so a second job waits for the first and then reads its result instead of evaluating again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthprune.io import atomic_write_json, read_json

log = logging.getLogger(__name__)

ENTRY = "entry.json"
RAW = "lm_eval.json"
SAMPLES = "samples.parquet"  # per-document scores and per-window NLLs (harness.SAMPLE_COLUMNS)


def cache_key(payload: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON form of ``payload`` (sorted keys, no whitespace)."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class CacheEntry:
    key: str
    payload: dict  # what the key hashes
    metrics: list[dict]  # unlabelled rows: benchmark, metric, value, stderr, n
    seconds: dict[str, float]  # per benchmark, of the run that filled the entry
    raw: dict  # lm-eval results (+ depthprune section)
    samples: list[dict] | None = None  # per-document rows; None in entries written before they were kept


class EvalCache:
    def __init__(self, root: str | Path):
        self.root = Path(root)

    def entry_dir(self, key: str) -> Path:
        return self.root / key

    def get(self, key: str) -> CacheEntry | None:
        folder = self.entry_dir(key)
        if not (folder / ENTRY).is_file():
            return None
        entry = read_json(folder / ENTRY)
        return CacheEntry(
            key=key,
            payload=entry["payload"],
            metrics=entry["metrics"],
            seconds=entry["seconds"],
            raw=read_json(folder / RAW),
            samples=_read_samples(folder / SAMPLES),
        )

    def put(self, entry: CacheEntry) -> None:
        folder = self.entry_dir(entry.key)
        atomic_write_json(folder / RAW, entry.raw)
        if entry.samples is not None:
            import pandas as pd

            from depthprune.io import atomic_write_parquet

            frame = pd.DataFrame(entry.samples, columns=["benchmark", "unit", "metric", "value"])
            atomic_write_parquet(folder / SAMPLES, frame.astype({"unit": "int64", "value": "float64"}))
        atomic_write_json(
            folder / ENTRY,
            {"key": entry.key, "payload": entry.payload, "metrics": entry.metrics, "seconds": entry.seconds},
        )
        log.info("evaluation cache: stored %s", folder)

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Exclusive lock on one key across processes (held while that entry is being computed).

        The lock file is deleted by its holder before release, on success and on failure, so none
        is left behind; one left by a killed job is taken over and deleted by the next. A waiter
        that wakes up on a file already deleted (its inode no longer at the path) starts over.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{key}.lock"
        while True:
            with open(path, "a+") as fh:  # closing releases the flock
                fcntl.flock(fh, fcntl.LOCK_EX)
                try:
                    same = os.stat(path).st_ino == os.fstat(fh.fileno()).st_ino
                except FileNotFoundError:
                    same = False
                if not same:
                    continue  # the previous holder deleted this file: lock the new one
                try:
                    yield
                finally:
                    path.unlink(missing_ok=True)
                return


def _read_samples(path: Path) -> list[dict] | None:
    if not path.is_file():
        return None
    import pandas as pd

    return pd.read_parquet(path).to_dict("records")

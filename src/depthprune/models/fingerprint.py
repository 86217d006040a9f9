"""Content fingerprint of a model folder: what the caches key on instead of the model's path.

Two checkpoints exported one after the other into the same folder must never share a cached loss
or evaluation. The fingerprint is the SHA-256 over every file of the folder (name and content
hash). Hashing an 8B checkpoint takes a while, so the result is stored beside the weights
(``.depthprune-fingerprint.json``) together with each file's size and mtime, and reused as long as
those are unchanged. Files of a Hugging Face hub snapshot are links to blobs named by their own
SHA-256: that name is used, so a hub model costs nothing to fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path

log = logging.getLogger(__name__)

FINGERPRINT_FILE = ".depthprune-fingerprint.json"
_SKIP = {FINGERPRINT_FILE, "depthprune-ready"}  # our own bookkeeping, not model content
_BLOB = re.compile(r"^[0-9a-f]{64}$")


def _files(folder: Path) -> list[Path]:
    out = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out.extend(Path(root) / name for name in sorted(files) if name not in _SKIP and not name.startswith("."))
    return out


def _stat_list(folder: Path, files: list[Path]) -> list[list]:
    rows = []
    for path in files:
        st = path.stat()  # follows links: the blob's size and mtime
        rows.append([path.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns])
    return rows


def _file_hash(path: Path) -> str:
    if path.is_symlink():
        target = os.readlink(path)
        if _BLOB.match(Path(target).name):
            return Path(target).name  # hub blob: named by its SHA-256
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def folder_fingerprint(folder: str | Path) -> str:
    """SHA-256 (hex, 20 chars) of the folder's files; cached beside them while they are unchanged."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder {folder} not found (cannot fingerprint it)")
    files = _files(folder)
    stats = _stat_list(folder, files)
    cache = folder / FINGERPRINT_FILE
    try:
        stored = json.loads(cache.read_text(encoding="utf-8"))
        if stored.get("files") == stats and stored.get("fingerprint"):
            return stored["fingerprint"]
    except (OSError, ValueError):
        pass
    log.info("fingerprinting the model files in %s (once; cached in %s)", folder, FINGERPRINT_FILE)
    digest = hashlib.sha256()
    for path, row in zip(files, stats):
        digest.update(f"{row[0]}\0{_file_hash(path)}\n".encode())
    fingerprint = digest.hexdigest()[:20]
    try:
        from depthprune.io import atomic_write_json

        atomic_write_json(cache, {"fingerprint": fingerprint, "files": stats})
    except OSError as err:  # a read-only folder (shared hub cache): recomputed next time
        log.debug("cannot store the fingerprint in %s (%s)", folder, err)
    return fingerprint


SOURCE_HASHES_DIR = ".depthprune-source-hashes"  # in the model cache: one record per converted source file


def source_sha256(path: str | Path, cache_dir: str | Path) -> str:
    """SHA-256 (hex) of a source file that is converted into the model cache (a GGUF).

    What the converted folder is keyed by, so that two files of the same name never share a
    conversion. Hashed once (streamed; a few seconds per GB) and recorded in ``cache_dir`` with the
    file's path, size and mtime; the record is reused while those are unchanged, as the folder
    fingerprint's is, so the model jobs that convert nothing only stat the file.
    """
    path = Path(path).resolve()
    st = path.stat()
    stats = {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    record = Path(cache_dir) / SOURCE_HASHES_DIR / f"{hashlib.sha256(str(path).encode()).hexdigest()[:20]}.json"
    try:
        stored = json.loads(record.read_text(encoding="utf-8"))
        if {key: stored.get(key) for key in stats} == stats and _BLOB.match(str(stored.get("sha256"))):
            return stored["sha256"]
    except (OSError, ValueError):
        pass
    log.info("hashing %s (once; recorded in %s)", path, record.parent)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    sha256 = digest.hexdigest()
    try:
        from depthprune.io import atomic_write_json

        atomic_write_json(record, {**stats, "sha256": sha256})
    except OSError as err:  # a read-only cache: hashed again next time
        log.debug("cannot record the hash of %s in %s (%s)", path, record, err)
    return sha256
